package kernel

import (
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
)

// TestEmptyFragmentIsNoProgress: a call fragment that adds nothing — no id,
// no name, no arguments — is stale (docs/semantics.md, "Deadlines"): one
// stale record and nothing else, no progress for the stall watchdog, no
// call opened. Fragments that add something are progress as before.
func TestEmptyFragmentIsNoProgress(t *testing.T) {
	h := newHarness(t, nil)
	cfg := h.k.Config()
	h.submit("go")
	h.stream(Root, 0, ToolCall{ID: "c1", Name: "read_file"})
	for range 5 {
		h.wait(cfg.StallTimeout / 8)
		mark := h.mark()
		h.do(CallFragment(0, h.req(Root), 0, CallDelta{Index: 3}))
		if got := h.since(mark); len(got) != 1 || got[0].Kind != EffEmit || got[0].Life.Kind != LifeStale {
			t.Fatalf("an empty fragment caused %v, want one stale record", got)
		}
	}
	h.until(cfg.StallTimeout - time.Millisecond)
	h.state(Root, fsm.Streaming)
	h.wait(time.Millisecond)
	if to := lifes(h.all, LifeTimedOut); len(to) != 1 || to[0].Reason != ReasonStallTimeout || to[0].Since != 0 {
		t.Fatalf("want one stall timeout judged from the named fragment at 0, got %v", to)
	}
	if d := lifes(h.all, LifeCallDropped); len(d) != 1 || d[0].CallID != "c1" {
		t.Fatalf("dropped calls %v, want only c1 (an empty fragment opens no call)", d)
	}
}
