package kernel

import (
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
)

// TestEmptyChunkIsProgress: a chunk with neither text nor a call — what the
// live adapter sends while a model streams its reasoning (docs/semantics.md,
// "Deadlines") — counts for the first-token and the stall watchdog, appends
// nothing and publishes no delta record; once such chunks stop, the stall
// deadline runs from the last one.
func TestEmptyChunkIsProgress(t *testing.T) {
	h := newHarness(t, nil)
	cfg := h.k.Config()
	h.submit("think hard")
	mark := h.mark()
	h.wait(cfg.FirstTokenTimeout - time.Millisecond)
	h.text(Root, "")
	h.wait(cfg.StallTimeout - time.Millisecond) // past the first-token deadline
	h.state(Root, fsm.Streaming)
	h.text(Root, "")
	h.wait(cfg.StallTimeout - time.Millisecond)
	h.state(Root, fsm.Streaming)
	if d := lifes(h.since(mark), LifeDelta); len(d) != 0 {
		t.Fatalf("an empty chunk published %d delta record(s): %v", len(d), d)
	}
	h.text(Root, "answer")
	h.end(Root)
	h.outcome(Root, OutcomeCompleted, ReasonNone)
	if last := lastMsg(h.k.Agent(Root).History()); last.Content != "answer" {
		t.Fatalf("the answer is %q, want only the text chunk", last.Content)
	}

	h.submit("again")
	h.text(Root, "")
	h.wait(cfg.StallTimeout - time.Millisecond)
	h.state(Root, fsm.Streaming)
	h.wait(time.Millisecond)
	if to := lifes(h.all, LifeTimedOut); len(to) != 1 || to[0].Reason != ReasonStallTimeout {
		t.Fatalf("want one stall timeout at the last empty chunk + stall_timeout, got %v", to)
	}
}
