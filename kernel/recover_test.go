package kernel

import (
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/fsm"
)

// recoverHarness is a harness whose world was lost: the ops it tracked are
// forgotten (no answer will ever come) before Recover is stepped.
func (h *harness) recover() []Effect {
	h.t.Helper()
	h.reqs, h.calls = map[AgentID]OpID{}, map[string]OpID{}
	return h.do(Recover(0))
}

// TestRecoverRestartsStreamingRequest: a request cut off by a crash ends
// lost and is restarted with the same history, the text it had streamed
// kept once as partial; the turn's deadline is armed again where it was.
func TestRecoverRestartsStreamingRequest(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("count to ten")
	turnTimer := timerOf(h.all, TimerTurn)
	h.text(Root, "one two ")
	old := h.req(Root)
	out := h.recover()
	if e := opEndOf(out, old); e != OpLost {
		t.Fatalf("the lost request ended %v", e)
	}
	starts := effectsOf(out, EffStartLLM)
	if len(starts) != 1 || starts[0].Op == old {
		t.Fatalf("want one new request, got %v", starts)
	}
	msgs := starts[0].Messages
	if m := msgs[len(msgs)-1]; m.Role != RoleAssistant || !m.Partial || m.Content != "one two " {
		t.Fatalf("the restarted request ends with %+v, want the partial text", m)
	}
	if re := effectsOf(out, EffSetTimer); !slices.ContainsFunc(re, func(e Effect) bool { return e.Op == turnTimer.Op && e.At == turnTimer.At }) {
		t.Fatalf("turn deadline %d not armed again at %v: %v", turnTimer.Op, turnTimer.At, re)
	}
	if l := lifes(out, LifeRecovered); len(l) != 1 || l[0].N != 1 || l[0].Text != "1 request(s) restarted" {
		t.Fatalf("recovered = %+v", l)
	}
	if got := h.k.Agent(Root).Requests(); got != 2 {
		t.Fatalf("%d requests, want 2 (a restart counts)", got)
	}
	// The old request's answer, should it ever come, is stale.
	h.do(TextDelta(0, old, 9, "late"))
	expectLife(t, h.last, LifeStale)
	h.say(Root, "three")
	h.outcome(Root, OutcomeCompleted, ReasonNone)
	if n := strings.Count(dumpHistory(h.k.Agent(Root).History()), "count to ten"); n != 1 {
		t.Fatalf("the prompt is in history %d times", n)
	}
	h.quiescent()
}

// TestRecoverToolsByIdempotence: a running tool call of an idempotent tool
// runs again; any other gets a typed tool_lost result and is never re-run;
// a call still waiting for a slot starts as usual; the agent goes on.
func TestRecoverToolsByIdempotence(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Idempotent = []string{"read_file"}; c.MaxParallelTools = 2 })
	h.submit("look")
	read, shell, wait := h.call("read_file", `{"path":"a"}`), h.call("shell", `{"command":"rm x"}`), h.call("grep", `{}`)
	h.ask(Root, read, shell, wait)
	oldRead := h.tool(read.ID)
	out := h.recover()
	var started []string
	for _, e := range effectsOf(out, EffStartTool) {
		started = append(started, e.Call.Name)
	}
	if strings.Join(started, ",") != "read_file,grep" {
		t.Fatalf("started %v, want read_file again and the waiting grep", started)
	}
	if e := opEndOf(out, oldRead); e != OpLost {
		t.Fatalf("old read_file op ended %v", e)
	}
	var lostMsg Message
	for _, m := range h.k.Agent(Root).History() {
		if m.ToolCallID == shell.ID {
			lostMsg = m
		}
	}
	if !lostMsg.Synthetic || !strings.Contains(lostMsg.Content, `"type":"tool_lost"`) || !strings.Contains(lostMsg.Content, "may or may not have taken effect") {
		t.Fatalf("shell result = %+v", lostMsg)
	}
	fin := lifes(out, LifeCallFinished)
	if len(fin) != 1 || fin[0].Status != CallLost || fin[0].Reason != ReasonCrash {
		t.Fatalf("call_finished = %+v", fin)
	}
	h.state(Root, fsm.Tooling)
	h.result(read.ID, "content")
	h.result(wait.ID, "none")
	h.state(Root, fsm.Streaming)
}

