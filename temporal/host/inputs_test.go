package host_test

import (
	"context"
	"errors"
	"testing"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/internal/testenv"
	"github.com/escapement/escapement/temporal/protocol"
	"github.com/escapement/escapement/temporal/remote"
)

// A call of a tool the tree asks about waits for a decision; the decide
// update approves it (for its arguments' digest) and it runs. A decision
// with the wrong digest is refused with the kernel's error.
func TestDecideApprovesAWaitingCall(t *testing.T) {
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		if lastRole(req) == "tool" {
			w.Answer("done: "+req.Body.Last().Content, 4)
			return
		}
		w.Call(0, "call_1", "noop", `{"x":1}`, 2)
		w.End("tool_calls")
	})
	testenv.StartWorker(t, e.cfg)
	tr := tree()
	tr.Ask = []string{"noop"}
	s := e.start(tr)
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "go"); err != nil {
		t.Fatal(err)
	}
	ls := r.until("the approval request", func(ls []kernel.Lifecycle) bool {
		return len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeApprovalRequested })) > 0
	})
	req := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeApprovalRequested })[0]
	if req.Digest != kernel.Digest(`{"x":1}`) {
		t.Fatalf("approval requested with digest %q, want the arguments'", req.Digest)
	}
	_, err := s.Decide(e.ctx, protocol.Decision{Agent: req.Agent, CallID: req.CallID, Digest: kernel.Digest(`{"x":2}`), Verdict: kernel.VerdictApprove})
	if !errors.Is(err, kernel.ErrDigestMismatch) || !errors.Is(err, remote.ErrRejected) {
		t.Fatalf("a decision for other arguments: %v, want the kernel's digest mismatch", err)
	}
	if _, err := s.Decide(e.ctx, protocol.Decision{Agent: req.Agent, CallID: req.CallID, Digest: req.Digest, Verdict: kernel.VerdictApprove}); err != nil {
		t.Fatal(err)
	}
	ls = r.until("the turn's end", turnEnded(1))
	if end := lastRootEnd(t, ls); end.Outcome != kernel.OutcomeCompleted || end.Text != "done: ok" {
		t.Fatalf("turn ended %s %q, want completed %q", end.Outcome, end.Text, "done: ok")
	}
}

// The compact update compacts the idle root's history: the summarising
// request goes to the model without tools (the workflow passes the
// effect's compaction flag to the stream activity).
func TestCompactSendsASummarisingRequest(t *testing.T) {
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Answer("reply "+req.Body.Last().Content, 8)
	})
	testenv.StartWorker(t, e.cfg)
	s := e.start(tree())
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "first"); err != nil {
		t.Fatal(err)
	}
	r.until("the first turn's end", turnEnded(1))
	if _, err := s.Compact(e.ctx, "keep it short"); err != nil {
		t.Fatal(err)
	}
	ls := r.until("the compaction", func(ls []kernel.Lifecycle) bool {
		return len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeCompacted })) > 0
	})
	reqs := e.fake.Requests()
	if len(reqs) != 2 || len(reqs[1].Body.Tools) != 0 && string(reqs[1].Body.Tools) != "null" {
		t.Fatalf("the summarising request: %d requests, tools %s; want it second and without tools\n%s", len(reqs), reqs[len(reqs)-1].Body.Tools, describe(ls))
	}
	if len(reqs[0].Body.Tools) == 0 {
		t.Fatal("the turn's own request offered no tools; the check above proves nothing")
	}
}
