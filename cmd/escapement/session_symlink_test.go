package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// checkStillLinked checks that link is still a symlink to real.
func checkStillLinked(t *testing.T, link, real string) {
	t.Helper()
	st, err := os.Lstat(link)
	if err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is no longer a symlink (%v, %v): the session forked", link, st.Mode(), err)
	}
	if to, _ := filepath.EvalSymlinks(link); to != real {
		t.Fatalf("%s now points to %s, want %s", link, to, real)
	}
}

// TestResumeThroughSymlink: a session resumed through a symlink is resumed
// in the real file — its unfinished turn cut there, the original kept as a
// real copy beside it, the next turn appended to it — and the symlink
// still points to it; a crashed run's log is found beside the real file,
// whichever name the crashed run and the resume used.
func TestResumeThroughSymlink(t *testing.T) {
	bin := buildBinary(t)
	srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if last := r.Body.Last(); last.Role == "user" && last.Content == "crashed prompt" {
			_ = w.Text("ok: ")
			w.Stall(ctx) // the process is killed meanwhile
			return
		}
		_ = w.Answer("ok: "+r.Body.FirstUser(), 4)
	})
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "real"), 0o700); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "real", "s.jsonl")
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(filepath.Join("real", "s.jsonl"), link); err != nil {
		t.Fatal(err)
	}
	writeLines(t, real,
		`{"type":"session","format":1,"model":"m","created":"2025-01-01T00:00:00Z"}`,
		`{"type":"message","message":{"role":"user","content":"first"}}`,
		`{"type":"message","message":{"role":"assistant","content":"ok: first"}}`,
		`{"type":"turn_end","turn":1,"outcome":"completed"}`,
		`{"type":"message","message":{"role":"user","content":"never answered"}}`)
	original, _ := os.ReadFile(real)

	code, _, errb := runCLIWithInput(t, "second\n", "chat", "--resume", link, "--workspace", dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb)
	}
	checkStillLinked(t, link, real)
	ls, err := session.Load(real)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Turns != 2 || ls.History[len(ls.History)-2].Content != "second" {
		t.Fatalf("the real file: %d turns, history %+v", ls.Turns, ls.History)
	}
	backups, _ := filepath.Glob(real + ".torn-*")
	if len(backups) != 1 {
		t.Fatalf("backups beside the real file: %v", backups)
	}
	if st, err := os.Lstat(backups[0]); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("the backup %s is not a regular file: %v %v", backups[0], st.Mode(), err)
	}
	if kept, _ := os.ReadFile(backups[0]); !bytes.Equal(kept, original) {
		t.Fatalf("the backup holds %q, want the original", kept)
	}

	// A run through the link killed in the middle of a turn: its log is
	// beside the real file, and a resume through either name continues
	// that turn in the real file.
	for i, name := range []string{link, real} {
		before, _ := os.ReadFile(real)
		p := startBinary(t, bin, srv, dir, "chat", "--resume", link, "--workspace", dir)
		p.stdin.Write([]byte("crashed prompt\n"))
		eventually(t, "the stream", func() bool { return strings.Contains(p.stdout.String(), "ok: ") })
		p.kill9(t)
		if _, err := os.Stat(real + session.LogSuffix); err != nil {
			t.Fatalf("no log beside the real file: %v", err)
		}
		code, _, errb := runCLIWithInput(t, "", "chat", "--resume", name, "--workspace", dir)
		if code != exitOK || !strings.Contains(errb, "continuing it from "+real+session.LogSuffix) {
			t.Fatalf("resume through %s: exit %d\nstderr %s", name, code, errb)
		}
		checkStillLinked(t, link, real)
		after, _ := os.ReadFile(real)
		if !bytes.HasPrefix(after, before) {
			t.Fatalf("resume through %s rewrote the real file's earlier records", name)
		}
		msgs := messages(readSession(t, real))
		if n := countMessages(msgs, func(m kernel.Message) bool { return m.Content == "crashed prompt" }); n != i+1 {
			t.Fatalf("the crashed turns' prompts are in the session %d times, want %d", n, i+1)
		}
	}
}
