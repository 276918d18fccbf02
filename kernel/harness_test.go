package kernel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
)

// harness drives a kernel by hand: tests write the world's answers as events,
// the harness tracks which ops and timers are live, advances a virtual clock
// firing due timers in (time, id) order, and checks basic invariants after
// every step so each table case is also a small oracle run.
type harness struct {
	t     testing.TB
	k     *Kernel
	now   time.Duration
	all   []Effect
	last  []Effect
	reqs  map[AgentID]OpID // live (not cancelled) LLM request per agent
	calls map[string]OpID  // tool op per call id
	// timers holds live timers: op → deadline.
	timers  map[OpID]time.Duration
	cancels map[OpID]int
	chunk   map[OpID]uint32
	nextID  int
	check   bool
	events  []Event // every event fed, with its time
}

func newHarness(t testing.TB, mutate func(*Config)) *harness {
	t.Helper()
	cfg := Config{Limits: DefaultLimits()}
	if mutate != nil {
		mutate(&cfg)
	}
	k, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &harness{
		t: t, k: k, check: true,
		reqs: map[AgentID]OpID{}, calls: map[string]OpID{}, timers: map[OpID]time.Duration{},
		cancels: map[OpID]int{}, chunk: map[OpID]uint32{},
	}
}

// do feeds ev at the harness's current time and records what happened.
func (h *harness) do(ev Event) []Effect {
	h.t.Helper()
	ev.At = h.now
	h.events = append(h.events, ev)
	out := slices.Clone(h.k.Step(ev))
	h.last = out
	h.all = append(h.all, out...)
	for _, e := range out {
		switch e.Kind {
		case EffStartLLM:
			h.reqs[e.Agent] = e.Op
		case EffCancelLLM:
			h.cancels[e.Op]++
			if h.reqs[e.Agent] == e.Op {
				delete(h.reqs, e.Agent)
			}
		case EffStartTool:
			h.calls[e.Call.ID] = e.Op
		case EffCancelTool:
			h.cancels[e.Op]++
		case EffSetTimer:
			h.timers[e.Op] = e.At
		case EffStopTimer:
			delete(h.timers, e.Op)
		case EffEmit:
			if e.Life.Kind == LifeOpEnded {
				for a, r := range h.reqs {
					if r == e.Life.Op {
						delete(h.reqs, a)
					}
				}
			}
		}
	}
	if ev.Kind == EvTimer {
		delete(h.timers, ev.Op)
	}
	if h.check {
		h.invariants()
	}
	return out
}

// invariants are the checks every step must pass in every test.
func (h *harness) invariants() {
	h.t.Helper()
	ui := UIStrings()
	for id := 0; id < h.k.NumAgents(); id++ {
		v := h.k.Agent(AgentID(id))
		open := v.State() == fsm.Tooling || v.State() == fsm.Delegating
		if err := ValidateTranscript(v.History(), open); err != nil {
			h.t.Fatalf("after %s: %s history: %v\n%s", h.lastDescribe(), v.Path(), err, dumpHistory(v.History()))
		}
		for _, m := range v.History() {
			for _, s := range ui {
				if strings.Contains(m.Content, s) {
					h.t.Fatalf("UI text %q in %s history (I12)", s, v.Path())
				}
			}
		}
	}
	for _, e := range h.last {
		if e.Kind == EffStartLLM {
			if err := ValidateTranscript(e.Messages, false); err != nil {
				h.t.Fatalf("StartLLM for agent %d sends an invalid transcript: %v", e.Agent, err)
			}
		}
	}
}

func (h *harness) lastDescribe() string {
	var b strings.Builder
	for _, e := range h.last {
		b.WriteString("\n  ")
		b.WriteString(e.Describe())
	}
	return b.String()
}

func dumpHistory(ms []Message) string {
	var b strings.Builder
	for i, m := range ms {
		fmt.Fprintf(&b, "  %d %s %q calls=%v id=%s partial=%v marker=%v\n", i, m.Role, m.Content, m.ToolCalls, m.ToolCallID, m.Partial, m.Marker)
	}
	return b.String()
}

// wait advances the clock by d, firing every timer that comes due on the way
// in (deadline, op id) order — the simulator's rule.
func (h *harness) wait(d time.Duration) {
	h.t.Helper()
	h.until(h.now + d)
}

func (h *harness) until(target time.Duration) {
	h.t.Helper()
	for {
		var best OpID
		var bestAt time.Duration
		for id, at := range h.timers {
			if at <= target && (best == 0 || at < bestAt || (at == bestAt && id < best)) {
				best, bestAt = id, at
			}
		}
		if best == 0 {
			break
		}
		if bestAt > h.now {
			h.now = bestAt
		}
		h.do(TimerFired(0, best))
	}
	if target > h.now {
		h.now = target
	}
}

func (h *harness) id(name string) AgentID {
	h.t.Helper()
	id, ok := h.k.Find(name)
	if !ok {
		h.t.Fatalf("no agent %q", name)
	}
	return id
}

func (h *harness) req(a AgentID) OpID {
	h.t.Helper()
	r, ok := h.reqs[a]
	if !ok {
		h.t.Fatalf("agent %s has no live request", h.k.Agent(a).Path())
	}
	return r
}

func (h *harness) submit(text string) { h.do(Submit(0, text)) }

func (h *harness) text(a AgentID, s string) {
	h.t.Helper()
	r := h.req(a)
	h.chunk[r]++
	h.do(TextDelta(0, r, h.chunk[r], s))
}

func (h *harness) end(a AgentID) { h.t.Helper(); h.do(LLMEnd(0, h.req(a))) }

func (h *harness) say(a AgentID, s string) {
	h.t.Helper()
	h.text(a, s)
	h.end(a)
}

