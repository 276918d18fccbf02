package kernel

import (
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
)

// The failure catalogue (docs/semantics.md), one hand-written event sequence per
// failure at depth 1 (main alone) and at depth 3 (main → a → b). Each case
// asserts effects, states, outcomes and histories; the harness additionally
// validates every history and request transcript after every step.
type failureCase struct {
	name string
	cfg  func(*Config)
	run  func(t *testing.T, h *harness)
}

func TestFailureCatalogue(t *testing.T) {
	for _, c := range failureCases() {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, c.cfg)
			c.run(t, h)
		})
	}
}

func failureCases() []failureCase {
	return []failureCase{
		{name: "F1/depth1", run: f1Depth1},
		{name: "F1/depth3", run: f1Depth3},
		{name: "F2/depth1", run: f2Depth1},
		{name: "F2/depth3", run: f2Depth3},
		{name: "F3/depth1", run: f3Depth1},
		{name: "F3/depth3", run: f3Depth3},
		{name: "F4/depth1", run: f4Depth1},
		{name: "F4/depth3", run: f4Depth3, cfg: func(c *Config) { c.ToolTimeout = 6 * time.Minute }},
		{name: "F5/depth1", run: f5Depth1},
		{name: "F5/depth3", run: f5Depth3},
		{name: "F6/depth1", run: f6Depth1},
		{name: "F6/depth3", run: f6Depth3},
		{name: "F7/depth1", run: f7Depth1},
		{name: "F7/depth3", run: f7Depth3},
		{name: "F8/depth1", run: f8Depth1},
		{name: "F8/depth3", run: f8Depth3},
		{name: "F9/depth1", run: f9Depth1},
		{name: "F9/depth3", run: f9Depth3},
		{name: "F10/depth1", run: f10Depth1},
		{name: "F10/depth3", run: f10Depth3, cfg: func(c *Config) { c.LogCapacity = 16 }},
		{name: "F11/depth1", run: f11Depth1},
		{name: "F11/depth3", run: f11Depth3},
		{name: "F12/depth1", run: f12Depth1},
		{name: "F12/depth3", run: f12Depth3},
		{name: "F13/depth1", run: f13Depth1},
		{name: "F13/depth3", run: f13Depth3},
		{name: "F14/depth1", run: f14Depth1},
		{name: "F14/depth3", run: f14Depth3},
	}
}

// F1: after an interrupt, tools or children finishing must not lead to a
// follow-up request.
func f1Depth1(t *testing.T, h *harness) {
	h.submit("fix it")
	g, r := h.call("grep", `{"pattern":"TODO"}`), h.call("read", `{"path":"a.go"}`)
	h.ask(Root, g, r)
	h.state(Root, fsm.Tooling)
	h.wait(time.Second)
	m := h.mark()
	h.do(Cancel(0, Root))
	h.state(Root, fsm.Interrupted)
	// One tool acknowledges the cancel; the other ignores it and finishes.
	h.do(ToolResult(0, h.tool(g.ID), ToolCancelled, ""))
	h.do(ToolResult(0, h.tool(r.ID), ToolOK, "package a"))
	h.state(Root, fsm.Idle)
	h.outcome(Root, OutcomeInterrupted, ReasonUserCancel)
	h.wait(time.Minute)
	if n := count(h.since(m), EffStartLLM, -1); n != 0 {
		t.Fatalf("F1: %d LLM request(s) after the interrupt", n)
	}
	for _, msg := range h.k.Agent(Root).History() {
		if strings.Contains(msg.Content, "package a") {
			t.Fatalf("F1: a result that arrived after the interrupt reached history: %q", msg.Content)
		}
	}
	h.quiescent()
	m = h.mark()
	h.submit("try again")
	if n := count(h.since(m), EffStartLLM, Root); n != 1 {
		t.Fatalf("a new submission must start exactly one request, got %d", n)
	}
}

