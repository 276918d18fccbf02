package kernel

import (
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
)

// Regression tests for defects a review found; each fails on the code
// before its fix.

// TestDebounceSameTurnOnly (F8, I11): repeats of one turn's cancel are
// coalesced. A cancel of a newer turn, however soon after, is the user
// stopping that turn, and acts at once.
func TestDebounceSameTurnOnly(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Debounce = 100 * time.Millisecond })
	h.submit("first")
	r1 := h.req(Root)
	h.do(Cancel(0, Root))
	h.do(LLMError(0, r1, FailureCancelled, "")) // the ack: the tree settles
	h.outcome(Root, OutcomeInterrupted, ReasonUserCancel)
	h.state(Root, fsm.Idle)

	h.wait(10 * time.Millisecond)
	h.submit("second")
	h.wait(10 * time.Millisecond) // 20ms after the first cancel: inside its window
	out := h.do(Cancel(0, Root))
	l := lifes(out, LifeInterrupted)
	if len(l) != 1 || l[0].Turn != 2 {
		t.Fatalf("a cancel of turn 2 inside turn 1's window must act; got %v", out)
	}
	expectEffect(t, out, EffCancelLLM)

	h.wait(10 * time.Millisecond)
	out = h.do(Cancel(0, Root)) // a repeat of turn 2's cancel: coalesced
	if len(lifes(out, LifeIgnored)) != 1 || len(lifes(out, LifeInterrupted)) != 0 || count(out, EffCancelLLM, -1) != 0 {
		t.Fatalf("a repeated cancel must change nothing: %v", out)
	}
	h.state(Root, fsm.Interrupted)
}

// TestNamelessCallAnsweredMalformed (F11, I4): a call streamed with an id
// and arguments but no name keeps a placeholder name in history (a nameless
// call is an invalid transcript) and is answered as malformed; the model is
// asked again.
func TestNamelessCallAnsweredMalformed(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("hi")
	r := h.req(Root)
	h.do(CallFragment(0, r, 1, CallDelta{Index: 0, ID: "call_x", Args: `{}`}))
	out := h.do(LLMEnd(0, r))
	if count(out, EffStartTool, -1) != 0 {
		t.Fatal("a nameless call was run")
	}
	expectEffect(t, out, EffStartLLM)
	hist := h.k.Agent(Root).History()
	var asst Message
	for _, m := range hist {
		if m.Role == RoleAssistant {
			asst = m
		}
	}
	if len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Name != NamelessCall {
		t.Fatalf("assistant calls %v, want one named %q", asst.ToolCalls, NamelessCall)
	}
	if c := toolContent(t, hist, "call_x"); !strings.Contains(c, `"status":"malformed"`) {
		t.Fatalf("result %s", c)
	}
	if err := ValidateTranscript(hist, false); err != nil {
		t.Fatal(err)
	}
}

// TestCutTextIsPerRequest (F7, F13): text an interjection cut from an earlier
// request is not reported as the partial of a later abort that cut nothing —
// whether the abort comes after the restart or inside its window.
func TestCutTextIsPerRequest(t *testing.T) {
	t.Run("in the restart window", func(t *testing.T) {
		h := newHarness(t, nil)
		h.submit("hi")
		h.text(Root, "old words")
		r1 := h.req(Root)
		h.do(Interject(0, "wait"))
		h.do(LLMError(0, r1, FailureCancelled, ""))
		m := h.mark()
		h.do(Cancel(0, Root)) // before the request restarts
		ended := lifes(h.since(m), LifeTurnEnded)
		if len(ended) != 1 || ended[0].Text != "" {
			t.Fatalf("turn end %v: the abort cut no text", ended)
		}
	})
	h := newHarness(t, nil)
	h.submit("hi")
	h.text(Root, "old words")
	r1 := h.req(Root)
	h.do(Interject(0, "wait"))
	h.do(LLMError(0, r1, FailureCancelled, "")) // the cut stream's ack
	h.wait(h.k.Config().Debounce)               // the request restarts
	c := h.call("ls", `{}`)
	h.ask(Root, c)
	h.state(Root, fsm.Tooling)
	m := h.mark()
	h.do(Cancel(0, Root))
	h.do(ToolResult(0, h.tool(c.ID), ToolCancelled, ""))
	ended := lifes(h.since(m), LifeTurnEnded)
	if len(ended) != 1 || ended[0].Text != "" {
		t.Fatalf("turn end %v: the abort cut no text\n%s", ended, h.lastDescribe())
	}
}

// TestRejectedFragmentKeepsChunkNumber (I8): a fragment rejected for its
// index does not consume its chunk number, so the chunk that really carries
// that number is not taken for a duplicate.
func TestRejectedFragmentKeepsChunkNumber(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("hi")
	r := h.req(Root)
	if out := h.do(CallFragment(0, r, 1, CallDelta{Index: -1, ID: "c"})); out[0].Kind != EffError {
		t.Fatalf("bad index accepted: %v", out)
	}
	expectLife(t, h.do(TextDelta(0, r, 1, "hello")), LifeDelta)
	h.end(Root)
	if got := lastAssistant(h.k.Agent(Root).History()).Content; got != "hello" {
		t.Fatalf("text %q", got)
	}
}

// TestMaxAgentsRefusal: a delegation over the tree's agent limit is refused
// with its own reason and the limit, not as max_children.
func TestMaxAgentsRefusal(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxAgents = 2 })
	h.submit("hi")
	h.ask(Root, h.deleg("x", "t"))
	x := h.id("x")
	over := h.deleg("y", "t")
	h.ask(x, over)
	if c := toolContent(t, h.k.Agent(x).History(), over.ID); !strings.Contains(c, `"reason":"max_agents","limit":2`) {
		t.Fatalf("refusal %s", c)
	}
}

// TestToolNamedLikeThePlaceholder: whether a call is nameless is decided by
// what the model streamed, not by a name: a real tool that happens to be
// called like the placeholder runs.
func TestToolNamedLikeThePlaceholder(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("hi")
	c := h.call(NamelessCall, `{}`)
	h.ask(Root, c)
	expectEffect(t, h.last, EffStartTool)
	h.result(c.ID, "ran")
	if got := toolContent(t, h.k.Agent(Root).History(), c.ID); got != "ran" {
		t.Fatalf("result %q", got)
	}
}
