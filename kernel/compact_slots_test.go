package kernel

import (
	"slices"
	"testing"

	"github.com/escapement/escapement/fsm"
)

// TestCompactionTakesARequestSlot: a compaction's summarising request is a
// request for max_parallel_requests (docs/semantics.md, "Compaction", "A
// request slot"). With one slot, a child whose request the server refused
// as too long while its sibling waits for the slot compacts only after
// the sibling: its compaction waits (a request_waiting record named
// compaction, no request, no compaction_started), is sent in the step the
// slot frees, and the retry it precedes asks for a slot like any request.
func TestCompactionTakesARequestSlot(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxParallelRequests = 1 })
	h.submit("split")
	h.ask(Root, h.deleg("a", "one"), h.deleg("b", "two"))
	a, b := h.id("a"), h.id("b")
	mark := h.mark()
	h.do(LLMError(0, h.req(a), FailureContextLength, "maximum context length exceeded"))
	after := h.since(mark)
	if starts := lifes(after, LifeRequestStarted); len(starts) != 1 || starts[0].Agent != b {
		t.Fatalf("requests started %v, want b's, which waited first", starts)
	}
	if n := len(compactStarts(after)); n != 0 {
		t.Fatalf("a's compaction was sent ahead of b's waiting request (%d start(s))", n)
	}
	w := lifes(after, LifeRequestWaiting)
	if len(w) != 1 || w[0].Agent != a || w[0].Name != "compaction" || w[0].N != 0 {
		t.Fatalf("waiting records %v, want one for a's compaction", w)
	}
	if v := h.k.Agent(a); !v.Compacting() || v.State() != fsm.Streaming {
		t.Fatalf("a waits for its compaction's slot: Compacting %v, %s", v.Compacting(), v.State())
	}
	mark = h.mark()
	h.say(b, "done")
	after = h.since(mark)
	if n := len(compactStarts(after)); n != 1 {
		t.Fatalf("a's compaction was not sent in the step the slot freed:%s", h.lastDescribe())
	}
	if l := lifes(after, LifeCompactionStarted); len(l) != 1 || l[0].Agent != a || l[0].Name != whyContextLength {
		t.Fatalf("compaction_started %v", l)
	}
	mark = h.mark()
	h.say(a, "The task was one.")
	if starts := lifes(h.since(mark), LifeRequestStarted); len(starts) != 1 || starts[0].Agent != a || starts[0].N != 2 {
		t.Fatalf("requests started %v, want a's retry", starts)
	}
	h.say(a, "done")
	h.say(Root, "all done")
	h.outcome(Root, OutcomeCompleted, ReasonNone)
	h.quiescent()
}

// TestCancelDropsAWaitingCompaction: an abort takes a compaction that
// waits for a slot out of the queue: its summarising request is never
// sent, the history is as it was (and the abort's marker), and the slot
// goes to the next waiting request.
func TestCancelDropsAWaitingCompaction(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxParallelRequests = 1 })
	h.submit("split")
	h.ask(Root, h.deleg("a", "one"), h.deleg("b", "two"), h.deleg("c", "three"))
	a, b, c := h.id("a"), h.id("b"), h.id("c")
	h.do(LLMError(0, h.req(a), FailureContextLength, "too long"))
	before := slices.Clone(h.k.Agent(a).History())
	h.do(Cancel(0, a))
	h.outcome(a, OutcomeInterrupted, ReasonUserCancel)
	if h.k.Agent(a).Compacting() {
		t.Fatal("a cancelled agent still compacts")
	}
	got := h.k.Agent(a).History()
	if len(got) != len(before)+1 || !sameMessages(got[:len(before)], before) || !got[len(before)].Marker {
		t.Fatalf("history after the cancel:\n%swant the one before it and its marker:\n%s", dumpHistory(got), dumpHistory(before))
	}
	h.say(b, "done")
	if n := len(compactStarts(h.all)); n != 0 {
		t.Fatalf("a dropped compaction was sent (%d)", n)
	}
	if h.req(c) == 0 {
		t.Fatal("the slot did not go to c's waiting request")
	}
}
