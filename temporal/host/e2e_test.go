package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/internal/testenv"
)

// A turn with a tool call completes: the model asks for a tool, the tool
// runs as an activity, the model reads its result and answers.
func TestTurnWithToolCall(t *testing.T) {
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		if lastRole(req) == "tool" {
			w.Answer("the tool said "+req.Body.Last().Content, 4)
			return
		}
		w.Call(0, "call_1", "noop", `{}`, 1)
		w.End("tool_calls")
	})
	testenv.StartWorker(t, e.cfg)
	s := e.start(tree())
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "run the tool"); err != nil {
		t.Fatal(err)
	}
	ls := r.until("the turn's end", turnEnded(1))
	end := lastRootEnd(t, ls)
	if end.Outcome != kernel.OutcomeCompleted || end.Text != "the tool said ok" {
		t.Fatalf("turn ended %s %q, want completed %q\n%s", end.Outcome, end.Text, "the tool said ok", describe(ls))
	}
	if got := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeCallFinished && l.Status == kernel.CallOK }); len(got) != 1 {
		t.Fatalf("want one call finished ok, got %d\n%s", len(got), describe(ls))
	}
	reqs := e.fake.Requests()
	if len(reqs) != 2 || reqs[1].Body.Last().Content != "ok" {
		t.Fatalf("want two requests, the second with the tool's result; got %d", len(reqs))
	}
}

// A cancel while a tool runs reaches the activity: the tool's process is
// gone, its op ends cancelled (the activity acknowledged the cancel, well
// within the grace), and the model gets no request after it.
func TestCancelReachesRunningTool(t *testing.T) {
	pidFile := "pid"
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Call(0, "call_1", "shell", `{"command":"echo $$ > `+pidFile+` && exec sleep 300"}`, 8)
		w.End("tool_calls")
	})
	testenv.StartWorker(t, e.cfg)
	s := e.start(tree())
	r := e.follow(s)
	acc, err := s.Submit(e.ctx, "sleep")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(e.waitFile(filepath.Join(e.dir, pidFile), 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the shell's process %d is not running before the cancel: %v", pid, err)
	}
	if _, err := s.Cancel(e.ctx, kernel.Root, acc.Turn); err != nil {
		t.Fatal(err)
	}
	ls := r.until("the tool's op to end", func(ls []kernel.Lifecycle) bool {
		return turnEnded(1)(ls) && len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeOpEnded && l.Op == toolOp(ls) })) > 0
	})
	if end := lastRootEnd(t, ls); end.Outcome != kernel.OutcomeInterrupted || end.Reason != kernel.ReasonUserCancel {
		t.Fatalf("turn ended %s/%s, want interrupted/user_cancel", end.Outcome, end.Reason)
	}
	ended := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeOpEnded && l.Op == toolOp(ls) })
	if ended[0].End != kernel.OpCancelled {
		t.Fatalf("the tool's op ended %s, want cancelled (the activity's acknowledgement)\n%s", ended[0].End, describe(ls))
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the shell's process %d still exists after the cancel was acknowledged (kill -0: %v)", pid, err)
	}
	// The turn has ended and nothing else runs: no request can follow.
	if n := len(e.fake.Requests()); n != 1 {
		t.Fatalf("the model got %d requests, want 1 (none after the cancel)", n)
	}
}

// toolOp is the op of the first tool_started record.
func toolOp(ls []kernel.Lifecycle) kernel.OpID {
	for _, l := range ls {
		if l.Kind == kernel.LifeToolStarted {
			return l.Op
		}
	}
	return 0
}

// The worker is killed (SIGKILL) while the model streams; a second worker
// finishes the turn. The text the kernel had received is kept as a
// partial assistant message and the request is asked again with it, as
// kernel.Recover does after a crash (docs/durable.md).
func TestWorkerKilledMidStream(t *testing.T) {
	first := make(chan struct{})
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		if req.N == 1 {
			w.Text("Hello, ")
			close(first)
			w.Stall(ctx) // until the dead worker's connection closes
			return
		}
		w.Answer("world.", 3)
	})
	p := testenv.StartProcess(t, e.cfg)
	s := e.start(tree())
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "greet"); err != nil {
		t.Fatal(err)
	}
	<-first
	r.until("the first chunk", func(ls []kernel.Lifecycle) bool {
		return len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeDelta && strings.Contains(l.Text, "Hello") })) > 0
	})
	p.Kill()
	testenv.StartWorker(t, e.cfg)
	ls := r.until("the turn's end", turnEnded(1))
	end := lastRootEnd(t, ls)
	if end.Outcome != kernel.OutcomeCompleted || end.Text != "world." {
		t.Fatalf("turn ended %s %q, want completed %q\n%s", end.Outcome, end.Text, "world.", describe(ls))
	}
	rec := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeRecovered })
	if len(rec) != 1 || rec[0].Text != "1 request(s) restarted" {
		t.Fatalf("want one recovery restarting the request, got %v\n%s", rec, describe(ls))
	}
	if lost := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeOpEnded && l.End == kernel.OpLost }); len(lost) != 1 {
		t.Fatalf("want the first request ended lost, got %v", lost)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("the model got %d requests, want 2", len(reqs))
	}
	msgs := reqs[1].Body.Messages
	if n := len(msgs); n < 2 || msgs[n-1].Role != "assistant" || msgs[n-1].Content != "Hello, " || msgs[n-2].Content != "greet" {
		t.Fatalf("the restarted request does not end with the partial answer: %+v", msgs)
	}
}

