package host_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/internal/testenv"
	"github.com/escapement/escapement/temporal/protocol"
	"github.com/escapement/escapement/temporal/remote"
)

// What arrives within one workflow task is stepped inputs first, whatever
// order the service recorded it in (docs/durable.md, "One instant, one
// order"): with the workflow worker down, a tool's result is recorded and
// then a shutdown; the next workflow task holds both, and the shutdown is
// stepped first: the call is closed cancelled (reason shutdown) and its
// real result, arriving for a cancelled op, is dropped as late. In the
// service's order the call would have completed ok.
func TestBatchStepsInputsFirst(t *testing.T) {
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		if lastRole(req) == "tool" {
			w.Answer("after the tool", 4)
			return
		}
		w.Call(0, "call_1", "shell", `{"command":"while [ ! -e release ]; do sleep 0.05; done; echo released"}`, 8)
		w.End("tool_calls")
	})
	acts := e.cfg
	acts.Role = testenv.RoleActivities
	testenv.StartWorker(t, acts)
	flows := e.cfg
	flows.Role = testenv.RoleWorkflows
	w := testenv.StartWorker(t, flows)
	s := e.start(tree())
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "wait for it"); err != nil {
		t.Fatal(err)
	}
	r.until("the tool's start", func(ls []kernel.Lifecycle) bool { return toolOp(ls) != 0 })
	w.Stop()
	if err := os.WriteFile(filepath.Join(e.dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	toolDone := e.waitHistory(s, "the tool's completion", func(evs []*historypb.HistoryEvent) bool {
		var scheduled int64
		for _, ev := range evs {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == protocol.ToolActivity {
				scheduled = ev.GetEventId()
			}
			if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled != 0 && a.GetScheduledEventId() == scheduled {
				return true
			}
		}
		return false
	})
	if err := s.Shutdown(e.ctx); err != nil {
		t.Fatal(err)
	}
	signalled := e.waitHistory(s, "the shutdown signal", func(evs []*historypb.HistoryEvent) bool {
		return len(evs) > toolDone && evs[len(evs)-1].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED ||
			hasAfter(evs, toolDone, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
	})
	if signalled <= toolDone {
		t.Fatalf("the signal (event %d) is not after the tool's completion (event %d)", signalled, toolDone)
	}
	testenv.StartWorker(t, flows)
	ls := r.until("the workflow's end", func([]kernel.Lifecycle) bool { return r.end != nil })
	calls := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeCallFinished })
	if len(calls) != 1 || calls[0].Status != kernel.CallCancelled || calls[0].Reason != kernel.ReasonShutdown {
		t.Fatalf("want the call closed cancelled/shutdown (the shutdown stepped first), got %v\n%s", calls, describe(ls))
	}
	if late := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeLate && l.Op == toolOp(ls) }); len(late) != 1 {
		t.Fatalf("want the tool's result dropped as late once, got %v\n%s", late, describe(ls))
	}
	if end := lastRootEnd(t, ls); end.Outcome != kernel.OutcomeInterrupted || end.Reason != kernel.ReasonShutdown {
		t.Fatalf("turn ended %s/%s, want interrupted/shutdown", end.Outcome, end.Reason)
	}
	if n := len(e.fake.Requests()); n != 1 {
		t.Fatalf("the model got %d requests, want 1", n)
	}
}

// hasAfter reports whether an event of type typ comes after event id.
func hasAfter(evs []*historypb.HistoryEvent, id int, typ enumspb.EventType) bool {
	for _, ev := range evs {
		if int(ev.GetEventId()) > id && ev.GetEventType() == typ {
			return true
		}
	}
	return false
}

// waitHistory waits until the workflow's current run's history satisfies
// cond, and returns the id of its last event then.
func (e *env) waitHistory(s *remote.Session, what string, cond func([]*historypb.HistoryEvent) bool) int {
	e.t.Helper()
	for {
		var evs []*historypb.HistoryEvent
		it := e.c.GetWorkflowHistory(e.ctx, s.ID(), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				e.t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		if cond(evs) {
			return int(evs[len(evs)-1].GetEventId())
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("waiting for %s in the history: %v", what, e.ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A worker that stops gracefully reports what it ran as lost at once (no
// heartbeat timeout: it is an hour here), and the tree recovers on the
// workers left: the non-idempotent tool that ran is answered tool_lost
// and never runs again.
func TestStoppedWorkerReportsLost(t *testing.T) {
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		if lastRole(req) == "tool" {
			w.Answer("noted", 4)
			return
		}
		w.Call(0, "call_1", "bump", `{}`, 1)
		w.End("tool_calls")
	})
	flows := e.cfg
	flows.Role = testenv.RoleWorkflows
	testenv.StartWorker(t, flows)
	acts := e.cfg
	acts.Role = testenv.RoleActivities
	first := testenv.StartWorker(t, acts)
	tr := tree()
	tr.Options.HeartbeatTimeout = time.Hour
	s := e.start(tr)
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "bump"); err != nil {
		t.Fatal(err)
	}
	e.waitFile(e.cfg.Counter, 1)
	testenv.StartWorker(t, acts)
	first.Stop()
	ls := r.until("the turn's end", turnEnded(1))
	calls := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeCallFinished })
	if len(calls) != 1 || calls[0].Status != kernel.CallLost {
		t.Fatalf("want the call answered lost, got %v\n%s", calls, describe(ls))
	}
	if end := lastRootEnd(t, ls); end.Outcome != kernel.OutcomeCompleted {
		t.Fatalf("turn ended %s, want completed", end.Outcome)
	}
	if lines := e.waitFile(e.cfg.Counter, 1); len(lines) != 1 {
		t.Fatalf("the tool ran %d times, want once", len(lines))
	}
}
