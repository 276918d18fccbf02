package oracle

import (
	"strconv"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
)

// SpanDeriver is the span derivation the oracle holds to I25: kernel/spans's
// (*spans.Deriver), or — in tests only — a broken one (sim.Options.Spans).
type SpanDeriver interface {
	Step(ev kernel.Event, effs []kernel.Effect) []spans.Change
}

// spanChecker holds I25 (docs/semantics.md, "Spans"): the spans derived
// from the steps start in the step their turn, op or delegation starts,
// under the right parent — a root turn's under none (a trace of its own),
// a child's turn under the delegation that spawned it, a request, a tool
// op and a delegation under their agent's running turn — and each ends
// exactly once, in the step the last of what it stands for and the spans
// under it ends (so no span outlives its parent), whatever ended it — its
// own answer, a cancel, a deadline, a budget, a crash and its recovery, a
// shutdown — saying what did: error.type and the typed reason. It judges
// the derivation's changes against the oracle's own reading of the step,
// never the derivation's state.
type spanChecker struct {
	judge
	changes []spans.Change // this step's, from the derivation
	// byID holds the spans started and not ended at their id (the
	// derivation numbers them densely from 1); block is where the next
	// spanObs are allocated, a few at a time.
	byID  []*spanObs
	block []spanObs
	open  int
	ops   map[kernel.OpID]*spanObs // chat and tool spans whose op runs
	calls map[callKey]*spanObs     // delegations whose call is open
	// agents: each agent's running turn's span, and the delegation each
	// child was spawned by (until its turn starts).
	agents map[kernel.AgentID]agentSpanObs
	// Scratch of one step: which of its changes a start of the step
	// accounts for, its aborts and tool deadlines, the ops it cancelled and
	// the spans whose own end came.
	used     []bool
	aborted  []kernel.Lifecycle
	deadline []kernel.Lifecycle
	cut      []*spanObs
	own      []*spanObs
}

type agentSpanObs struct{ turn, via *spanObs }

// spanObs is one derived span as the checker follows it.
type spanObs struct {
	id     spans.ID
	parent *spanObs
	kind   spans.Kind
	agent  kernel.AgentID
	op     kernel.OpID
	call   string
	child  kernel.AgentID
	// own: what it stands for has ended; open counts the spans under it
	// not ended; ended: its end was derived.
	own   bool
	open  int
	ended bool
	// what its end must say
	errType string
	reason  kernel.Reason
	// cancelled: its op was told to stop, for cancelReason
	cancelled    bool
	cancelReason kernel.Reason
	// a delegation: its call has its result; its child's turn ended with
	// childEnd
	callDone  bool
	childDone bool
}

// spanWant is a span the step must start.
type spanWant struct {
	kind  spans.Kind
	agent kernel.AgentID
	op    kernel.OpID
	call  string
	child kernel.AgentID
}

func newSpanChecker(j judge) *spanChecker {
	return &spanChecker{judge: j, ops: map[kernel.OpID]*spanObs{}, calls: map[callKey]*spanObs{}, agents: map[kernel.AgentID]agentSpanObs{}}
}

// obs is the open span id (nil when none is).
func (c *spanChecker) obs(id spans.ID) *spanObs {
	if id == 0 || uint64(id) >= uint64(len(c.byID)) {
		return nil
	}
	return c.byID[id]
}

func (c *spanChecker) newObs() *spanObs {
	if len(c.block) == 0 {
		c.block = make([]spanObs, 16)
	}
	o := &c.block[0]
	c.block = c.block[1:]
	return o
}