func f1Depth3(t *testing.T, h *harness) {
	main, a, b := h.chain3()
	tc := h.call("build", `{}`)
	h.ask(b, tc)
	h.state(b, fsm.Tooling)
	m := h.mark()
	h.do(Cancel(0, main))
	for _, id := range []AgentID{main, a, b} {
		h.state(id, fsm.Interrupted)
	}
	h.wait(500 * time.Millisecond)
	h.do(ToolResult(0, h.tool(tc.ID), ToolOK, "build ok"))
	for _, id := range []AgentID{main, a, b} {
		h.state(id, fsm.Idle)
	}
	h.outcome(main, OutcomeInterrupted, ReasonUserCancel)
	h.outcome(a, OutcomeInterrupted, ReasonParentCancelled)
	h.outcome(b, OutcomeInterrupted, ReasonParentCancelled)
	h.wait(time.Hour)
	if n := count(h.since(m), EffStartLLM, -1); n != 0 {
		t.Fatalf("F1: %d LLM request(s) in the interrupted subtree", n)
	}
	h.quiescent()
}

// F2: cancel travels down to every descendant (exactly one cancel per
// in-flight op) and the outcome travels up as a typed value.
func f2Depth1(t *testing.T, h *harness) {
	h.submit("scan")
	g, r := h.call("grep", `{"pattern":"x"}`), h.call("ls", `{}`)
	h.ask(Root, g, r)
	out := h.do(Cancel(0, Root))
	for _, c := range []ToolCall{g, r} {
		if h.cancels[h.tool(c.ID)] != 1 {
			t.Fatalf("F2: tool %s got %d cancels, want 1", c.ID, h.cancels[h.tool(c.ID)])
		}
	}
	if count(out, EffCancelTool, Root) != 2 {
		t.Fatalf("F2: the cancel Step must cancel both tools, got:%s", h.lastDescribe())
	}
	h.do(ToolResult(0, h.tool(g.ID), ToolCancelled, ""))
	h.do(ToolResult(0, h.tool(r.ID), ToolCancelled, ""))
	ends := lifes(h.all, LifeTurnEnded)
	last := ends[len(ends)-1]
	if last.Agent != Root || last.Outcome != OutcomeInterrupted || last.Reason != ReasonUserCancel {
		t.Fatalf("F2: turn end %s, want interrupted/user_cancel", last.Describe())
	}
	h.quiescent()
}

func f2Depth3(t *testing.T, h *harness) {
	h.submit("go deep")
	h.ask(Root, h.deleg("a", "task for a"))
	a := h.id("a")
	grep := h.call("grep", `{"pattern":"TODO"}`)
	del := h.deleg("b", "task for b")
	h.ask(a, grep, del)
	b := h.id("b")
	h.text(b, "working on")
	bReq := h.req(b)
	out := h.do(Cancel(0, Root))
	if count(out, EffCancelLLM, b) != 1 || count(out, EffCancelTool, a) != 1 {
		t.Fatalf("F2: one Step must cancel b's stream and a's tool:%s", h.lastDescribe())
	}
	if count(out, EffCancelLLM, Root) != 0 || count(out, EffCancelLLM, a) != 0 {
		t.Fatalf("F2: cancels for agents with no request in flight")
	}
	ints := lifes(out, LifeInterrupted)
	if len(ints) != 3 {
		t.Fatalf("F2: want 3 interrupted agents, got %d", len(ints))
	}
	want := map[AgentID]Reason{Root: ReasonUserCancel, a: ReasonParentCancelled, b: ReasonParentCancelled}
	for _, l := range ints {
		if want[l.Agent] != l.Reason {
			t.Fatalf("F2: %s", l.Describe())
		}
	}
	// Outcome travels up typed: a's result in main, b's in a.
	ra := decodeResult(t, toolContent(t, h.k.Agent(Root).History(), lastCallID(h, Root)))
	if ra.Outcome != OutcomeInterrupted || ra.Reason != ReasonParentCancelled {
		t.Fatalf("F2: main sees a as %s/%s", ra.Outcome, ra.Reason)
	}
	rb := decodeResult(t, toolContent(t, h.k.Agent(a).History(), del.ID))
	if rb.Outcome != OutcomeInterrupted || rb.Partial != "working on" {
		t.Fatalf("F2: a sees b as %+v", rb)
	}
	h.do(LLMError(0, bReq, FailureCancelled, ""))
	h.do(ToolResult(0, h.tool(grep.ID), ToolCancelled, ""))
	h.quiescent()
	if h.cancels[bReq] != 1 || h.cancels[h.tool(grep.ID)] != 1 {
		t.Fatalf("F2: exactly one cancel per op")
	}
}