// A non-idempotent tool in flight when its worker dies is answered
// tool_lost and never runs twice: the counter file it appends to holds one
// line after the turn has ended on a second worker.
func TestLostToolNeverRunsTwice(t *testing.T) {
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		if lastRole(req) == "tool" {
			w.Answer("noted: "+req.Body.Last().Content, 16)
			return
		}
		w.Call(0, "call_1", "bump", `{}`, 1)
		w.End("tool_calls")
	})
	p := testenv.StartProcess(t, e.cfg)
	s := e.start(tree())
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "bump it"); err != nil {
		t.Fatal(err)
	}
	e.waitFile(e.cfg.Counter, 1)
	p.Kill()
	testenv.StartWorker(t, e.cfg)
	ls := r.until("the turn's end", turnEnded(1))
	if end := lastRootEnd(t, ls); end.Outcome != kernel.OutcomeCompleted {
		t.Fatalf("turn ended %s, want completed\n%s", end.Outcome, describe(ls))
	}
	calls := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeCallFinished })
	if len(calls) != 1 || calls[0].Status != kernel.CallLost || calls[0].Reason != kernel.ReasonCrash {
		t.Fatalf("want the call answered lost/crash, got %v\n%s", calls, describe(ls))
	}
	reqs := e.fake.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].Body.Last().Content, `"type":"tool_lost"`) {
		t.Fatalf("the model's second request does not read tool_lost: %d requests", len(reqs))
	}
	if lines := e.waitFile(e.cfg.Counter, 1); len(lines) != 1 {
		t.Fatalf("the tool ran %d times, want once", len(lines))
	}
}

// A depth-2 delegation cancelled at the root cancels every descendant's
// activities: the child's shell and the grandchild's stream both stop,
// every op ends cancelled (acknowledged, not abandoned), every agent's
// turn ends, and the model gets no request after.
func TestCancelDepth2Delegation(t *testing.T) {
	streaming := make(chan struct{})
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		switch req.Body.FirstUser() {
		case "go":
			w.Call(0, "d1", "delegate", `{"task":"A","name":"child"}`, 8)
			w.End("tool_calls")
		case "A":
			w.Call(0, "d2", "delegate", `{"task":"B","name":"grandchild"}`, 8)
			w.Call(1, "s1", "shell", `{"command":"echo $$ > child.pid && exec sleep 300"}`, 8)
			w.End("tool_calls")
		case "B":
			w.Text("thinking")
			close(streaming)
			w.Stall(ctx)
		}
	})
	testenv.StartWorker(t, e.cfg)
	s := e.start(tree())
	r := e.follow(s)
	acc, err := s.Submit(e.ctx, "go")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(e.waitFile(filepath.Join(e.dir, "child.pid"), 1)[0])
	if err != nil {
		t.Fatal(err)
	}
	<-streaming
	r.until("the grandchild's first chunk", func(ls []kernel.Lifecycle) bool {
		return len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeDelta && l.Text == "thinking" })) > 0
	})
	if _, err := s.Cancel(e.ctx, kernel.Root, acc.Turn); err != nil {
		t.Fatal(err)
	}
	ls := r.until("every turn's end", func(ls []kernel.Lifecycle) bool {
		return len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeTurnEnded })) == 3
	})
	for _, l := range find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeTurnEnded }) {
		want := kernel.ReasonParentCancelled
		if l.Agent == kernel.Root {
			want = kernel.ReasonUserCancel
		}
		if l.Outcome != kernel.OutcomeInterrupted || l.Reason != want {
			t.Fatalf("agent %d's turn ended %s/%s, want interrupted/%s", l.Agent, l.Outcome, l.Reason, want)
		}
	}
	r.until("every op's end", func(ls []kernel.Lifecycle) bool {
		// Three requests (the root's and the child's completed, the
		// grandchild's cut) and the child's shell.
		return len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeOpEnded })) == 4
	})
	ls = r.all
	cut := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeOpEnded && l.End != kernel.OpCompleted })
	if len(cut) != 2 {
		t.Fatalf("want the grandchild's request and the child's shell cut, got %v\n%s", cut, describe(ls))
	}
	for _, l := range cut {
		if l.End != kernel.OpCancelled {
			t.Fatalf("op %d ended %s, want cancelled\n%s", l.Op, l.End, describe(ls))
		}
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the child's shell %d still exists (kill -0: %v)", pid, err)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("the model got %d requests, want 3 (none after the cancel)", len(reqs))
	}
	if err := e.fake.WaitFor(e.ctx, func(rs []fakeopenai.Request) bool { return !rs[2].Closed.IsZero() }); err != nil {
		t.Fatalf("the grandchild's stream was never closed: %v", err)
	}
}