func (c *spanChecker) step(s *stepObs) {
	if s.final {
		return
	}
	c.used = c.used[:0]
	for range c.changes {
		c.used = append(c.used, false)
	}
	for i := range s.effs {
		if l := &s.effs[i].Life; s.effs[i].Kind == kernel.EffEmit {
			c.why(l)
		}
	}
	// In the order of the effects: a turn may end and the next start in
	// one step, and an op may start in a step something else ends.
	for i := range s.effs {
		c.effect(s, &s.effs[i])
	}
	// A cancel says why in its step: a tool's deadline, else its agent's
	// abort (nothing for an interjection's cut).
	for _, o := range c.cut {
		o.cancelReason = c.cancelReason(o)
	}
	for i := range c.changes {
		c.unexplained(i)
	}
	for i := range c.changes {
		if ch := &c.changes[i]; ch.Kind == spans.Ended {
			c.ended(ch.Span)
		}
	}
	c.overdue(s.ev.At)
	c.cut, c.own = c.cut[:0], c.own[:0]
	c.aborted, c.deadline = c.aborted[:0], c.deadline[:0]
}

// why notes the records that say why ops are cancelled: an abort, a
// deadline.
func (c *spanChecker) why(l *kernel.Lifecycle) {
	switch l.Kind {
	case kernel.LifeInterrupted:
		c.aborted = append(c.aborted, *l)
	case kernel.LifeTimedOut:
		c.deadline = append(c.deadline, *l)
	}
}

// effect reads what one effect starts, cancels or ends.
func (c *spanChecker) effect(s *stepObs, e *kernel.Effect) {
	switch {
	case e.Kind == kernel.EffStartLLM:
		c.start(spanWant{kind: spans.KindChat, agent: e.Agent, op: e.Op})
	case e.Kind == kernel.EffStartTool:
		c.start(spanWant{kind: spans.KindTool, agent: e.Agent, op: e.Op, call: e.Call.ID})
	case e.Kind == kernel.EffCancelLLM || e.Kind == kernel.EffCancelTool:
		if o := c.ops[e.Op]; o != nil && !o.cancelled {
			o.cancelled = true
			c.cut = append(c.cut, o)
		}
	case e.Kind != kernel.EffEmit:
	case e.Life.Kind == kernel.LifeTurnStarted:
		c.start(spanWant{kind: spans.KindAgent, agent: e.Life.Agent})
	case e.Life.Kind == kernel.LifeDelegated:
		c.start(spanWant{kind: spans.KindDelegation, agent: e.Life.Agent, call: e.Life.CallID, child: e.Life.Child})
	default:
		c.life(s, &e.Life)
	}
}

// unexplained: change i of the derivation starts a span for nothing the
// step started, or adds an event to a span not open.
func (c *spanChecker) unexplained(i int) {
	switch ch := &c.changes[i]; {
	case ch.Kind == spans.Started && !c.used[i]:
		c.violate(SpansEnd, ch.Span.Agent, "span %d (%s) started for no %s the step started", ch.Span.ID, ch.Span.Name(), ch.Span.Kind)
	case ch.Kind == spans.Evented && c.obs(ch.Span.ID) == nil:
		c.violate(SpansEnd, ch.Span.Agent, "span %d (%s) got event %s while not open", ch.Span.ID, ch.Span.Name(), ch.Event.Kind)
	}
}

// start: the step started what w says; the derivation must have started
// its span.
func (c *spanChecker) start(w spanWant) {
	for i := range c.changes {
		if sp := c.changes[i].Span; c.changes[i].Kind == spans.Started && !c.used[i] && w.is(sp) {
			c.used[i] = true
			c.started(sp)
			return
		}
	}
	c.violate(SpansEnd, w.agent, "no %s span started for %s", w.kind, w.describe())
}

func (c *spanChecker) cancelReason(o *spanObs) kernel.Reason {
	for _, l := range c.deadline {
		if o.kind == spans.KindTool && l.Op == o.op {
			return l.Reason
		}
	}
	for _, l := range c.aborted {
		if l.Agent == o.agent {
			return l.Reason
		}
	}
	return kernel.ReasonNone
}