func lastCallID(h *harness, a AgentID) string {
	hist := h.k.Agent(a).History()
	for i := len(hist) - 1; i >= 0; i-- {
		if len(hist[i].ToolCalls) > 0 {
			return hist[i].ToolCalls[len(hist[i].ToolCalls)-1].ID
		}
	}
	h.t.Fatalf("%s has no tool calls", h.k.Agent(a).Path())
	return ""
}

// F3: a tool that ignores its cancel is abandoned after the grace period;
// the tree is quiescent by interrupt time + grace; the late result is dropped.
func f3Depth1(t *testing.T, h *harness) {
	h.submit("run it")
	c := h.call("slow", `{}`)
	h.ask(Root, c)
	h.wait(time.Second)
	cancelAt := h.now
	h.do(Cancel(0, Root))
	h.wait(h.k.Config().Grace - time.Millisecond)
	h.state(Root, fsm.Interrupted)
	h.wait(time.Millisecond)
	h.state(Root, fsm.Idle)
	if h.now != cancelAt+h.k.Config().Grace {
		t.Fatalf("clock %v", h.now)
	}
	h.quiescent()
	ended := lifes(h.all, LifeOpEnded)
	if last := ended[len(ended)-1]; last.End != OpAbandoned || last.Op != h.tool(c.ID) {
		t.Fatalf("F3: want the tool abandoned, got %s", last.Describe())
	}
	before := len(h.k.Agent(Root).History())
	h.wait(5 * time.Second)
	out := h.do(ToolResult(0, h.tool(c.ID), ToolOK, "finally"))
	if len(out) != 1 || out[0].Life.Kind != LifeStale {
		t.Fatalf("F3: a result after abandonment must be recorded stale and change nothing:%s", h.lastDescribe())
	}
	if len(h.k.Agent(Root).History()) != before {
		t.Fatal("F3: late result changed history")
	}
	h.outcome(Root, OutcomeInterrupted, ReasonUserCancel)
}

func f3Depth3(t *testing.T, h *harness) {
	main, a, b := h.chain3()
	c := h.call("sleep", `{"seconds":30}`)
	h.ask(b, c)
	cancelAt := h.now
	h.do(Cancel(0, main))
	h.wait(h.k.Config().Grace)
	for _, id := range []AgentID{main, a, b} {
		h.state(id, fsm.Idle)
	}
	h.quiescent()
	if h.now != cancelAt+h.k.Config().Grace {
		t.Fatalf("F3: quiescent at %v, want %v", h.now, cancelAt+h.k.Config().Grace)
	}
	out := h.do(ToolResult(0, h.tool(c.ID), ToolOK, "woke up"))
	if len(out) != 1 || out[0].Life.Kind != LifeStale {
		t.Fatalf("F3: late result not dropped as stale:%s", h.lastDescribe())
	}
}

// F4: deadlines are structural: no inactivity monitor on anything but the
// stream it watches; a child's deadline never exceeds its parent's; slow but
// steady work below never times out an ancestor.
func f4Depth1(t *testing.T, h *harness) {
	h.submit("think slowly")
	for i := 0; i < 15; i++ { // 15 chunks, 20 s apart: 5 minutes, stall is 30 s
		h.wait(20 * time.Second)
		h.text(Root, "tok ")
	}
	h.end(Root)
	if n := len(lifes(h.all, LifeTimedOut)); n != 0 {
		t.Fatalf("F4: %d timeout(s) while the stream made progress", n)
	}
	h.outcome(Root, OutcomeCompleted, ReasonNone)
	h.quiescent()
}

