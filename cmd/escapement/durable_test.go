package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// Durable turns, end to end (docs/durable.md): the real binary is killed
// with SIGKILL in the middle of a turn, and `chat --resume FILE` with no
// input continues that turn from FILE.wal.

// kill9 SIGKILLs the binary and waits for it to be gone.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// waitChan waits (generously: real processes) for ch.
func waitChan(t *testing.T, ch <-chan struct{}, what string, p *proc) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s\nstderr: %s", what, p.stderr)
	}
}

// resumeNoInput runs `chat --resume FILE` with stdin at end of input and
// returns its exit code (the binary, as a user would run it).
func resumeNoInput(t *testing.T, bin string, srv *fakeopenai.Server, dir, sess string, more ...string) *proc {
	t.Helper()
	p := startBinary(t, bin, srv, dir, append([]string{"chat", "--resume", sess, "--workspace", dir}, more...)...)
	p.stdin.Close() // < /dev/null
	return p
}

// messages are the session's message records.
func messages(recs []session.Record) []kernel.Message {
	var out []kernel.Message
	for _, r := range recs {
		if r.Message != nil {
			out = append(out, *r.Message)
		}
	}
	return out
}

func countMessages(msgs []kernel.Message, pred func(kernel.Message) bool) int {
	n := 0
	for _, m := range msgs {
		if pred(m) {
			n++
		}
	}
	return n
}

// streamThenStall answers its first request with some words and then
// stalls (the process is killed meanwhile); later requests get the whole
// answer.
type streamThenStall struct {
	streaming chan struct{}
	once      sync.Once
	n         atomic.Int32
}

func (s *streamThenStall) handle(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
	if s.n.Add(1) == 1 {
		_ = w.Text("one, two, ")
		s.once.Do(func() { close(s.streaming) })
		w.Stall(ctx)
		return
	}
	_ = w.Answer("one, two, three.", 3)
}

// killMidStream runs chat, kills it while the first answer streams, and
// returns the session path (its FILE.wal beside it).
func killMidStream(t *testing.T, bin string, srv *fakeopenai.Server, s *streamThenStall, dir string) string {
	t.Helper()
	sess := filepath.Join(dir, "s.jsonl")
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir)
	if _, err := p.stdin.Write([]byte("count to three\n")); err != nil {
		t.Fatal(err)
	}
	waitChan(t, s.streaming, "the first words", p)
	eventually(t, "the first words on stdout", func() bool { return strings.Contains(p.stdout.String(), "one, two,") })
	p.kill9(t)
	if _, err := os.Stat(sess + session.LogSuffix); err != nil {
		t.Fatalf("no write-ahead log beside the killed session: %v", err)
	}
	return sess
}

// TestKill9MidStreamContinues: kill -9 while the answer streams; `chat
// --resume FILE < /dev/null` sends a new request continuing the same
// conversation (the partial answer last), the turn completes, exit 0, and
// the transcript holds the prompt once and the answer once, the partial
// first attempt flagged; nothing was cut from the file, and the log is
// gone after the clean exit.
func TestKill9MidStreamContinues(t *testing.T) {
	bin := buildBinary(t)
	s := &streamThenStall{streaming: make(chan struct{})}
	srv := fakeopenai.New(s.handle)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sess := killMidStream(t, bin, srv, s, dir)

	p := resumeNoInput(t, bin, srv, dir, sess)
	if code := p.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, p.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	body := reqs[1].Body
	if n := countBody(body, "user", "count to three"); n != 1 || body.Last().Role != "assistant" || body.Last().Content != "one, two, " {
		t.Fatalf("the continued request: the prompt %d times, last %+v", n, body.Last())
	}
	if !strings.Contains(p.stdout.String(), "one, two, three.") || !strings.Contains(p.stderr.String(), "continuing it from") {
		t.Errorf("stdout %q\nstderr %s", p.stdout, p.stderr)
	}
	recs := readSession(t, sess)
	msgs := messages(recs)
	prompt := countMessages(msgs, func(m kernel.Message) bool { return m.Role == kernel.RoleUser && m.Content == "count to three" })
	answer := countMessages(msgs, func(m kernel.Message) bool {
		return m.Role == kernel.RoleAssistant && !m.Partial && m.Content == "one, two, three."
	})
	partial := countMessages(msgs, func(m kernel.Message) bool {
		return m.Role == kernel.RoleAssistant && m.Partial && m.Content == "one, two, "
	})
	if prompt != 1 || answer != 1 || partial != 1 {
		t.Fatalf("transcript: prompt %d, answer %d, flagged partial %d (want 1 each)\n%+v", prompt, answer, partial, msgs)
	}
	if last := recs[len(recs)-1]; last.Type != "turn_end" || last.Turn != 1 || last.Outcome != kernel.OutcomeCompleted {
		t.Fatalf("last record %+v", last)
	}
	if backups, _ := filepath.Glob(sess + ".torn-*"); len(backups) != 0 {
		t.Errorf("the unfinished turn was set aside: %v", backups)
	}
	if _, err := os.Stat(sess + session.LogSuffix); !os.IsNotExist(err) {
		t.Errorf("the log is still there after a clean exit: %v", err)
	}
	if err := kernel.ValidateTranscript(msgs, false); err != nil {
		t.Errorf("transcript: %v", err)
	}
}

func countBody(b fakeopenai.Body, role, content string) int {
	n := 0
	for _, m := range b.Messages {
		if m.Role == role && m.Content == content {
			n++
		}
	}
	return n
}

