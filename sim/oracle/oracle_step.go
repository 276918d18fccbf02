package oracle

import (
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// stepObs is one step as the model saw it: the event and what it meant before
// the core stepped it, then the effects with what the model made of each,
// and what the step changed in the agents it named. The checkers judge it.
type stepObs struct {
	n      uint32
	final  bool // the read of every agent after the last step (no event)
	ev     kernel.Event
	target kernel.AgentID
	// rootWas is the root's state before the step.
	rootWas fsm.State
	// input: a user input (submit, interject, cancel, shutdown); cancel
	// reads a cancel or shutdown.
	input  bool
	cancel cancelObs
	// rootCut is what an interjection cuts: the text the root's running
	// stream delivered before the step ("" when none runs).
	rootCut string
	// A world event names op, live; answer says it is op's own terminal
	// answer (a stream's end or failure, a tool's result). A stale event
	// says why.
	op       *opObs
	answer   bool
	stale    staleKind
	staleWhy string
	// malformed says why a world event cannot be taken at all (it names a
	// live op of another kind, a fragment has a negative index, its kind
	// is unknown): it must be refused.
	malformed string
	// capCut is the request a chunk took past max_message_bytes.
	capCut *opObs
	// delta is the text a live chunk adds to its stream (what fit, when it
	// passed the cap): what its delta record must say.
	delta string
	// stoppedAt holds the deadline each timer stopped in this step was set
	// for.
	stoppedAt map[kernel.OpID]time.Duration
	// A timer event the model saw set.
	timer    timerObs
	timerSet bool
	// lost are the ops a recovery resolves: everything in flight at the
	// crash.
	lost []*opObs

	effs     []kernel.Effect
	notes    []note
	rejected bool // an error effect: the input was refused
	// chunkOnly: the event was a live chunk within its cap, and its only
	// effects were its delta record and the re-arming of its watchdog.
	chunkOnly bool
	// trans holds each agent's transitions of this step (index = agent
	// id); transUsed lists the agents that have any, so a step resets only
	// those and the slices are reused.
	trans     [][]kernel.Lifecycle
	transUsed []kernel.AgentID
	entered   []kernel.AgentID // agents that entered Interrupted
	started   []*agentObs      // agents whose turn started
	turnEnds  []turnEndObs
	callFins  []callFinObs
	cuts      []cutObs
	cutOps    []*opObs // requests cut (or failed) this step
	msgs      []msgObs
	changes   []stateChange
	anomalies []anomaly
	dirty     []kernel.AgentID
}

// staleKind says why an event is stale.
type staleKind uint8

const (
	notStale staleKind = iota
	staleUnknownOp
	staleEnded    // the op already ended (cancelled, failed, abandoned)
	staleAnswered // the op already gave its answer
	staleDuplicate
	staleCancelled // progress of an op after its cancel
	staleTimer     // a timer that is not set
	staleEmpty     // a call fragment with no id, no name and no arguments: no progress
)

// cancelObs is a cancel (or shutdown) as read before the step.
type cancelObs struct {
	target kernel.AgentID
	// exists: the cancel names an agent the core holds.
	exists   bool
	shutdown bool
	was      fsm.State // the target's state
	// acting: the target's turn runs and the cancel is bound to it.
	acting bool
	// sub are the working agents of the target's subtree (itself included)
	// when it acts.
	sub []kernel.AgentID
}

// note is what the model made of one effect.
type note struct {
	a  *agentObs
	op *opObs
	// count: a cancel's number for its op (1 for the first); a request's
	// number in its turn
	count int
	// bad: the effect names what cannot be: a cancel or end of an op not in
	// flight, a stop of a timer not set, an op started twice, an end of an
	// op never started, a turn started again, a turn interrupted twice.
	bad bool
	// start_tool: its agent's last request, the delivered call it is (nil:
	// none) and how many tools its agent runs with it.
	req       *opObs
	frag      *fragObs
	liveTools int
	// rerun: the lost op a start_tool runs again after a crash
	rerun *opObs
	// delegated: the parent's state before the step.
	was fsm.State
	// start_llm: how many requests the tree streams with it, and the
	// agent whose request waited longest when it started (NoAgent: none
	// waited; docs/semantics.md, "Budgets and caps").
	liveRequests int
	firstWaiting kernel.AgentID
}

// turnEndObs is a turn_ended event with the facts of the turn it ends.
type turnEndObs struct {
	l      *kernel.Lifecycle
	a      *agentObs
	second bool // the turn had ended already
	facts  turnFacts
	owed   []*callObs
}

// callFinObs is a call_finished event with the facts of its agent's turn
// at that moment.
type callFinObs struct {
	l     *kernel.Lifecycle
	a     *agentObs
	f     *callObs
	op    *opObs
	facts turnFacts
	// the delegated child's end, when it had ended already
	child      *agentObs
	childEnded bool
	childEnd   turnEnd
}

// cutObs is streamed text a cut, a failure or an output limit ended in
// this step: the agent must keep it as a partial message.
type cutObs struct {
	agent kernel.AgentID
	text  string
	why   string
}

// msgObs is a message read from an agent's history in this step.
type msgObs struct {
	a *agentObs
	i int
	m kernel.Message
	// a tool message: the result it records (nil when no call_finished
	// named its call); a marker: how many markers its turn holds with it.
	f       *callObs
	markers int
}

type stateChange struct {
	a        *agentObs
	from, to fsm.State
}

// anomaly is something a history showed that no valid transcript holds.
type anomaly struct {
	a      *agentObs
	detail string
}

func (s *stepObs) reset(ev *kernel.Event, target kernel.AgentID) {
	s.n++
	s.final = false
	s.ev, s.target = *ev, target
	s.input, s.cancel, s.rootCut = false, cancelObs{sub: s.cancel.sub[:0]}, ""
	s.op, s.answer, s.stale, s.staleWhy, s.capCut, s.malformed = nil, false, notStale, "", nil, ""
	s.timer, s.timerSet, s.lost, s.delta = timerObs{}, false, s.lost[:0], ""
	clear(s.stoppedAt)
	s.effs, s.notes, s.rejected, s.chunkOnly = nil, s.notes[:0], false, false
	for _, id := range s.transUsed {
		s.trans[id] = s.trans[id][:0]
	}
	s.transUsed = s.transUsed[:0]
	s.entered, s.started = s.entered[:0], s.started[:0]
	s.turnEnds, s.callFins, s.cuts, s.cutOps = s.turnEnds[:0], s.callFins[:0], s.cuts[:0], s.cutOps[:0]
	s.msgs, s.changes, s.anomalies, s.dirty = s.msgs[:0], s.changes[:0], s.anomalies[:0], s.dirty[:0]
}

// transOf is id's transitions in this step.
func (s *stepObs) transOf(id kernel.AgentID) []kernel.Lifecycle {
	if id < 0 || int(id) >= len(s.trans) {
		return nil
	}
	return s.trans[id]
}

// is reports whether the step delivered an event of kind k.
func (s *stepObs) is(k kernel.EventKind) bool { return !s.final && s.ev.Kind == k }

// begin reads the event about to be stepped, before the core steps it.
func (m *model) begin(ev *kernel.Event, target kernel.AgentID) {
	m.now = ev.At
	m.freeFinished()
	s := &m.s
	s.reset(ev, target)
	root := m.agents[kernel.Root]
	s.rootWas = root.state
	switch ev.Kind {
	case kernel.EvSubmit, kernel.EvInterject:
		s.input = true
		if op := m.liveRequest(root); op != nil && root.state == fsm.Streaming {
			s.rootCut = string(op.text)
		}
	case kernel.EvCancel, kernel.EvShutdown:
		s.input = true
		m.beginCancel(ev)
	case kernel.EvLLMDelta, kernel.EvLLMEnd, kernel.EvLLMError, kernel.EvLLMRetry, kernel.EvToolResult:
		m.beginWorld(ev)
	case kernel.EvRecover:
		// Everything in flight is lost; what a stream had delivered is
		// kept as partial text when its request restarts.
		s.lost = append(s.lost, m.live...)
		for _, op := range m.live {
			if !op.tool && !op.terminal && op.cancels == 0 {
				m.cut(op, "the crash")
			}
		}
	case kernel.EvTimer:
		t, ok := m.timers[ev.Op]
		if !ok {
			if op := m.ops.get(ev.Op); op != nil && !op.ended {
				s.malformed = "a timer event names a running op"
				return
			}
			s.stale, s.staleWhy = staleTimer, "timer that is not set"
			return
		}
		delete(m.timers, ev.Op)
		s.timer, s.timerSet = t, true
	default:
		s.malformed = "an unknown kind of event"
	}
}

func (m *model) beginCancel(ev *kernel.Event) {
	s := &m.s
	c := &s.cancel
	c.target, c.shutdown = ev.Agent, ev.Kind == kernel.EvShutdown
	if c.shutdown {
		c.target = kernel.Root
		m.shutdown = true
	}
	c.exists = c.target >= 0 && int(c.target) < m.c.NumAgents()
	a := m.agent(c.target)
	if a == nil {
		return
	}
	c.was = a.state
	c.acting = isActive(a.state) && (ev.Turn == 0 || ev.Turn == a.turn)
	if !c.acting {
		return
	}
	if !c.shutdown {
		// Recorded now: an agent with nothing in flight settles, and ends
		// its turn, within this very step.
		a.t.userCancelled = true
	}
	for _, x := range m.agents {
		if x != nil && isActive(x.state) && m.descends(x.id, c.target) {
			c.sub = append(c.sub, x.id)
			m.touch(x.id)
		}
	}
}

// beginWorld reads a world event: whether it is stale, and what it adds to
// its op.
func (m *model) beginWorld(ev *kernel.Event) {
	op := m.worldOp(ev)
	if op == nil {
		return
	}
	s := &m.s
	switch ev.Kind {
	case kernel.EvLLMDelta:
		if !m.staleChunk(op, ev) {
			m.chunk(op, ev)
		}
	case kernel.EvLLMRetry:
		if op.cancels > 0 {
			s.stale, s.staleWhy = staleCancelled, "retry after cancel"
			return
		}
		s.op = op
	default:
		m.answer(op, ev)
	}
}

// worldOp is the live op a world event answers; nil when the event is
// malformed or stale (the step then says which).
func (m *model) worldOp(ev *kernel.Event) *opObs {
	s := &m.s
	op := m.ops.get(ev.Op)
	switch {
	case op == nil:
		if _, timer := m.timers[ev.Op]; timer {
			s.malformed = "a " + ev.Kind.String() + " names a timer"
			return nil
		}
		s.stale, s.staleWhy = staleUnknownOp, "unknown op"
	case !op.ended && op.tool != (ev.Kind == kernel.EvToolResult):
		s.malformed = "a " + ev.Kind.String() + " names an op of another kind"
	case op.ended:
		s.stale, s.staleWhy = staleEnded, "op already ended"
	case op.terminal && ev.Kind != kernel.EvToolResult:
		s.stale, s.staleWhy = staleAnswered, "event after the stream's end"
	case op.terminal:
		s.stale, s.staleWhy = staleAnswered, "second result"
	default:
		return op
	}
	return nil
}

// staleChunk reports a chunk of a live stream that is malformed or stale
// (the step then says which): a call fragment with a negative index, a
// duplicate, a chunk after the stream's cancel, a fragment that adds
// nothing.
func (m *model) staleChunk(op *opObs, ev *kernel.Event) bool {
	s := &m.s
	switch {
	case ev.Call != nil && ev.Call.Index < 0 && op.cancels == 0:
		s.malformed = "a call fragment with a negative index"
	case ev.Chunk != 0 && ev.Chunk <= op.lastChunk:
		s.stale, s.staleWhy = staleDuplicate, "duplicate chunk"
	case op.cancels > 0:
		s.stale, s.staleWhy = staleCancelled, "chunk after cancel"
	default:
		op.lastChunk = ev.Chunk
		if emptyFragment(ev) {
			s.stale, s.staleWhy = staleEmpty, "call fragment adds nothing"
			return true
		}
		return false
	}
	return true
}

// emptyFragment reports a chunk that is a call fragment adding nothing.
func emptyFragment(ev *kernel.Event) bool {
	return ev.Text == "" && ev.Call != nil && ev.Call.ID == "" && ev.Call.Name == "" && ev.Call.Args == ""
}

// chunk adds a live chunk to its stream, unless it passes the message cap.
func (m *model) chunk(op *opObs, ev *kernel.Event) {
	m.s.op = op
	if m.overCap(op, ev) {
		return
	}
	op.gotChunk, op.lastChunkAt = true, m.now
	op.text = append(op.text, ev.Text...)
	m.s.delta = ev.Text
	if ev.Call != nil {
		f := op.frag(ev.Call.Index)
		if ev.Call.ID != "" {
			f.id = ev.Call.ID
		}
		if ev.Call.Name != "" {
			f.name = ev.Call.Name
		}
		f.args = append(f.args, ev.Call.Args...)
	}
}

// answer reads the answer that ends an op: a stream's end or failure, a
// tool's result.
func (m *model) answer(op *opObs, ev *kernel.Event) {
	m.s.op, m.s.answer = op, true
	op.terminal = true
	switch ev.Kind {
	case kernel.EvLLMEnd:
		op.endedOK = op.cancels == 0
	case kernel.EvLLMError:
		if op.cancels == 0 {
			m.streamFailed(op, ev)
		}
	case kernel.EvToolResult:
		op.result = ev.Status
	}
}

// streamFailed records a stream's failure nobody asked for — even one the
// provider calls "cancelled": a stream failure of its turn.
func (m *model) streamFailed(op *opObs, ev *kernel.Event) {
	a := m.agents[op.agent]
	a.t.llmFailed = true
	a.t.cut = string(op.text)
	a.t.failDetail = ev.Failure.String()
	if ev.Text != "" {
		a.t.failDetail += ": " + textcut.Clip(ev.Text, maxFailDetail)
	}
	m.cut(op, "a stream failure")
}

// overCap accounts a live chunk of op against max_message_bytes the way
// docs/semantics.md ("Budgets and caps") counts it. When the chunk would
// take the message past the cap it records what the kernel must keep (the
// text that fits) and that this step must cut the stream, and reports true:
// the chunk itself is not delivered.
func (m *model) overCap(op *opObs, ev *kernel.Event) bool {
	cost := len(ev.Text)
	if ev.Call != nil {
		cost = len(ev.Call.ID) + len(ev.Call.Name) + len(ev.Call.Args)
		if op.findFrag(ev.Call.Index) == nil {
			cost += callOverhead
		}
	}
	if op.msgBytes+cost <= m.lim.MaxMessageBytes {
		op.msgBytes += cost
		return false
	}
	if ev.Call == nil {
		m.s.delta = textcut.Prefix(ev.Text, m.lim.MaxMessageBytes-op.msgBytes)
		op.text = append(op.text, m.s.delta...)
	}
	op.overCapped = true
	m.s.capCut = op
	return true
}

// cut records that op's stream was cut (or failed) in this step: the text
// it delivered must be kept as a partial message.
func (m *model) cut(op *opObs, why string) {
	if op.cut {
		return
	}
	op.cut = true
	m.s.cutOps = append(m.s.cutOps, op)
	if len(op.text) > 0 {
		m.s.cuts = append(m.s.cuts, cutObs{agent: op.agent, text: string(op.text), why: why})
	}
}
