package kernel

import (
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
)

// fanout3 has the root delegate to three children at once under a tree
// cap of two requests; it returns the children.
func fanout3(h *harness) [3]AgentID {
	h.t.Helper()
	h.submit("split")
	h.ask(Root, h.deleg("a", "one"), h.deleg("b", "two"), h.deleg("c", "three"))
	return [3]AgentID{h.id("a"), h.id("b"), h.id("c")}
}

// TestRequestsWaitForASlot: with max_parallel_requests 2, the third of
// three children asked for at once waits (a request_waiting record, no
// request, no watchdog); it is sent in the step the first child's stream
// ends, and its first-token deadline runs from then, not from when it was
// asked for (docs/semantics.md, "Budgets and caps").
func TestRequestsWaitForASlot(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxParallelRequests = 2 })
	cfg := h.k.Config()
	kids := fanout3(h)
	if w := lifes(h.all, LifeRequestWaiting); len(w) != 1 || w[0].Agent != kids[2] || w[0].N != 1 {
		t.Fatalf("waiting records %v, want one for %d's first request", w, kids[2])
	}
	if n := count(h.all, EffStartLLM, kids[2]); n != 0 {
		t.Fatalf("the third child sent %d request(s) with both slots taken", n)
	}
	h.state(kids[2], fsm.Streaming)
	// Longer than a first-token timeout: the waiting request has none.
	h.wait(cfg.FirstTokenTimeout - time.Millisecond)
	mark := h.mark()
	h.say(kids[0], "done")
	if n := count(h.since(mark), EffStartLLM, kids[2]); n != 1 {
		t.Fatalf("the third child's request did not start in the step a slot freed")
	}
	sent := h.now
	h.say(kids[1], "done")
	h.wait(cfg.FirstTokenTimeout - time.Millisecond)
	h.state(kids[2], fsm.Streaming)
	h.wait(time.Millisecond)
	to := lifes(h.all, LifeTimedOut)
	if len(to) != 1 || to[0].Agent != kids[2] || to[0].Reason != ReasonFirstTokenTimeout || to[0].Since != sent {
		t.Fatalf("timeouts %v, want one first-token timeout of the third child judged from %v", to, sent)
	}
}

// TestWaitingRequestsFirstComeFirstServed: a request asked for while
// others wait queues behind them even when a slot is free within the step,
// and slots go to waiting requests in the order they were asked for.
func TestWaitingRequestsFirstComeFirstServed(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxParallelRequests = 1 })
	kids := fanout3(h) // a streams; b then c wait
	mark := h.mark()
	h.say(kids[0], "done") // frees the slot: b, not the root or c
	if starts := lifes(h.since(mark), LifeRequestStarted); len(starts) != 1 || starts[0].Agent != kids[1] {
		t.Fatalf("requests started %v, want b's alone", starts)
	}
	h.say(kids[1], "done")
	h.say(kids[2], "done") // the root's follow-up was asked for here
	h.say(Root, "all done")
	h.outcome(Root, OutcomeCompleted, ReasonNone)
	h.quiescent()
}

// TestCancelDropsAWaitingRequest: a cancel of a tree whose request waits
// for a slot takes it out of the queue — it is never sent, and nothing is
// cancelled for it — and the agent settles at once; the slots then go to
// the requests still waiting.
func TestCancelDropsAWaitingRequest(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxParallelRequests = 1 })
	kids := fanout3(h)
	mark := h.mark()
	h.do(Cancel(0, kids[1]))
	if n := count(h.since(mark), EffCancelLLM, kids[1]); n != 0 {
		t.Fatalf("%d cancel(s) sent for a request never sent", n)
	}
	h.outcome(kids[1], OutcomeInterrupted, ReasonUserCancel)
	h.say(kids[0], "done")
	if n := count(h.all, EffStartLLM, kids[1]); n != 0 {
		t.Fatal("a cancelled agent's waiting request was sent")
	}
	if h.req(kids[2]) == 0 {
		t.Fatal("the next waiting request did not get the slot")
	}
}

// TestInterjectionJoinsAWaitingRequest: with one request slot, the
// request an interjection cut holds it while it winds down, so the restart
// after the debounce window waits; text typed then joins the waiting
// request — nothing is cut, no restart is timed — and the request, sent
// once the cut one acknowledged its cancel, carries both texts.
func TestInterjectionJoinsAWaitingRequest(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxParallelRequests = 1 })
	cfg := h.k.Config()
	h.submit("go")
	old := h.req(Root)
	h.text(Root, "partial")
	h.do(Interject(0, "one"))
	h.wait(cfg.Debounce)
	if w := lifes(h.all, LifeRequestWaiting); len(w) != 1 || w[0].Agent != Root || w[0].N != 2 {
		t.Fatalf("waiting records %v, want the root's second request", w)
	}
	mark := h.mark()
	h.do(Interject(0, "two"))
	if n := count(h.since(mark), EffSetTimer, Root) + count(h.since(mark), EffCancelLLM, Root); n != 0 {
		t.Fatalf("an interjection into a waiting request timed a restart or cut something: %d effect(s)", n)
	}
	mark = h.mark()
	h.do(LLMError(0, old, FailureCancelled, "cancelled"))
	var sent []Message
	for _, e := range h.since(mark) {
		if e.Kind == EffStartLLM && e.Agent == Root {
			sent = e.Messages
		}
	}
	if n := len(sent); n < 2 || sent[n-2].Content != "one" || sent[n-1].Content != "two" || !sent[n-1].Interjection {
		t.Fatalf("the request sent when the slot freed ends %v, want both interjections", sent)
	}
}
