package live

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// TestShutdownReasonsDownTheTree: a shutdown through the live driver ends
// the root's running turn with reason shutdown and every working
// descendant's with parent_cancelled, as any abort of an ancestor does
// (docs/semantics.md, "Inputs", "Outcomes and reasons"); the child's
// result in the root's history says so.
func TestShutdownReasonsDownTheTree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			if req.Agent == kernel.Root {
				sink.Call(kernel.CallDelta{Index: 0, ID: "d1", Name: "delegate", Args: `{"task":"dig","name":"digger"}`})
				return nil
			}
			sink.Text("digging")
			<-ctx.Done()
			return ctx.Err()
		})
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, nil)
		runDriver(t, d)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := d.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-d.Done()
		ends := map[kernel.AgentID]kernel.Lifecycle{}
		for _, l := range rec.lifes(kernel.LifeTurnEnded) {
			ends[l.Agent] = l
		}
		root, child := ends[kernel.Root], ends[kernel.Root+1]
		if len(ends) != 2 || root.Reason != kernel.ReasonShutdown || child.Reason != kernel.ReasonParentCancelled ||
			root.Outcome != kernel.OutcomeInterrupted || child.Outcome != kernel.OutcomeInterrupted {
			t.Fatalf("turn ends %+v, want main interrupted/shutdown and main/digger interrupted/parent_cancelled", ends)
		}
	})
}
