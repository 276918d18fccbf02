package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel/trace"
)

// TestBadOutputPathWritesNothing: every output path is checked and opened
// before anything is written. A bad --trace used to leave a header-only
// session file behind that then blocked the corrected re-run ("already
// holds a session"); a bad --session must not leave a trace file either,
// nor empty an existing one.
func TestBadOutputPathWritesNothing(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("ok", 2)
	})
	dir := t.TempDir()
	sess, tr := filepath.Join(dir, "s.jsonl"), filepath.Join(dir, "t.jsonl")
	for _, bad := range []struct{ trace, want string }{
		{filepath.Join(dir, "no", "such", "dir", "t.jsonl"), "--trace: open " + filepath.Join(dir, "no", "such", "dir", "t.jsonl")},
		{dir, "--trace: " + dir + " is a directory"},
	} {
		code, _, errb := runCLI(t, "run", "hi", "--session", sess, "--trace", bad.trace, "--workspace", dir)
		if code != exitUsage || !strings.Contains(errb, bad.want) {
			t.Fatalf("--trace %s: exit %d, stderr %q", bad.trace, code, errb)
		}
		if _, err := os.Stat(sess); !os.IsNotExist(err) {
			t.Fatalf("--trace %s refused, but the session file was made (%v)", bad.trace, err)
		}
	}
	if code, _, errb := runCLI(t, "run", "hi", "--session", sess, "--trace", tr, "--workspace", dir); code != exitOK {
		t.Fatalf("the corrected run: exit %d %s", code, errb)
	}
	// A trace replaces an older trace, never other data: a session named
	// as --trace by mistake is refused and kept.
	if code, _, errb := runCLI(t, "run", "again", "--session", filepath.Join(dir, "s2.jsonl"), "--trace", tr, "--workspace", dir); code != exitOK {
		t.Fatalf("over an older trace: exit %d %s", code, errb)
	}
	before, _ := os.ReadFile(sess)
	for _, args := range [][]string{
		{"--session", filepath.Join(dir, "s3.jsonl"), "--trace", sess},
		{"--session", filepath.Join(dir, "s4.jsonl"), "--trace", filepath.Join(dir, "s4.jsonl")},
	} {
		code, _, errb := runCLI(t, append([]string{"run", "hi", "--workspace", dir}, args...)...)
		if code != exitUsage || !(strings.Contains(errb, "is not an escapement trace") || strings.Contains(errb, "name the same file")) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errb)
		}
	}
	if after, _ := os.ReadFile(sess); string(after) != string(before) {
		t.Error("the session named as --trace was changed")
	}

	// A bad --session (a directory): the trace is neither made nor emptied.
	for _, existing := range []bool{false, true} {
		tr2 := filepath.Join(dir, "t2.jsonl")
		if existing {
			writeFile(t, dir, "t2.jsonl", "an older trace\n")
		}
		code, _, errb := runCLI(t, "run", "hi", "--session", dir, "--trace", tr2, "--workspace", dir)
		if code != exitUsage || !strings.Contains(errb, "--session "+dir+" is a directory") {
			t.Fatalf("--session DIR: exit %d, stderr %q", code, errb)
		}
		data, err := os.ReadFile(tr2)
		switch {
		case existing && string(data) != "an older trace\n":
			t.Errorf("the existing trace was changed: %q %v", data, err)
		case !existing && !os.IsNotExist(err):
			t.Errorf("a trace file was left behind: %v", err)
		}
	}
}

