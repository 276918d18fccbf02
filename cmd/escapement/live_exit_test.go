package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// callStuckThenAnswer asks for the stuck tool, then answers once it has
// the tool's (timed-out) result.
func callStuckThenAnswer(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
	if r.Body.Last().Role == "tool" {
		_ = w.Answer("answered anyway", 4)
		return
	}
	_ = w.Call(0, "c1", "stuck", `{}`, 2)
	_ = w.End("tool_calls")
}

// TestStuckToolDoesNotBlockExit: a tool that ignores its context and never
// returns (grep opening a FIFO) must not keep the process alive, and
// signals must be read until the command returns.
func TestStuckToolDoesNotBlockExit(t *testing.T) {
	t.Run("Ctrl-C while it runs: 130 once the call is abandoned", func(t *testing.T) {
		endpoint(t, callStuckThenAnswer)
		stuck := newStuckTools(t)
		dir := t.TempDir()
		const grace = time.Second
		c := startCLI(t, []string{"run", "go", "--grace", grace.String(), "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir}, stuck.inject)
		<-stuck.started
		c.signal(syscall.SIGINT)
		at := time.Now()
		// The bound is the code's, not this test's: the kernel abandons the
		// call at cancel + grace, Run returns without its goroutine, and the
		// CLI's wait for Run is itself capped at grace + 1s. What the test
		// proves is that mechanism — the exit names the abandoned call — so
		// a loaded machine cannot fail it; the wait below only catches a hang.
		if code := c.wait(15 * time.Second); code != exitInterrupted {
			t.Fatalf("exit %d, want 130\nstderr: %s", code, c.errb)
		}
		t.Logf("SIGINT → exit: %v (grace %v)", time.Since(at), grace)
		if !strings.Contains(c.errb.String(), "tool call stuck of main was abandoned") {
			t.Errorf("stderr does not name the abandoned call: %s", c.errb)
		}
	})
	t.Run("after the answer: exits with the turn", func(t *testing.T) {
		endpoint(t, callStuckThenAnswer)
		stuck := newStuckTools(t)
		dir := t.TempDir()
		c := startCLI(t, []string{"run", "go", "--tool-timeout", "200ms", "--grace", "200ms", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir}, stuck.inject)
		if code := c.wait(20 * time.Second); code != exitOK {
			t.Fatalf("exit %d, want 0\nstderr: %s", code, c.errb)
		}
		if c.out.String() != "answered anyway\n" || !strings.Contains(c.errb.String(), "[main] ← stuck timed_out (tool_timeout)") {
			t.Errorf("stdout %q\nstderr: %s", c.out, c.errb)
		}
	})
	t.Run("chat: Ctrl-C and SIGTERM after the answer", func(t *testing.T) {
		endpoint(t, callStuckThenAnswer)
		stuck := newStuckTools(t)
		dir := t.TempDir()
		c := startCLI(t, []string{"chat", "--tool-timeout", "200ms", "--grace", "200ms", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir}, stuck.inject)
		c.say("go")
		eventually(t, "the answer and the prompt", func() bool {
			return strings.Contains(c.out.String(), "answered anyway") && strings.Count(c.errb.String(), "> ") >= 2
		})
		c.signal(syscall.SIGINT)
		eventually(t, "the idle hint", func() bool { return strings.Contains(c.errb.String(), "no turn is running") })
		c.signal(syscall.SIGTERM)
		if code := c.wait(20 * time.Second); code != exitInterrupted {
			t.Fatalf("exit %d, want 130\nstderr: %s", code, c.errb)
		}
	})
	t.Run("stdout blocked: the second Ctrl-C still exits", func(t *testing.T) {
		// The kernel's goroutine blocks writing the answer to a stdout nobody
		// reads: the turn cannot end and Cancel cannot be delivered. The
		// first Ctrl-C is taken anyway, and the second exits at once.
		endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			_ = w.Answer("blocked", 7)
		})
		dir := t.TempDir()
		blocked := &blockingWriter{release: make(chan struct{})}
		t.Cleanup(blocked.unblock)
		c := startCLI(t, []string{"run", "go", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir},
			func(a *app) { a.out = blocked })
		<-waitFor(func() bool { return blocked.writes() > 0 })
		c.signal(syscall.SIGINT)
		c.signal(syscall.SIGINT)
		select {
		case code := <-c.exits:
			if code != exitInterrupted {
				t.Errorf("hard exit %d, want 130", code)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no hard exit after the second Ctrl-C\nstderr: %s", c.errb)
		}
		blocked.unblock()
		if code := c.wait(20 * time.Second); code != exitInterrupted {
			t.Errorf("exit %d, want 130", code)
		}
	})
}

// blockingWriter blocks every write until released.
type blockingWriter struct {
	mu      sync.Mutex
	n       int
	release chan struct{}
	once    sync.Once
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	b.n++
	b.mu.Unlock()
	<-b.release
	return 0, errors.New("stdout closed")
}

func (b *blockingWriter) writes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

func (b *blockingWriter) unblock() { b.once.Do(func() { close(b.release) }) }

// waitFor is closed once cond holds (polled; the tests bound the wait).
func waitFor(cond func() bool) <-chan struct{} {
	ch := make(chan struct{})
	go func() { // owned: ends when cond holds, or with the test binary
		for !cond() {
			time.Sleep(5 * time.Millisecond)
		}
		close(ch)
	}()
	return ch
}

// TestSIGTERMIsShutdown: SIGTERM is the process being asked to end, not
// the user's interrupt: the running turn ends with reason shutdown (it
// was recorded as user_cancel), in the session file and in --json, for
// run and for chat; the exit is 130.
func TestSIGTERMIsShutdown(t *testing.T) {
	for _, cmd := range []string{"run", "chat"} {
		t.Run(cmd, func(t *testing.T) {
			endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				w.Forever(ctx, "tok ", 10*time.Millisecond)
			})
			dir := t.TempDir()
			sess := filepath.Join(dir, "s.jsonl")
			args := []string{cmd, "--json", "--session", sess, "--workspace", dir}
			if cmd == "run" {
				args = append(args, "count")
			}
			c := startCLI(t, args)
			if cmd == "chat" {
				c.say("count")
			}
			eventually(t, "the stream", func() bool { return strings.Count(c.out.String(), `"type":"delta"`) >= 2 })
			c.signal(syscall.SIGTERM)
			if code := c.wait(20 * time.Second); code != exitInterrupted {
				t.Fatalf("exit %d, want 130\nstderr: %s", code, c.errb)
			}
			recs := readSession(t, sess)
			if last := recs[len(recs)-1]; last.Type != "turn_end" || last.Reason != kernel.ReasonShutdown || last.Outcome != kernel.OutcomeInterrupted {
				t.Errorf("last session record %+v, want turn_end interrupted/shutdown", last)
			}
			evs := jsonRun(t, c.out.String())
			ended, ok := lastOf(evs, protocol.TypeTurnEnded, "main")
			if !ok || ended.Reason != "shutdown" || evs[len(evs)-1].Reason != "shutdown" {
				t.Errorf("--json turn_ended %+v, want reason shutdown", ended)
			}
			if !strings.Contains(c.errb.String(), kernel.UIShutdown) {
				t.Errorf("stderr lacks %q: %s", kernel.UIShutdown, c.errb)
			}
		})
	}
}