// TestKill9DuringShellNotRerun: kill -9 while a shell call runs; after the
// resume the model receives a tool_lost result for that call (it is in the
// session), and the command is not run again: it appends a line to a file
// each time it runs, and the file holds one line.
func TestKill9DuringShellNotRerun(t *testing.T) {
	bin := buildBinary(t)
	var lost atomic.Value
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if last := r.Body.Last(); last.Role == "tool" {
			lost.Store(last.Content)
			_ = w.Answer("Noted: it may or may not have run.", 4)
			return
		}
		// The first run stays (the kill comes while it runs); a second run
		// returns at once, so a re-run fails the count below, not a timeout.
		args, _ := json.Marshal(map[string]string{"command": `echo ran >> count.txt; [ "$(wc -l < count.txt)" -gt 1 ] || sleep 60`})
		_ = w.Call(0, "call_sh", "shell", string(args), 7)
		_ = w.End("tool_calls")
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	count := filepath.Join(dir, "count.txt")
	lines := func() int {
		data, _ := os.ReadFile(count)
		return bytes.Count(data, []byte("\n"))
	}
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir, "--allow-shell")
	if _, err := p.stdin.Write([]byte("append a line\n")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the command ran", func() bool { return lines() == 1 })
	p.kill9(t)

	r := resumeNoInput(t, bin, srv, dir, sess, "--allow-shell")
	if code := r.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, r.stderr)
	}
	got, _ := lost.Load().(string)
	if !strings.Contains(got, `"type":"tool_lost"`) || !strings.Contains(got, "may or may not have taken effect") {
		t.Fatalf("the model got %q for the shell call", got)
	}
	if n := lines(); n != 1 {
		t.Fatalf("the command ran %d times", n)
	}
	msgs := messages(readSession(t, sess))
	if n := countMessages(msgs, func(m kernel.Message) bool {
		return m.Role == kernel.RoleTool && m.ToolCallID == "call_sh" && strings.Contains(m.Content, `"type":"tool_lost"`)
	}); n != 1 {
		t.Fatalf("%d tool_lost results for the call in the session\n%+v", n, msgs)
	}
	if !strings.Contains(r.stderr.String(), "[main] ← shell lost (crash)") {
		t.Errorf("stderr does not show the lost call: %s", r.stderr)
	}
}

// TestKill9DelegationDepth2: kill -9 while a grandchild (depth 2) streams;
// after the resume the grandchild streams again from its partial text, its
// parent receives its completed outcome, and the root's turn completes.
func TestKill9DelegationDepth2(t *testing.T) {
	bin := buildBinary(t)
	streaming := make(chan struct{})
	var once sync.Once
	var grandchild atomic.Int32
	var childGot atomic.Value
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		last := r.Body.Last()
		delegate := func(task, name string) {
			args, _ := json.Marshal(map[string]string{"task": task, "name": name})
			_ = w.Call(0, "call_"+name, "delegate", string(args), 8)
			_ = w.End("tool_calls")
		}
		switch r.Body.FirstUser() {
		case "go deep":
			if last.Role == "tool" {
				_ = w.Answer("All done.", 3)
				return
			}
			delegate("look into it", "a")
		case "look into it":
			if last.Role == "tool" {
				childGot.Store(last.Content)
				_ = w.Answer("a is done.", 3)
				return
			}
			delegate("look deeper", "b")
		case "look deeper":
			if grandchild.Add(1) == 1 {
				_ = w.Text("b's first ")
				once.Do(func() { close(streaming) })
				w.Stall(ctx)
				return
			}
			_ = w.Answer("b's first findings.", 3)
		}
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir)
	if _, err := p.stdin.Write([]byte("go deep\n")); err != nil {
		t.Fatal(err)
	}
	waitChan(t, streaming, "the grandchild streaming", p)
	synced := func() bool { // the chunk is stepped and logged before the kill
		data, _ := os.ReadFile(sess + session.LogSuffix)
		return bytes.Contains(data, []byte(`"text":"b's first "`))
	}
	eventually(t, "the grandchild's chunk logged", synced)
	p.kill9(t)
	before := len(srv.Requests())

	r := resumeNoInput(t, bin, srv, dir, sess)
	if code := r.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, r.stderr)
	}
	after := srv.Requests()[before:]
	if len(after) != 3 || after[0].Body.FirstUser() != "look deeper" || after[1].Body.FirstUser() != "look into it" || after[2].Body.FirstUser() != "go deep" {
		var firsts []string
		for _, q := range after {
			firsts = append(firsts, q.Body.FirstUser())
		}
		t.Fatalf("requests after the resume: %q; want the grandchild's, the child's, the root's", firsts)
	}
	if last := after[0].Body.Last(); last.Role != "assistant" || last.Content != "b's first " {
		t.Fatalf("the grandchild's continued request ends with %+v", last)
	}
	got, _ := childGot.Load().(string)
	if !strings.Contains(got, `"outcome":"completed"`) || !strings.Contains(got, "b's first findings.") {
		t.Fatalf("the child received %q", got)
	}
	recs := readSession(t, sess)
	if last := recs[len(recs)-1]; last.Type != "turn_end" || last.Outcome != kernel.OutcomeCompleted {
		t.Fatalf("last record %+v", last)
	}
	if msgs := messages(recs); msgs[len(msgs)-1].Content != "All done." {
		t.Fatalf("the root's answer: %+v", msgs[len(msgs)-1])
	}
}
