package live

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// TestProgressFeedsTheWatchdogs: a stream that reports only progress (a
// reasoning model thinking) for longer than the first-token and stall
// timeouts, a progress every 10s, is alive: its answer arrives and the turn
// completes with it alone; the progress chunks are numbered like any chunk
// and add no text. The same silence without progress ends the turn as a
// first-token timeout.
func TestProgressFeedsTheWatchdogs(t *testing.T) {
	for _, progress := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
				ps, ok := sink.(ports.ProgressSink)
				if !ok {
					t.Error("the driver's sink is no ProgressSink")
				}
				for range 12 { // 2 minutes of thinking
					if progress {
						ps.Progress()
					}
					select {
					case <-time.After(10 * time.Second):
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				sink.Text("42")
				return nil
			})
			rec := newRecorder()
			d := newDriver(t, m, noTools, rec, func(c *kernel.Config) {
				c.Limits.FirstTokenTimeout = 30 * time.Second
				c.Limits.StallTimeout = 15 * time.Second
			})
			stop := start(t, d)
			defer stop()
			if err := d.Submit(t.Context(), "think"); err != nil {
				t.Fatal(err)
			}
			end := <-rec.ended
			if !progress {
				if end.Outcome != kernel.OutcomeTimedOut || end.Reason != kernel.ReasonFirstTokenTimeout {
					t.Errorf("without progress: turn %s (%s), want a first-token timeout", end.Outcome, end.Reason)
				}
				return
			}
			if end.Outcome != kernel.OutcomeCompleted || end.Text != "42" {
				t.Errorf("with progress: turn %s (%s) %q, want completed with 42", end.Outcome, end.Reason, end.Text)
			}
			var chunks []uint32
			for _, s := range rec.stepsSince(0) {
				if s.Event.Kind == kernel.EvLLMDelta {
					chunks = append(chunks, s.Event.Chunk)
				}
			}
			if len(chunks) != 13 || chunks[12] != 13 {
				t.Errorf("chunks %v, want 12 progress chunks and the text, numbered 1..13", chunks)
			}
		})
	}
}