func f4Depth3(t *testing.T, h *harness) {
	main, a, b := h.chain3()
	dm, da, db := h.k.Agent(main).Deadline(), h.k.Agent(a).Deadline(), h.k.Agent(b).Deadline()
	if db > da || da > dm {
		t.Fatalf("F4: deadlines main=%v a=%v b=%v; a child may not outlive its parent", dm, da, db)
	}
	for _, e := range h.all {
		if e.Kind == EffSetTimer && e.Timer == TimerTurn && e.Agent != main {
			t.Fatalf("F4: child %d got its own turn timer at the parent's deadline: %s", e.Agent, e.Describe())
		}
	}
	// b streams slowly for 4 minutes, then runs a 5-minute tool; neither a
	// nor main has an inactivity timer that could fire meanwhile.
	for i := 0; i < 12; i++ {
		h.wait(20 * time.Second)
		h.text(b, "tok ")
	}
	c := h.call("long_build", `{}`)
	h.ask(b, c)
	h.wait(5 * time.Minute)
	h.result(c.ID, "built")
	h.say(b, "b done")
	h.say(a, "a done")
	h.say(main, "all done")
	if n := len(lifes(h.all, LifeTimedOut)); n != 0 {
		t.Fatalf("F4: %d spurious timeout(s)", n)
	}
	for _, id := range []AgentID{main, a, b} {
		h.outcome(id, OutcomeCompleted, ReasonNone)
	}
	h.quiescent()
}

// F5: outcomes are typed structured content; UI text never enters a
// transcript (the harness checks UIStrings against every history each step).
func f5Depth1(t *testing.T, h *harness) {
	h.submit("scan")
	c := h.call("grep", `{"pattern":"x"}`)
	h.ask(Root, c)
	h.do(Cancel(0, Root))
	got := toolContent(t, h.k.Agent(Root).History(), c.ID)
	if want := `{"type":"tool_aborted","status":"cancelled","reason":"user_cancel"}`; got != want {
		t.Fatalf("F5: synthetic result %s, want %s", got, want)
	}
	h.do(ToolResult(0, h.tool(c.ID), ToolCancelled, ""))
	h.outcome(Root, OutcomeInterrupted, ReasonUserCancel)
	if UIText(OutcomeInterrupted, ReasonUserCancel) != UIInterrupted {
		t.Fatal("UI text for interrupted")
	}
}

func f5Depth3(t *testing.T, h *harness) {
	main, a, b := h.chain3()
	h.text(b, "half")
	m := h.mark()
	h.do(Cancel(0, b)) // cancel one child: its parent continues
	h.state(b, fsm.Interrupted)
	h.state(a, fsm.Delegating)
	h.do(LLMError(0, h.firstCancelled(m, b), FailureCancelled, ""))
	h.state(b, fsm.Idle)
	h.outcome(b, OutcomeInterrupted, ReasonUserCancel)
	h.state(a, fsm.Streaming) // a continues with b's typed result
	h.state(main, fsm.Delegating)
	r := decodeResult(t, toolContent(t, h.k.Agent(a).History(), lastCallID(h, a)))
	if r.Outcome != OutcomeInterrupted || r.Reason != ReasonUserCancel || r.Partial != "half" || r.Agent != "b" {
		t.Fatalf("F5: a sees %+v", r)
	}
	h.say(a, "b was stopped; done")
	h.say(main, "ok")
	h.outcome(main, OutcomeCompleted, ReasonNone)
	h.quiescent()
}

// firstCancelled returns the first LLM op cancelled for agent since mark.
func (h *harness) firstCancelled(mark int, agent AgentID) OpID {
	h.t.Helper()
	for _, e := range h.since(mark) {
		if e.Kind == EffCancelLLM && e.Agent == agent {
			return e.Op
		}
	}
	h.t.Fatalf("no CancelLLM for agent %d", agent)
	return 0
}

