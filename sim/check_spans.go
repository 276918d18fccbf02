package sim

import (
	"strconv"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
)

// SpanDeriver is the span derivation the oracle holds to I25: kernel/spans,
// or — in tests only — a broken one (Options.Spans).
type SpanDeriver interface {
	Step(ev kernel.Event, effs []kernel.Effect) []spans.Change
}

// newSpans is the derivation Options.Spans leaves to the default.
func newSpans(cfg spans.Config) SpanDeriver { return spans.New(cfg) }

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
	spans   map[spans.ID]*spanObs
	turn    map[kernel.AgentID]*spanObs // the span of each agent's running turn
	ops     map[kernel.OpID]*spanObs    // chat and tool spans whose op runs
	calls   map[callKey]*spanObs        // delegations whose call is open
	via     map[kernel.AgentID]*spanObs // the delegation each child was spawned by
	// Scratch of one step: what is due to start, the abort reasons and
	// tool deadlines of the step, and the spans whose own end came.
	want     []spanWant
	aborted  map[kernel.AgentID]kernel.Reason
	deadline map[kernel.OpID]kernel.Reason
	cut      []*spanObs
	own      []*spanObs
}

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
	failure      kernel.Failure
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
	met   bool
}

func newSpanChecker(j judge) *spanChecker {
	return &spanChecker{judge: j,
		spans: map[spans.ID]*spanObs{}, turn: map[kernel.AgentID]*spanObs{}, ops: map[kernel.OpID]*spanObs{},
		calls: map[callKey]*spanObs{}, via: map[kernel.AgentID]*spanObs{},
		aborted: map[kernel.AgentID]kernel.Reason{}, deadline: map[kernel.OpID]kernel.Reason{}}
}

func (c *spanChecker) step(s *stepObs) {
	if s.final {
		return
	}
	c.read(s)
	for i := range c.changes {
		ch := &c.changes[i]
		switch ch.Kind {
		case spans.Started:
			c.started(ch.Span)
		case spans.Evented:
			if o := c.spans[ch.Span.ID]; o == nil || o.ended {
				c.violate(SpansEnd, ch.Span.Agent, "span %d (%s) got event %s while not open", ch.Span.ID, ch.Span.Name(), ch.Event.Kind)
			}
		case spans.Ended:
			c.ended(ch.Span)
		}
	}
	for i := range c.want {
		if w := &c.want[i]; !w.met {
			c.violate(SpansEnd, w.agent, "no %s span started for %s", w.kind, w.describe())
		}
	}
	c.overdue(s.ev.At)
	c.want, c.cut, c.own = c.want[:0], c.cut[:0], c.own[:0]
	clear(c.aborted)
	clear(c.deadline)
}

// read reads what the step started and ended, in the order of its effects.
func (c *spanChecker) read(s *stepObs) {
	for i := range s.effs {
		e := &s.effs[i]
		switch e.Kind {
		case kernel.EffStartLLM:
			c.want = append(c.want, spanWant{kind: spans.KindChat, agent: e.Agent, op: e.Op})
		case kernel.EffStartTool:
			c.want = append(c.want, spanWant{kind: spans.KindTool, agent: e.Agent, op: e.Op, call: e.Call.ID})
		case kernel.EffCancelLLM, kernel.EffCancelTool:
			if o := c.ops[e.Op]; o != nil && !o.cancelled {
				o.cancelled = true
				c.cut = append(c.cut, o)
			}
		case kernel.EffEmit:
			c.life(s, &e.Life)
		}
	}
	// A cancel says why in its step: a tool's deadline, else its agent's
	// abort (nothing for an interjection's cut).
	for _, o := range c.cut {
		if r, ok := c.deadline[o.op]; ok {
			o.cancelReason = r
		} else {
			o.cancelReason = c.aborted[o.agent]
		}
	}
}