// TestRecoverSettlesInterruptedTree: ops that were being cancelled when the
// host crashed end lost, and the interrupted tree settles at once.
func TestRecoverSettlesInterruptedTree(t *testing.T) {
	h := newHarness(t, nil)
	main, a, b := h.chain3()
	h.do(Cancel(0, main))
	h.state(a, fsm.Interrupted)
	h.recover()
	for _, id := range []AgentID{main, a, b} {
		h.state(id, fsm.Idle)
	}
	h.outcome(main, OutcomeInterrupted, ReasonUserCancel)
	h.outcome(b, OutcomeInterrupted, ReasonParentCancelled)
	h.quiescent()
}

// TestRecoverChildMidStream: a grandchild streaming at depth 2 resumes
// streaming after the crash, and its typed outcome reaches its parent.
func TestRecoverChildMidStream(t *testing.T) {
	h := newHarness(t, nil)
	_, a, b := h.chain3()
	h.text(b, "half ")
	h.recover()
	h.state(b, fsm.Streaming)
	h.say(b, "done")
	h.outcome(b, OutcomeCompleted, ReasonNone)
	h.state(a, fsm.Streaming) // its call got the child's result; its next request runs
	last := h.k.Agent(a).History()
	if m := last[len(last)-1]; m.Role != RoleTool || !strings.Contains(m.Content, `"outcome":"completed"`) {
		t.Fatalf("a's last message = %+v", m)
	}
}

// TestRecoverEndsShutdown: a host that crashed while shutting down left a
// tree interrupted with reason shutdown; the recovery settles it, and the
// new host may start a turn (the shutdown belonged to the dead process).
func TestRecoverEndsShutdown(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("work")
	h.text(Root, "half")
	h.do(Shutdown(0))
	h.state(Root, fsm.Interrupted)
	h.recover()
	h.outcome(Root, OutcomeInterrupted, ReasonShutdown)
	h.quiescent()
	h.submit("again")
	h.state(Root, fsm.Streaming)
}

// TestRecoverBudget: a restart that the request budget does not allow ends
// the turn budget_exhausted instead.
func TestRecoverBudget(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxRequests = 1 })
	h.submit("hi")
	h.text(Root, "par")
	h.recover()
	h.outcome(Root, OutcomeBudgetExhausted, ReasonBudget)
	h.quiescent()
}

// TestRecoverNothingInFlight: recovering a quiescent tree changes nothing.
func TestRecoverNothingInFlight(t *testing.T) {
	h := newHarness(t, nil)
	out := h.recover()
	if len(out) != 1 || out[0].Life.Kind != LifeRecovered || out[0].Life.Text != "nothing was in flight" {
		t.Fatalf("got %v", out)
	}
}

// TestRecoverReplaysIdentically: a kernel rebuilt from the logged events
// reproduces the logged effects exactly, and then recovers — the basis of
// durable turns.
func TestRecoverReplaysIdentically(t *testing.T) {
	h := newHarness(t, nil)
	h.chain3()
	h.text(Root+2, "x")
	k := MustNew(Config{Limits: DefaultLimits()})
	var replayed []Effect
	for _, ev := range h.events {
		replayed = append(replayed, slices.Clone(k.Step(ev))...)
	}
	if len(replayed) != len(h.all) {
		t.Fatalf("replay gave %d effects, the run %d", len(replayed), len(h.all))
	}
	for i := range replayed {
		if replayed[i].Describe() != h.all[i].Describe() {
			t.Fatalf("effect %d: %s != %s", i, replayed[i].Describe(), h.all[i].Describe())
		}
	}
	out := k.Step(Recover(h.now))
	if len(lifes(out, LifeRecovered)) != 1 || count(out, EffStartLLM, -1) != 1 {
		t.Fatalf("recover after replay: %v", out)
	}
}

func effectsOf(effs []Effect, kind EffectKind) []Effect {
	var out []Effect
	for _, e := range effs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func opEndOf(effs []Effect, op OpID) OpEnd {
	for _, l := range lifes(effs, LifeOpEnded) {
		if l.Op == op {
			return l.End
		}
	}
	return OpEndNone
}

func timerOf(effs []Effect, kind TimerKind) Effect {
	for _, e := range effs {
		if e.Kind == EffSetTimer && e.Timer == kind {
			return e
		}
	}
	return Effect{}
}