// F6: the interrupted turn leaves one marker that the next request shows.
func f6Depth1(t *testing.T, h *harness) {
	h.submit("write a poem")
	h.text(Root, "Roses are")
	m := h.mark()
	h.do(Cancel(0, Root))
	h.do(LLMError(0, h.firstCancelled(m, Root), FailureCancelled, ""))
	m = h.mark()
	h.submit("shorter please")
	var req Effect
	for _, e := range h.since(m) {
		if e.Kind == EffStartLLM {
			req = e
		}
	}
	msgs := req.Messages
	if len(msgs) != 4 || msgs[1].Content != "Roses are" || !msgs[1].Partial || !msgs[2].Marker || msgs[3].Content != "shorter please" {
		t.Fatalf("F6: next request does not show the cut turn:\n%s", dumpHistory(msgs))
	}
	if !strings.Contains(msgs[2].Content, `reason="user_cancel"`) || !strings.HasPrefix(msgs[2].Content, MarkerPrefix) {
		t.Fatalf("F6: marker %q", msgs[2].Content)
	}
	if markers(msgs) != 1 {
		t.Fatal("F6: one marker per interrupted turn")
	}
}

func f6Depth3(t *testing.T, h *harness) {
	main, a, b := h.chain3()
	m := h.mark()
	h.do(Cancel(0, main))
	for _, id := range []AgentID{main, a, b} {
		if n := markers(h.k.Agent(id).History()); n != 1 {
			t.Fatalf("F6: %s has %d markers", h.k.Agent(id).Path(), n)
		}
	}
	h.do(LLMError(0, h.firstCancelled(m, b), FailureCancelled, ""))
	h.quiescent()
	m = h.mark()
	h.submit("continue")
	for _, e := range h.since(m) {
		if e.Kind == EffStartLLM {
			n := len(e.Messages)
			if !e.Messages[n-2].Marker || e.Messages[n-1].Content != "continue" {
				t.Fatalf("F6: request lacks the marker before the new text:\n%s", dumpHistory(e.Messages))
			}
			return
		}
	}
	t.Fatal("no request after submit")
}

// F7: partial streamed text is kept, flagged partial.
func f7Depth1(t *testing.T, h *harness) {
	h.submit("greet")
	h.text(Root, "Hello ")
	h.text(Root, "wor")
	h.do(Cancel(0, Root))
	last := h.k.Agent(Root).History()
	var partial Message
	for _, msg := range last {
		if msg.Role == RoleAssistant {
			partial = msg
		}
	}
	if partial.Content != "Hello wor" || !partial.Partial {
		t.Fatalf("F7: partial %+v", partial)
	}
	if !lastMsg(last).Marker || !strings.Contains(lastMsg(last).Content, `partial="true"`) {
		t.Fatalf("F7: marker must say the text above is partial: %q", lastMsg(last).Content)
	}
}

func f7Depth3(t *testing.T, h *harness) {
	main, a, b := h.chain3()
	h.text(b, "half an ans")
	m := h.mark()
	h.do(Cancel(0, main))
	if p := lastAssistant(h.k.Agent(b).History()); p.Content != "half an ans" || !p.Partial {
		t.Fatalf("F7: b's partial %+v", p)
	}
	r := decodeResult(t, toolContent(t, h.k.Agent(a).History(), lastCallID(h, a)))
	if r.Partial != "half an ans" {
		t.Fatalf("F7: a's result for b lacks the partial text: %+v", r)
	}
	h.do(LLMError(0, h.firstCancelled(m, b), FailureCancelled, ""))
	ends := lifes(h.all, LifeTurnEnded)
	for _, e := range ends {
		if e.Agent == b && e.Text != "half an ans" {
			t.Fatalf("F7: b's turn end carries %q", e.Text)
		}
	}
	h.quiescent()
}

func lastAssistant(ms []Message) Message {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Role == RoleAssistant {
			return ms[i]
		}
	}
	return Message{}
}
