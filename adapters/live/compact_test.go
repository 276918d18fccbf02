package live

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// thinkingScript is script that also reports reasoning before it ends.
type thinkingScript struct{ *script }

func (s thinkingScript) Stream(ctx context.Context, req ports.Request, sink ports.Sink) error {
	if err := s.script.Stream(ctx, req, sink); err != nil {
		return err
	}
	if rs, ok := sink.(ports.ReasoningSink); ok && !req.Compaction {
		rs.Reasoning(kernel.Reasoning{Text: "thought", Field: "reasoning_content"})
	}
	return nil
}

// TestCompactAndReasoning: the driver's Compact input runs a compaction
// turn whose request reaches the model flagged as a compaction, and the
// summary replaces the history; it is refused while a turn runs; the
// reasoning a model reports rides on the stream's end into the message.
func TestCompactAndReasoning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := thinkingScript{&script{gap: time.Millisecond, answer: func(req ports.Request) []chunk {
			if req.Compaction {
				return []chunk{{text: "They greeted each other."}}
			}
			return []chunk{{text: "hello"}}
		}}}
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, nil)
		stop := start(t, d)
		defer stop()
		if err := d.Submit(t.Context(), "hi"); err != nil {
			t.Fatal(err)
		}
		if err := d.Compact(t.Context(), "greetings"); !errors.Is(err, kernel.ErrNotIdle) || !errors.Is(err, ErrRejected) {
			t.Fatalf("Compact while the turn runs: %v", err)
		}
		<-rec.ended
		history := func() (h []kernel.Message) {
			if err := d.Inspect(t.Context(), func(k *kernel.Kernel) { h = k.Agent(kernel.Root).History() }); err != nil {
				t.Fatal(err)
			}
			return h
		}
		if h := history(); h[1].Reasoning == nil || h[1].Reasoning.Text != "thought" {
			t.Fatalf("the answer's reasoning: %+v", h[1])
		}
		if err := d.Compact(t.Context(), "greetings"); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("the compaction turn ended %s", end.Outcome)
		}
		m.mu.Lock()
		last := m.requests[len(m.requests)-1]
		m.mu.Unlock()
		if !last.Compaction {
			t.Fatal("the compaction's request reached the model unflagged")
		}
		if h := history(); len(h) != 1 || !h[0].Summary || h[0].Reasoning != nil {
			t.Fatalf("history after the compaction: %+v", history())
		}
	})
}
