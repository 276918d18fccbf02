package host_test

import (
	"context"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/internal/testenv"
)

// Continue-As-New carries a long conversation across runs: with a mark
// low enough that every turn passes it, each turn runs in a run of its
// own, and the third request still sends the whole conversation; turn
// numbers go on; the follower reads every run.
func TestContinueAsNewCarriesConversation(t *testing.T) {
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Answer("reply to "+req.Body.Last().Content, 4)
	})
	testenv.StartWorker(t, e.cfg)
	tr := tree()
	tr.Options.ContinueAfterEvents = 10 // any run that ran a turn holds more
	s := e.start(tr)
	desc, err := e.c.DescribeWorkflowExecution(e.ctx, s.ID(), "")
	if err != nil {
		t.Fatal(err)
	}
	firstRun := desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	r := e.follow(s)
	for i, text := range []string{"one", "two", "three"} {
		if _, err := s.Submit(e.ctx, text); err != nil {
			t.Fatalf("submit %q: %v", text, err)
		}
		r.until("turn "+text, turnEnded(i+1))
	}
	ls := r.all
	var turns []uint64
	for _, l := range find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeTurnStarted && l.Agent == kernel.Root }) {
		turns = append(turns, l.Turn)
	}
	if len(turns) != 3 || turns[0] != 1 || turns[1] != 2 || turns[2] != 3 {
		t.Fatalf("turns started %v, want 1 2 3 across the runs", turns)
	}
	if r.runs < 2 {
		t.Fatalf("the follower moved to %d new run(s), want at least 2 (one per turn)", r.runs)
	}
	desc, err = e.c.DescribeWorkflowExecution(e.ctx, s.ID(), firstRun)
	if err != nil {
		t.Fatal(err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW {
		t.Fatalf("the first run is %s, want continued as new", st)
	}
	reqs := e.fake.Requests()
	var got []string
	for _, m := range reqs[len(reqs)-1].Body.Messages {
		got = append(got, m.Role+":"+m.Content)
	}
	want := []string{"user:one", "assistant:reply to one", "user:two", "assistant:reply to two", "user:three"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the last request sent\n%q\nwant\n%q", got, want)
	}
}

// A turn that alone fills the history to the stop mark is shut down
// (interrupted, reason shutdown), the run continues as new with the
// conversation, marker included, and the next turn runs in the new run.
func TestTurnTooLongForOneRun(t *testing.T) {
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		if req.Body.FirstUser() == "loop" && req.Body.Last().Content != "then stop" {
			w.Call(0, "call_1", "noop", `{}`, 1) // the kernel makes repeated ids unique
			w.End("tool_calls")
			return
		}
		w.Answer("stopped", 4)
	})
	testenv.StartWorker(t, e.cfg)
	tr := tree()
	tr.Options.StopAtEvents = 80
	tr.Options.ContinueAfterEvents = 40
	s := e.start(tr)
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "loop"); err != nil {
		t.Fatal(err)
	}
	ls := r.until("the looping turn's end", turnEnded(1))
	if end := lastRootEnd(t, ls); end.Outcome != kernel.OutcomeInterrupted || end.Reason != kernel.ReasonShutdown {
		t.Fatalf("the looping turn ended %s/%s, want interrupted/shutdown\n%s", end.Outcome, end.Reason, describe(ls))
	}
	if _, err := s.Submit(e.ctx, "then stop"); err != nil {
		t.Fatal(err)
	}
	ls = r.until("the next turn's end", turnEnded(2))
	if end := lastRootEnd(t, ls); end.Outcome != kernel.OutcomeCompleted {
		t.Fatalf("the next turn ended %s, want completed", end.Outcome)
	}
	if r.runs < 1 {
		t.Fatal("the workflow did not continue as new")
	}
	reqs := e.fake.Requests()
	last := reqs[len(reqs)-1].Body.Messages
	marker := last[len(last)-2].Content
	if !strings.Contains(marker, `<turn_aborted outcome="interrupted" reason="shutdown"`) {
		t.Fatalf("the next turn's request does not carry the cut turn's marker: %q", marker)
	}
}
