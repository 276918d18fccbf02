package live

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// TestFanOutIsBounded: a model that always delegates 16 tasks, at
// max_depth 3, would make 4,368 agents and stream 4,096 requests at once.
// With the default limits the tree holds at most max_agents (64) agents
// and streams at most max_parallel_requests (8) requests at any moment —
// the rest wait for a slot, the delegations past max_agents are refused,
// and the turn completes (docs/semantics.md, "Budgets and caps").
func TestFanOutIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var streaming, most atomic.Int64
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			n := streaming.Add(1)
			defer streaming.Add(-1)
			for {
				if old := most.Load(); n <= old || most.CompareAndSwap(old, n) {
					break
				}
			}
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
			if last(req).Role == kernel.RoleTool || strings.Count(req.Path, "/") == 3 {
				sink.Text("done")
				return nil
			}
			for i := range 16 {
				sink.Call(kernel.CallDelta{Index: i, ID: fmt.Sprint("c", i), Name: "delegate", Args: fmt.Sprintf(`{"task":"part %d","name":"w"}`, i)})
			}
			return nil
		})
		var held int
		rec := newRecorder()
		d, err := New(Config{Kernel: kernel.Config{Limits: func() kernel.Limits {
			l := kernel.DefaultLimits()
			l.MaxDepth = 3
			return l
		}()}, Model: m, Tools: noTools, Observer: func(s ports.Step) {
			held = max(held, s.Kernel.HeldAgents())
			rec.observe(s)
		}})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		if err := d.Submit(t.Context(), "split everything"); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		stop() // Run has returned: the observer's counts are ours to read
		lim := kernel.DefaultLimits()
		if end.Outcome != kernel.OutcomeCompleted {
			t.Errorf("turn %s (%s)", end.Outcome, end.Reason)
		}
		if n := most.Load(); n > int64(lim.MaxParallelRequests) {
			t.Errorf("%d requests streamed at once, want at most %d", n, lim.MaxParallelRequests)
		}
		if held > lim.MaxAgents {
			t.Errorf("the tree held %d agents at once, want at most %d", held, lim.MaxAgents)
		}
		if len(rec.lifes(kernel.LifeRequestWaiting)) == 0 {
			t.Error("no request waited for a slot: the test did not reach the cap")
		}
	})
}