// stream sends a call's fragments: the head (id, name) then its arguments in
// two pieces, as OpenAI-compatible servers do.
func (h *harness) stream(a AgentID, index int, c ToolCall) {
	h.t.Helper()
	r := h.req(a)
	h.chunk[r]++
	h.do(CallFragment(0, r, h.chunk[r], CallDelta{Index: index, ID: c.ID, Name: c.Name}))
	half := len(c.Arguments) / 2
	for _, part := range []string{c.Arguments[:half], c.Arguments[half:]} {
		h.chunk[r]++
		h.do(CallFragment(0, r, h.chunk[r], CallDelta{Index: index, Args: part}))
	}
}

// ask streams the calls and ends the request.
func (h *harness) ask(a AgentID, calls ...ToolCall) {
	h.t.Helper()
	for i, c := range calls {
		h.stream(a, i, c)
	}
	h.end(a)
}

func (h *harness) call(name, args string) ToolCall {
	h.nextID++
	return ToolCall{ID: fmt.Sprintf("call_%d", h.nextID), Name: name, Arguments: args}
}

func (h *harness) deleg(name, task string) ToolCall {
	b, _ := json.Marshal(delegateArgs{Task: task, Name: name})
	return h.call("delegate", string(b))
}

func (h *harness) tool(callID string) OpID {
	h.t.Helper()
	op, ok := h.calls[callID]
	if !ok {
		h.t.Fatalf("call %s was never started", callID)
	}
	return op
}

func (h *harness) result(callID, content string) {
	h.t.Helper()
	h.do(ToolResult(0, h.tool(callID), ToolOK, content))
}

// chain3 builds main → a → b with b's request live.
func (h *harness) chain3() (main, a, b AgentID) {
	h.t.Helper()
	h.submit("go deep")
	h.ask(Root, h.deleg("a", "task for a"))
	a = h.id("a")
	h.ask(a, h.deleg("b", "task for b"))
	b = h.id("b")
	return Root, a, b
}

// --- assertions ---

func (h *harness) state(a AgentID, want fsm.State) {
	h.t.Helper()
	if got := h.k.Agent(a).State(); got != want {
		h.t.Fatalf("%s state = %s, want %s", h.k.Agent(a).Path(), got, want)
	}
}

func (h *harness) outcome(a AgentID, want Outcome, reason Reason) {
	h.t.Helper()
	o, r := h.k.Agent(a).Outcome()
	if h.k.Agent(a).Freed() {
		// A finished child is freed: its outcome is what its last
		// turn_ended record said (docs/semantics.md, "Finished agents").
		o, r = OutcomeNone, ReasonNone
		for _, l := range lifes(h.all, LifeTurnEnded) {
			if l.Agent == a {
				o, r = l.Outcome, l.Reason
			}
		}
	}
	if o != want || r != reason {
		h.t.Fatalf("agent %d outcome = %s/%s, want %s/%s", a, o, r, want, reason)
	}
}

func (h *harness) quiescent() {
	h.t.Helper()
	if !h.k.Quiescent() {
		var b strings.Builder
		for id := 0; id < h.k.NumAgents(); id++ {
			v := h.k.Agent(AgentID(id))
			fmt.Fprintf(&b, " %s=%s(inflight=%d kids=%d)", v.Path(), v.State(), v.InFlight(), v.LiveChildren())
		}
		h.t.Fatalf("not quiescent: ops=%d%s", h.k.numOps(), b.String())
	}
}

// count returns how many effects of kind (for agent, or any when agent < 0)
// match in effs.
func count(effs []Effect, kind EffectKind, agent AgentID) int {
	n := 0
	for _, e := range effs {
		if e.Kind == kind && (agent < 0 || e.Agent == agent) {
			n++
		}
	}
	return n
}

func lifes(effs []Effect, kind LifeKind) []Lifecycle {
	var out []Lifecycle
	for _, e := range effs {
		if e.Kind == EffEmit && e.Life.Kind == kind {
			out = append(out, e.Life)
		}
	}
	return out
}

// since returns the effects recorded after mark (an index into h.all).
func (h *harness) since(mark int) []Effect { return h.all[mark:] }

func (h *harness) mark() int { return len(h.all) }

func markers(ms []Message) int {
	n := 0
	for _, m := range ms {
		if m.Marker {
			n++
		}
	}
	return n
}

func lastMsg(ms []Message) Message {
	if len(ms) == 0 {
		return Message{}
	}
	return ms[len(ms)-1]
}

// toolContent returns the content of the tool message answering callID.
func toolContent(t testing.TB, ms []Message, callID string) string {
	t.Helper()
	for _, m := range ms {
		if m.Role == RoleTool && m.ToolCallID == callID {
			return m.Content
		}
	}
	t.Fatalf("no tool message for %s in\n%s", callID, dumpHistory(ms))
	return ""
}

func decodeResult(t testing.TB, content string) agentResult {
	t.Helper()
	var r struct {
		Type    string `json:"type"`
		Agent   string `json:"agent"`
		Outcome string `json:"outcome"`
		Reason  string `json:"reason"`
		Summary string `json:"summary"`
		Partial string `json:"partial"`
	}
	if err := json.Unmarshal([]byte(content), &r); err != nil {
		t.Fatalf("child result is not JSON: %q: %v", content, err)
	}
	if r.Type != "agent_result" {
		t.Fatalf("child result type %q", r.Type)
	}
	o, err := ParseOutcome(r.Outcome)
	if err != nil {
		t.Fatalf("child result outcome: %v", err)
	}
	var reason Reason
	for i, n := range reasonNames {
		if n == r.Reason {
			reason = Reason(i)
		}
	}
	return agentResult{Type: r.Type, Agent: r.Agent, Outcome: o, Reason: reason, Summary: r.Summary, Partial: r.Partial}
}