// TestSessionDirSaysDirectory: --session naming a directory says so (it
// said "already holds a session"); a file that is not a session says
// that (also one of JSON lines of another kind, such as a trace), and one
// that is says how to continue it.
func TestSessionDirSaysDirectory(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	dir := t.TempDir()
	notes := writeFile(t, dir, "notes.txt", "my notes\n")
	old := writeFile(t, dir, "old.jsonl", `{"type":"session","format":1}`+"\n")
	trace := writeFile(t, dir, "trace.jsonl", `{"type":"header","format":1}`+"\n")
	for _, tc := range []struct{ session, want string }{
		{dir, "--session " + dir + " is a directory; name a file"},
		{notes, "--session " + notes + " is not empty and not an escapement session"},
		{trace, "--session " + trace + " is not empty and not an escapement session"},
		{old, "--session " + old + " already holds a session; continue it with `escapement chat --resume " + old + "`"},
	} {
		code, _, errb := runCLI(t, "run", "hi", "--session", tc.session, "--workspace", dir)
		if code != exitUsage || !strings.Contains(errb, tc.want) || (tc.session == dir && strings.Contains(errb, "already holds")) {
			t.Errorf("--session %s: exit %d, stderr %q; want %q", tc.session, code, errb, tc.want)
		}
	}
	if data, _ := os.ReadFile(notes); string(data) != "my notes\n" {
		t.Errorf("notes.txt changed: %q", data)
	}
}

// TestKilledFirstTurnResumes: `escapement chat` killed with SIGKILL in the
// middle of its first turn (the server stalls mid-stream) leaves a session
// file holding its header and the first prompt (both files used to be
// empty: everything waited in buffers for the turn's end) and a trace
// whose every line is whole; with its write-ahead log moved away (the
// fallback docs/durable.md gives for a log that cannot be used),
// `chat --resume FILE < /dev/null` accepts the file alone, keeping its
// original under FILE.torn-*. (With the log, the turn is continued:
// TestKill9MidStreamContinues.)
func TestKilledFirstTurnResumes(t *testing.T) {
	bin := buildBinary(t)
	streaming := make(chan struct{})
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text("the first words ")
		close(streaming)
		w.Stall(ctx)
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sess, tr := filepath.Join(dir, "s.jsonl"), filepath.Join(dir, "t.jsonl")
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--trace", tr)
	if _, err := io.WriteString(p.stdin, "the first prompt\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-streaming:
	case <-time.After(20 * time.Second):
		t.Fatalf("no request\nstderr: %s", p.stderr)
	}
	eventually(t, "the first words on stdout", func() bool { return strings.Contains(p.stdout.String(), "the first words") })
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done

	recs := readSession(t, sess)
	if len(recs) < 2 || recs[0].Type != "session" || recs[len(recs)-1].Message == nil || recs[len(recs)-1].Message.Content != "the first prompt" {
		t.Fatalf("the killed run's session: %+v", recs)
	}
	f, err := os.Open(tr)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	steps, words := 0, false
	for n := 1; sc.Scan(); n++ {
		if n == 1 {
			if _, err := trace.ReadHeader(sc.Bytes()); err != nil {
				t.Fatalf("trace header: %v", err)
			}
			continue
		}
		r, err := trace.ReadRecord(sc.Bytes())
		if err != nil {
			t.Fatalf("trace line %d: %v", n, err)
		}
		steps++
		words = words || (r.Event != nil && r.Event.Text == "the first words ")
	}
	if steps < 2 || !words { // the submit, the first words
		t.Errorf("the killed run's trace holds %d steps (the first words: %v)", steps, words)
	}
	original, _ := os.ReadFile(sess)
	if err := os.Rename(sess+".wal", filepath.Join(dir, "moved-away.wal")); err != nil {
		t.Fatal(err)
	}

	code, _, errb := runCLIWithInput(t, "", "chat", "--resume", sess, "--workspace", dir)
	if code != exitOK || !strings.Contains(errb, "dropped 1 message(s) of a turn that never finished; the original file is kept as "+sess+".torn-") {
		t.Fatalf("resume: exit %d, stderr %q", code, errb)
	}
	backups, _ := filepath.Glob(sess + ".torn-*")
	if len(backups) != 1 {
		t.Fatalf("backups %v", backups)
	}
	if kept, _ := os.ReadFile(backups[0]); string(kept) != string(original) {
		t.Errorf("the backup is not the killed run's file")
	}
	if ls, err := session.Load(sess); err != nil || ls.Unfinished() {
		t.Errorf("after the resume: %+v, %v", ls, err)
	}
}