func (c *spanChecker) life(s *stepObs, l *kernel.Lifecycle) {
	switch l.Kind {
	case kernel.LifeTurnStarted:
		c.want = append(c.want, spanWant{kind: spans.KindAgent, agent: l.Agent})
	case kernel.LifeDelegated:
		c.want = append(c.want, spanWant{kind: spans.KindDelegation, agent: l.Agent, call: l.CallID, child: l.Child})
	case kernel.LifeInterrupted:
		c.aborted[l.Agent] = l.Reason
	case kernel.LifeTimedOut:
		if o := c.ops[l.Op]; o != nil && o.kind == spans.KindTool {
			c.deadline[l.Op] = l.Reason
		}
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
		o := c.turn[l.Agent]
		if o == nil {
			return
		}
		delete(c.turn, l.Agent)
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

// started judges a span the derivation started: the step must have started
// what it stands for, and its parent must be the one that thing nests
// under, open.
func (c *spanChecker) started(sp *spans.Span) {
	if c.spans[sp.ID] != nil {
		c.violate(SpansEnd, sp.Agent, "span %d (%s) started twice", sp.ID, sp.Name())
		return
	}
	w := c.match(sp)
	if w == nil {
		c.violate(SpansEnd, sp.Agent, "span %d (%s) started for no %s the step started", sp.ID, sp.Name(), sp.Kind)
		return
	}
	o := &spanObs{id: sp.ID, kind: sp.Kind, agent: sp.Agent, op: sp.Op, call: sp.CallID, child: sp.Child}
	c.spans[sp.ID] = o
	var want *spanObs
	switch sp.Kind {
	case spans.KindAgent:
		want = c.via[sp.Agent]
		delete(c.via, sp.Agent)
		c.turn[sp.Agent] = o
	case spans.KindChat, spans.KindTool:
		want = c.turn[sp.Agent]
		c.ops[sp.Op] = o
	case spans.KindDelegation:
		want = c.turn[sp.Agent]
		c.calls[callKey{sp.Agent, sp.CallID}] = o
		c.via[sp.Child] = o
	}
	o.parent = want
	if want != nil {
		want.open++
	}
	got := c.spans[sp.Parent]
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

// match finds the span the step must start that sp is, and marks it met.
func (c *spanChecker) match(sp *spans.Span) *spanWant {
	for i := range c.want {
		w := &c.want[i]
		if w.met || w.kind != sp.Kind || w.agent != sp.Agent {
			continue
		}
		switch {
		case w.kind == spans.KindChat && w.op != sp.Op,
			w.kind == spans.KindTool && (w.op != sp.Op || w.call != sp.CallID),
			w.kind == spans.KindDelegation && (w.call != sp.CallID || w.child != sp.Child):
			continue
		}
		w.met = true
		return w
	}
	return nil
}

// ended judges an end: the span must be open, what it stands for must have
// ended, every span under it too, and the end must say what ended it.
func (c *spanChecker) ended(sp *spans.Span) {
	o := c.spans[sp.ID]
	switch {
	case o == nil:
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended but never started", sp.ID, sp.Name())
		return
	case o.ended:
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended twice", sp.ID, sp.Name())
		return
	case !o.own:
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended before the %s it stands for", sp.ID, sp.Name(), sp.Kind)
	case o.open > 0:
		c.violate(SpansEnd, sp.Agent, "span %d (%s) ended while %d span(s) under it had not", sp.ID, sp.Name(), o.open)
	}
	o.ended = true
	if p := o.parent; p != nil {
		p.open--
	}
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
				x.ended = true // reported once
				if p := x.parent; p != nil {
					p.open--
				}
			}
		}
	}
}

// finish: a run that ended (not stopped with work pending) leaves no span
// open.
func (c *spanChecker) finish() {
	if c.m.stopped {
		return
	}
	for _, id := range sortedKeys(c.spans) {
		if o := c.spans[id]; !o.ended {
			c.violate(SpansEnd, o.agent, "span %d (%s of %s) never ended", o.id, o.kind, c.path(o.agent))
		}
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
