package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
)

// opLog wraps the session file and records what reaches it: "write:TYPE"
// per record, "sync" per fsync.
type opLog struct {
	w   io.Writer
	f   interface{ Sync() error }
	mu  sync.Mutex
	ops []string
}

func (o *opLog) Write(p []byte) (int, error) {
	var r session.Record
	typ := "?"
	if json.Unmarshal(p, &r) == nil {
		typ = r.Type
	}
	o.mu.Lock()
	o.ops = append(o.ops, "write:"+typ)
	o.mu.Unlock()
	return o.w.Write(p)
}

func (o *opLog) Sync() error {
	o.mu.Lock()
	o.ops = append(o.ops, "sync")
	o.mu.Unlock()
	return o.f.Sync()
}

// TestSessionWriteThroughAndSynced: every record reaches the file in a
// write of its own as it happens (the header before the first turn), each
// turn_end is followed at once by an fsync, and the file is synced on exit.
func TestSessionWriteThroughAndSynced(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("ok", 1)
	})
	dir := t.TempDir()
	var log *opLog
	wrap := func(a *app) {
		a.wrapSession = func(w io.Writer) io.Writer {
			log = &opLog{w: w, f: w.(*os.File)}
			return log
		}
	}
	var out, errb bytes.Buffer
	code := runWith(context.Background(), []string{"chat", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir},
		streams{in: strings.NewReader("one\ntwo\n"), out: &out, err: &errb}, func(c int) { t.Errorf("hard exit %d", c) }, noSignals, wrap)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	got := strings.Join(log.ops, " ")
	want := "write:session sync write:message write:message write:turn_end sync write:message write:message write:turn_end sync sync"
	if got != want {
		t.Errorf("session file operations:\n got %s\nwant %s", got, want)
	}
}

// TestResumeUnansweredCallNamesLine: a session whose history ends in a
// tool call without a result is refused at the line of the assistant
// message that made the call (it used to be refused without file:line).
func TestResumeUnansweredCallNamesLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	writeLines(t, path,
		`{"type":"session","format":1}`,
		`{"type":"message","message":{"role":"user","content":"hi"}}`,
		`{"type":"message","message":{"role":"assistant","tool_calls":[{"id":"c1","name":"grep","arguments":"{}"}]}}`,
		`{"type":"turn_end","turn":1,"outcome":"completed"}`)
	code, _, errb := runCLI(t, "chat", "--resume", path)
	if code != exitUsage || !strings.Contains(errb, path+":3: 1 tool call(s) of message 1 have no result") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
}

// TestResumeCompleteLastLineWithoutNewline: a last line that parses is a
// complete record, not a torn one: the turn it ends is resumed, nothing is
// cut or set aside, and the next record starts a line of its own.
func TestResumeCompleteLastLineWithoutNewline(t *testing.T) {
	srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("fine", 2)
	})
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	orig := `{"type":"session","format":1}` + "\n" +
		`{"type":"message","message":{"role":"user","content":"first"}}` + "\n" +
		`{"type":"message","message":{"role":"assistant","content":"answer"}}` + "\n" +
		`{"type":"turn_end","turn":1,"outcome":"completed"}`
	if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errb := runCLIWithInput(t, "second\n", "chat", "--resume", path, "--workspace", dir)
	if code != exitOK || strings.Contains(errb, "dropped") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	if m := srv.Requests()[0].Body.Messages; len(m) != 3 || m[0].Content != "first" || m[1].Content != "answer" {
		t.Errorf("the resumed request lost the completed turn: %+v", m)
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), orig+"\n") {
		t.Errorf("the original bytes changed:\n%s", data)
	}
	if backups, _ := filepath.Glob(path + ".torn-*"); len(backups) != 0 {
		t.Errorf("a backup was made of a file that was not cut: %v", backups)
	}
	ls, err := session.Load(path)
	if err != nil || ls.Turns != 2 || ls.Unfinished() {
		t.Fatalf("after the resumed turn: %+v, %v", ls, err)
	}
}

// TestResumeContinuesTurnNumbers: a resumed session numbers its turns after
// the ones in the file (they restarted at 1): in the session file, in
// --json, and in the trace header (so a replay numbers them the same way).
func TestResumeContinuesTurnNumbers(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("ok", 2)
	})
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	if code, _, errb := runCLIWithInput(t, "a\nb\n", "chat", "--session", sess, "--workspace", dir); code != exitOK {
		t.Fatalf("exit %d %s", code, errb)
	}
	tr := filepath.Join(dir, "t.jsonl")
	code, out, errb := runCLIWithInput(t, "c\n", "chat", "--resume", sess, "--json", "--trace", tr, "--workspace", dir)
	if code != exitOK {
		t.Fatalf("resume: exit %d %s", code, errb)
	}
	var turns []uint64
	for _, r := range readSession(t, sess) {
		if r.Type == "turn_end" {
			turns = append(turns, r.Turn)
		}
	}
	if fmt.Sprint(turns) != "[1 2 3]" {
		t.Errorf("session turn_end turns %v, want [1 2 3]", turns)
	}
	for _, ev := range jsonRun(t, out) {
		if ev.Agent == "main" && (ev.Type == protocol.TypeTurnStarted || ev.Type == protocol.TypeTurnEnded) && ev.Turn != 3 {
			t.Errorf("--json %s of turn %d, want 3", ev.Type, ev.Turn)
		}
	}
	if code, out, errb := runCLI(t, "sim", "replay", tr); code != exitOK || !strings.Contains(out, "reproduced") {
		t.Errorf("replay: exit %d %s %s", code, out, errb)
	}
}

func writeLines(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestResumeRefusesDamageInTheMiddle: only the last line can be torn; a
// line that does not parse anywhere else is damage, refused at its line
// (treating it as a torn tail would cut every turn after it), and the file
// is left as it is.
func TestResumeRefusesDamageInTheMiddle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	writeLines(t, path,
		`{"type":"session","format":1}`,
		`{"type":"message","message":{"role":"user","content":"hi"}}`,
		`{"type":"message","message":{"role":"assistant","content":"hel`,
		`{"type":"turn_end","turn":1,"outcome":"completed"}`,
		`{"type":"message","message":{"role":"user","content":"again"}}`,
		`{"type":"message","message":{"role":"assistant","content":"hello"}}`,
		`{"type":"turn_end","turn":2,"outcome":"completed"}`)
	before, _ := os.ReadFile(path)
	code, _, errb := runCLI(t, "chat", "--resume", path)
	if code != exitUsage || !strings.Contains(errb, path+":3: not a session record") {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("the refused file was changed")
	}
}
