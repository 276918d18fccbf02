package live

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// TestEmptyFragmentsAreNoProgress: a model that names a call and then
// streams fragments adding nothing (no id, no name, no arguments), one a
// millisecond, for ever, is silent: the driver delivers none of them, the
// stall watchdog ends the turn stall_timeout after the last fragment that
// added something, and the steps stay few (docs/semantics.md, "Deadlines").
func TestEmptyFragmentsAreNoProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "read_file"})
			for {
				sink.Call(kernel.CallDelta{Index: 0})
				select {
				case <-time.After(time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		})
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, func(c *kernel.Config) {
			c.Limits.StallTimeout = 2 * time.Second
			c.Limits.TurnTimeout = time.Minute
		})
		stop := start(t, d)
		defer stop()
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeTimedOut || end.Reason != kernel.ReasonStallTimeout {
			t.Fatalf("turn %s (%s) at %v, want a stall timeout", end.Outcome, end.Reason, end.At)
		}
		if end.At != 2*time.Second {
			t.Errorf("stall timeout at %v, want 2s (the named fragment arrived at 0)", end.At)
		}
		if n := len(rec.stepsSince(0)); n > 20 {
			t.Errorf("%d steps for one request: empty fragments reached the kernel", n)
		}
	})
}