// life reads one record of what ended: an op, a call, a turn (and with a
// child's turn, the delegation that spawned it, once its call is in too).
func (c *spanChecker) life(s *stepObs, l *kernel.Lifecycle) {
	switch l.Kind {
	case kernel.LifeOpEnded:
		o := c.ops[l.Op]
		if o == nil {
			return
		}
		delete(c.ops, l.Op)
		c.opEnd(s, o, l)
		c.ownEnd(o)
	case kernel.LifeCallFinished:
		k := callKey{l.Agent, l.CallID}
		if o := c.calls[k]; o != nil {
			delete(c.calls, k)
			o.callDone = true
			if o.childDone {
				c.ownEnd(o)
			}
		}
	case kernel.LifeTurnEnded:
		a := c.agents[l.Agent]
		o := a.turn
		if o == nil {
			return
		}
		if a.turn = nil; a.via == nil {
			delete(c.agents, l.Agent)
		} else {
			c.agents[l.Agent] = a
		}
		o.reason = l.Reason
		if l.Outcome != kernel.OutcomeCompleted {
			o.errType = l.Outcome.String()
		}
		c.ownEnd(o)
		if d := o.parent; d != nil && d.kind == spans.KindDelegation {
			d.childDone, d.reason, d.errType = true, o.reason, o.errType
			if d.callDone {
				c.ownEnd(d)
			}
		}
	}
}

// opEnd is what a chat or tool span's end must say: the op's end, and the
// typed reason of what ended it — its own failure, the cancel's reason, a
// crash.
func (c *spanChecker) opEnd(s *stepObs, o *spanObs, l *kernel.Lifecycle) {
	own := s.ev.Op == l.Op
	switch l.End {
	case kernel.OpCompleted:
	case kernel.OpFailed:
		switch {
		case o.kind == spans.KindTool:
			o.errType, o.reason = "tool_error", kernel.ReasonToolError
		case own && s.ev.Kind == kernel.EvLLMError && s.ev.Failure != kernel.FailureNone:
			o.errType, o.reason = s.ev.Failure.String(), kernel.ReasonLLMError
		default:
			o.errType, o.reason = "_OTHER", kernel.ReasonLLMError
		}
	case kernel.OpLost:
		o.errType, o.reason = l.End.String(), kernel.ReasonCrash
	default: // cancelled, abandoned: by the cancel it was sent
		o.errType, o.reason = l.End.String(), o.cancelReason
	}
}

func (c *spanChecker) ownEnd(o *spanObs) {
	if !o.own {
		o.own = true
		c.own = append(c.own, o)
	}
}

// started judges a span the derivation started for what the step started
// (start found it): its parent must be the one that thing nests under,
// open.
func (c *spanChecker) started(sp *spans.Span) {
	if uint64(sp.ID) < uint64(len(c.byID)) {
		c.violate(SpansEnd, sp.Agent, "span %d (%s) started again (or out of order: the last was %d)", sp.ID, sp.Name(), len(c.byID)-1)
		return
	}
	o := c.newObs()
	*o = spanObs{id: sp.ID, kind: sp.Kind, agent: sp.Agent, op: sp.Op, call: sp.CallID, child: sp.Child}
	for uint64(len(c.byID)) < uint64(sp.ID) {
		c.byID = append(c.byID, nil)
	}
	c.byID = append(c.byID, o)
	c.open++
	var want *spanObs
	switch a := c.agents[sp.Agent]; sp.Kind {
	case spans.KindAgent:
		want = a.via
		a.via, a.turn = nil, o
		c.agents[sp.Agent] = a
	case spans.KindChat, spans.KindTool:
		want = a.turn
		c.ops[sp.Op] = o
	case spans.KindDelegation:
		want = a.turn
		c.calls[callKey{sp.Agent, sp.CallID}] = o
		c.agents[sp.Child] = agentSpanObs{via: o}
	}
	o.parent = want
	if want != nil {
		want.open++
	}
	got := c.obs(sp.Parent)
	switch {
	case sp.Parent == 0 && want == nil:
	case want == nil:
		c.violate(SpansEnd, sp.Agent, "span %d (%s) has parent %d; a root turn's span has none", sp.ID, sp.Name(), sp.Parent)
	case got != want:
		c.violate(SpansEnd, sp.Agent, "span %d (%s) has parent %d; it nests under span %d (%s of %s)", sp.ID, sp.Name(), sp.Parent, want.id, want.kind, c.path(want.agent))
	case want.ended:
		c.violate(SpansEnd, sp.Agent, "span %d (%s) started under span %d, which had ended", sp.ID, sp.Name(), want.id)
	}
}

