package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// The session lock (session_lock.go), end to end: real processes, one
// holding a session while another tries it.

// heldStream answers its first request with a few words and stalls (the
// process is killed there), its second with a few words and then waits for
// release before finishing; any later request is answered at once (a
// second run continuing the turn would make one).
type heldStream struct {
	n             atomic.Int32
	first, second chan struct{}
	release       chan struct{}
}

func newHeldStream() *heldStream {
	return &heldStream{first: make(chan struct{}), second: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldStream) handle(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
	switch h.n.Add(1) {
	case 1:
		_ = w.Text("one, ")
		close(h.first)
		w.Stall(ctx)
	case 2:
		_ = w.Text("one, two, ")
		close(h.second)
		select {
		case <-h.release:
		case <-ctx.Done():
			return
		}
		_ = w.Answer("three.", 3)
	default:
		_ = w.Answer("one, two, three.", 3)
	}
}

// refusedBy checks that p was refused because holder holds sess: exit 2
// and a message naming the holder's pid.
func refusedBy(t *testing.T, p, holder *proc, sess string) {
	t.Helper()
	code := p.wait(t)
	want := fmt.Sprintf("%s is in use by process %d", sess, holder.cmd.Process.Pid)
	if code != exitUsage || !strings.Contains(p.stderr.String(), want) {
		t.Fatalf("second run: exit %d, stderr %q; want exit 2 and %q", code, p.stderr, want)
	}
}

// TestTwoResumesOneContinues: two `run --resume` of one crashed session —
// the second is refused, naming the first's pid, while the first continues
// the turn; the model is asked once, and the answer and its turn_end are
// in the session once.
func TestTwoResumesOneContinues(t *testing.T) {
	bin := buildBinary(t)
	h := newHeldStream()
	srv := fakeopenai.New(h.handle)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	crashed := startBinary(t, bin, srv, dir, "run", "--session", sess, "--workspace", dir, "count to three")
	waitChan(t, h.first, "the first answer", crashed)
	crashed.kill9(t)

	first := startBinary(t, bin, srv, dir, "run", "--resume", sess, "--workspace", dir)
	waitChan(t, h.second, "the continued answer", first)
	second := startBinary(t, bin, srv, dir, "run", "--resume", sess, "--workspace", dir)
	refusedBy(t, second, first, sess)
	close(h.release)
	if code := first.wait(t); code != exitOK {
		t.Fatalf("first resume: exit %d\n%s", code, first.stderr)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2 (the crashed one and one continuation)", n)
	}
	recs := readSession(t, sess)
	ends := 0
	for _, r := range recs {
		if r.Type == "turn_end" {
			ends++
		}
	}
	answers := countMessages(messages(recs), func(m kernel.Message) bool { return m.Role == kernel.RoleAssistant && !m.Partial })
	if ends != 1 || answers != 1 {
		t.Fatalf("%d turn_end records and %d answers, want 1 each\n%+v", ends, answers, recs)
	}
	if _, err := os.Stat(sess + session.LockSuffix); !os.IsNotExist(err) {
		t.Errorf("the lock file outlived a clean run: %v", err)
	}
}

// TestSecondChatRefused: beside a chat that is idle (a turn done, waiting
// for input) — started new or resumed — a `chat --resume` of its session
// is refused, naming the first's pid, and writes nothing; the first goes
// on, and once it has ended the session resumes.
func TestSecondChatRefused(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("ok: "+r.Body.Last().Content, 4)
	})
	t.Cleanup(srv.Close)
	for _, how := range []string{"--session", "--resume"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			sess := filepath.Join(dir, "s.jsonl")
			if how == "--resume" {
				p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir)
				p.stdin.Write([]byte("zero\n"))
				p.stdin.Close()
				if code := p.wait(t); code != exitOK {
					t.Fatalf("exit %d\n%s", code, p.stderr)
				}
			}
			first := startBinary(t, bin, srv, dir, "chat", how, sess, "--workspace", dir)
			first.stdin.Write([]byte("one\n"))
			eventually(t, "the first answer", func() bool { return strings.Contains(first.stdout.String(), "ok: one") })
			before, _ := os.ReadFile(sess)

			second := startBinary(t, bin, srv, dir, "chat", "--resume", sess, "--workspace", dir)
			second.stdin.Write([]byte("two\n"))
			second.stdin.Close()
			refusedBy(t, second, first, sess)
			if after, _ := os.ReadFile(sess); string(after) != string(before) {
				t.Fatalf("the refused chat changed the session:\n%s", after)
			}

			first.stdin.Write([]byte("three\n"))
			first.stdin.Close()
			if code := first.wait(t); code != exitOK || !strings.Contains(first.stdout.String(), "ok: three") {
				t.Fatalf("first chat: exit %d\nstdout %s\nstderr %s", code, first.stdout, first.stderr)
			}
			again := startBinary(t, bin, srv, dir, "chat", "--resume", sess, "--workspace", dir)
			again.stdin.Write([]byte("four\n"))
			again.stdin.Close()
			if code := again.wait(t); code != exitOK {
				t.Fatalf("resume after the first ended: exit %d\n%s", code, again.stderr)
			}
			ls, err := session.Load(sess)
			if err != nil {
				t.Fatal(err)
			}
			want := 3
			if how == "--resume" {
				want = 4
			}
			if ls.Turns != want || ls.Unfinished() {
				t.Fatalf("%d turns (unfinished: %v), want %d", ls.Turns, ls.Unfinished(), want)
			}
		})
	}
}

// TestLockDiesWithItsProcess: the lock is the process's alone — a tool's
// process does not inherit it (the shell lists its open files: the lock
// file is not among them) — so when the process is killed with SIGKILL
// while a shell call runs, the session resumes at once.
func TestLockDiesWithItsProcess(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	fds := filepath.Join(dir, "fds.txt")
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("done", 4)
			return
		}
		args, _ := json.Marshal(map[string]string{"command": `for f in /proc/$$/fd/*; do readlink "$f"; done > fds.tmp; mv fds.tmp fds.txt; sleep 60`})
		_ = w.Call(0, "call_sh", "shell", string(args), 9)
		_ = w.End("tool_calls")
	})
	t.Cleanup(srv.Close)
	sess := filepath.Join(dir, "s.jsonl")
	first := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir, "--allow-shell")
	first.stdin.Write([]byte("look\n"))
	eventually(t, "the shell's list of open files", func() bool { _, err := os.Stat(fds); return err == nil })
	open, _ := os.ReadFile(fds)
	if strings.Contains(string(open), session.LockSuffix) {
		t.Errorf("the shell holds the session lock open:\n%s", open)
	}
	if held, _ := os.ReadFile(sess + session.LockSuffix); strings.TrimSpace(string(held)) != strconv.Itoa(first.cmd.Process.Pid) {
		t.Fatalf("the lock file holds %q, want the chat's pid", held)
	}
	first.kill9(t)
	p := resumeNoInput(t, bin, srv, dir, sess)
	if code := p.wait(t); code != exitOK || !strings.Contains(p.stdout.String(), "done") {
		t.Fatalf("resume right after the kill: exit %d\n%s", code, p.stderr)
	}
}