// is reports whether sp is the span w asks for.
func (w *spanWant) is(sp *spans.Span) bool {
	if w.kind != sp.Kind || w.agent != sp.Agent {
		return false
	}
	switch w.kind {
	case spans.KindChat:
		return w.op == sp.Op
	case spans.KindTool:
		return w.op == sp.Op && w.call == sp.CallID
	case spans.KindDelegation:
		return w.call == sp.CallID && w.child == sp.Child
	}
	return true
}

// ended judges an end: the span must be open, what it stands for must have
// ended, every span under it too, and the end must say what ended it.
func (c *spanChecker) ended(sp *spans.Span) {
	o := c.obs(sp.ID)
	switch {
	case o == nil && uint64(sp.ID) < uint64(len(c.byID)):
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended twice", sp.ID, sp.Name())
		return
	case o == nil:
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended but never started", sp.ID, sp.Name())
		return
	case !o.own:
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended before the %s it stands for", sp.ID, sp.Name(), sp.Kind)
	case o.open > 0:
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended while %d span(s) under it had not", sp.ID, sp.Name(), o.open)
	}
	c.close(o)
	if !sp.Ended || sp.End != c.m.now {
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended in the step at %v but says ended=%v at %v", sp.ID, sp.Name(), c.m.now, sp.Ended, sp.End)
	}
	if et := sp.ErrorType(); et != o.errType {
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended with error.type %q; what ended it says %q", sp.ID, sp.Name(), et, o.errType)
	}
	if sp.Reason != o.reason {
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended with reason %q; what ended it says %q", sp.ID, sp.Name(), sp.Reason, o.reason)
	}
}

// overdue: every span whose own end came, with nothing under it open, must
// have ended in this step — its own end's step, or the step the last span
// under it ended.
func (c *spanChecker) overdue(now time.Duration) {
	for _, o := range c.own {
		for x := o; x != nil && x.own && x.open == 0; x = x.parent {
			if !x.ended {
				c.violate(SpansEnd, x.agent, "span %d (%s of %s) did not end at %v, when what it stands for and every span under it had", x.id, x.kind, c.path(x.agent), now)
				c.close(x) // reported once
			}
		}
	}
}

// finish: a run that ended (not stopped with work pending) leaves no span
// open.
func (c *spanChecker) finish() {
	if c.m.stopped || c.open == 0 {
		return
	}
	for _, o := range c.byID {
		if o != nil {
			c.violate(SpansEnd, o.agent, "span %d (%s of %s) never ended", o.id, o.kind, c.path(o.agent))
		}
	}
}

// close notes that o ended: it is no longer open, nor open under its
// parent.
func (c *spanChecker) close(o *spanObs) {
	o.ended = true
	c.byID[o.id] = nil
	c.open--
	if p := o.parent; p != nil {
		p.open--
	}
}

func (w *spanWant) describe() string {
	switch w.kind {
	case spans.KindChat, spans.KindTool:
		return "op " + strconv.FormatUint(uint64(w.op), 10)
	case spans.KindDelegation:
		return "the delegation of call " + w.call
	}
	return "the turn"
}

// path names an agent in a violation.
func (c *spanChecker) path(id kernel.AgentID) string {
	if a := c.m.agent(id); a != nil {
		return a.path
	}
	return "agent " + strconv.Itoa(int(id))
}
