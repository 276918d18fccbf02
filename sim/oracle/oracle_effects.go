package oracle

import (
	"fmt"
	"time"

	"slices"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// apply reads the step's effects, then the views of the agents they named.
func (m *model) apply(effs []kernel.Effect) {
	s := &m.s
	s.effs = effs
	s.notes = slices.Grow(s.notes[:0], len(effs))[:len(effs)]
	clear(s.notes)
	if s.stale != notStale && s.target != kernel.NoAgent {
		m.touch(s.target) // a stale event must not have changed it
	}
	for i := range effs {
		m.effect(&effs[i], &s.notes[i])
	}
	s.chunkOnly = s.op != nil && s.ev.Kind == kernel.EvLLMDelta && s.capCut == nil && len(s.dirty) == 0 && chunkEffects(s)
	// Only agents named by this step (its target, its effects) are read:
	// every change the kernel makes to an agent comes with an effect naming
	// it. A core that changed an agent silently is still caught, at the
	// latest by the read of every agent at the end.
	for i := 0; i < len(s.dirty); i++ {
		m.refresh(s.dirty[i])
		m.noteFinished(m.agents[s.dirty[i]])
	}
	m.profiled()
	quiet := m.busy == 0 && len(m.live) == 0 && len(m.timers) == 0
	if quiet && !m.quiet {
		m.quietAt = m.now
	}
	m.quiet = quiet
}

// effect reads one effect of the step, noting in n what the checkers need.
func (m *model) effect(e *kernel.Effect, n *note) {
	// Agents named by structural effects are read below. Progress (a
	// chunk, a retry, a timer) cannot change an agent's state or
	// history, so it does not force a read.
	if e.Agent >= 0 && !progressOnly(e) {
		m.touch(e.Agent)
	}
	switch e.Kind {
	case kernel.EffError:
		m.s.rejected = true
	case kernel.EffStartLLM:
		m.startLLM(e, n)
	case kernel.EffStartTool:
		m.startTool(e, n)
	case kernel.EffCancelLLM, kernel.EffCancelTool:
		m.cancelOp(e, n)
	case kernel.EffSetTimer:
		m.timers[e.Op] = timerObs{kind: e.Timer, agent: e.Agent, at: e.At}
	case kernel.EffStopTimer:
		m.stopTimer(e, n)
	case kernel.EffEmit:
		m.life(&e.Life, n)
	}
}

// startLLM reads a request started.
func (m *model) startLLM(e *kernel.Effect, n *note) {
	a := m.observe(e.Agent)
	a.t.requests++
	a.llmRequests++
	if m.restarts(e.Agent) {
		a.restarts++
		a.t.restarts++
	}
	a.t.lastReq = e.Op
	a.liveOps++
	a.started = a.started[:0]
	n.a, n.count = a, a.t.requests
	n.firstWaiting = kernel.NoAgent
	if len(m.waiting) > 0 {
		n.firstWaiting = m.waiting[0]
	}
	m.unwait(a)
	n.op, n.bad = m.startOp(e, false)
	n.liveRequests = m.liveRequests()
}

// stopTimer reads a timer stopped (n.bad: one not set).
func (m *model) stopTimer(e *kernel.Effect, n *note) {
	t, ok := m.timers[e.Op]
	if !ok {
		n.bad = true
	} else {
		if m.s.stoppedAt == nil {
			m.s.stoppedAt = make(map[kernel.OpID]time.Duration)
		}
		m.s.stoppedAt[e.Op] = t.at
	}
	delete(m.timers, e.Op)
}

// chunkEffects reports whether a chunk's effects were only its delta
// record and its watchdog re-armed (a timer stopped that was set).
func chunkEffects(s *stepObs) bool {
	deltas := 0
	for i := range s.effs {
		switch e := &s.effs[i]; {
		case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeDelta && e.Life.Op == s.ev.Op && e.Life.Text == s.delta:
			deltas++
		case (e.Kind == kernel.EffSetTimer || e.Kind == kernel.EffStopTimer) && e.Timer == kernel.TimerWatchdog && !s.notes[i].bad:
		default:
			return false
		}
	}
	return deltas == 1 || (deltas == 0 && s.delta == "")
}

// readAll reads every agent the core holds after the last step (one whose
// every effect a broken loop hid is judged here too).
func (m *model) readAll() {
	s := &m.s
	s.reset(&kernel.Event{At: m.now}, kernel.NoAgent)
	s.final = true
	for id := 0; id < m.c.NumAgents(); id++ {
		m.touch(kernel.AgentID(id))
	}
	for i := 0; i < len(s.dirty); i++ {
		m.refresh(s.dirty[i])
	}
}

// progressOnly reports effects that never accompany a change of an agent's
// state or history.
func progressOnly(e *kernel.Effect) bool {
	switch e.Kind {
	case kernel.EffSetTimer, kernel.EffStopTimer:
		return true
	case kernel.EffEmit:
		switch e.Life.Kind {
		case kernel.LifeDelta, kernel.LifeRetry, kernel.LifeStale, kernel.LifeLate, kernel.LifeOpEnded:
			return true
		}
	}
	return false
}

// startOp records an op an effect starts; bad when its id was used before
// (the first op's accounting would be lost).
func (m *model) startOp(e *kernel.Effect, tool bool) (*opObs, bool) {
	dup := m.ops.get(e.Op) != nil
	op := &opObs{id: e.Op, agent: e.Agent, tool: tool, start: m.now}
	m.ops.set(e.Op, op)
	m.live = append(m.live, op)
	return op, dup
}

func (m *model) startTool(e *kernel.Effect, n *note) {
	a := m.observe(e.Agent)
	a.liveOps++
	a.liveTools++
	n.a, n.liveTools = a, a.liveTools
	n.op, n.bad = m.startOp(e, true)
	n.op.call = e.Call.ID
	a.started = append(a.started, e.Call.ID)
	if m.s.is(kernel.EvRecover) {
		for _, lost := range m.s.lost {
			if lost.tool && lost.agent == e.Agent && lost.call == e.Call.ID {
				n.rerun = lost // run again after the crash
				return
			}
		}
	}
	req := m.ops.get(a.t.lastReq)
	n.req = req
	if req == nil || req.agent != e.Agent || !req.endedOK {
		return
	}
	for i := range req.frags {
		if f := &req.frags[i]; !f.started && f.name == e.Call.Name && string(f.args) == e.Call.Arguments {
			f.started = true
			n.frag = f
			return
		}
	}
}

// restarts reports whether a request agent starts now is the restart of
// its request a crash lost: in the recovery's step, an agent whose stream
// was lost (neither answered nor cancelled) starts at most one request,
// and it is that one asked again (docs/semantics.md, "Recovery").
func (m *model) restarts(agent kernel.AgentID) bool {
	if !m.s.is(kernel.EvRecover) {
		return false
	}
	for _, lost := range m.s.lost {
		if !lost.tool && lost.agent == agent && !lost.terminal && lost.cancels == 0 {
			return true
		}
	}
	return false
}

func (m *model) cancelOp(e *kernel.Effect, n *note) {
	op := m.ops.get(e.Op)
	n.op = op
	if op == nil || op.ended {
		n.bad = true
		return
	}
	op.cancels++
	n.count = op.cancels
	if op.cancels == 1 {
		op.cancelAt, op.cancelStep = m.now, m.s.n
		if !op.tool && !op.terminal {
			m.cut(op, "its cancel")
		}
	}
}

// life reads one lifecycle event.
func (m *model) life(l *kernel.Lifecycle, n *note) {
	m.emit(l)
	if l.Agent < 0 {
		return
	}
	a := m.observe(l.Agent)
	n.a = a
	switch l.Kind {
	case kernel.LifeTransition:
		m.transition(l, a)
	case kernel.LifeOpEnded:
		m.opEnded(l, n)
	case kernel.LifeTimedOut:
		m.timedOut(l, n, a)
	case kernel.LifeRequestWaiting:
		n.bad = a.waitingReq
		if !a.waitingReq {
			a.waitingReq = true
			m.waiting = append(m.waiting, a.id)
		}
	case kernel.LifeInterrupted:
		m.interrupted(l, n, a)
	case kernel.LifeTurnStarted:
		m.turnStarted(l, n, a)
	case kernel.LifeTurnEnded:
		m.turnEnded(l, a)
	case kernel.LifeCallFinished:
		m.callFinished(l, a)
	case kernel.LifeDelegated:
		m.delegated(l, n, a)
	}
}

// emit keeps the hash of an emitted lifecycle event (emittedRing).
func (m *model) emit(l *kernel.Lifecycle) {
	h := lifeHash(*l)
	if len(m.emitted) < emittedRing {
		m.emitted = append(m.emitted, h)
	} else {
		m.emitted[m.nEmitted%emittedRing] = h
	}
	m.nEmitted++
}

// transition records one of the step's transitions of a.
func (m *model) transition(l *kernel.Lifecycle, a *agentObs) {
	s := &m.s
	for int(l.Agent) >= len(s.trans) {
		s.trans = append(s.trans, nil)
	}
	if len(s.trans[l.Agent]) == 0 {
		s.transUsed = append(s.transUsed, l.Agent)
	}
	s.trans[l.Agent] = append(s.trans[l.Agent], *l)
	if l.To == fsm.Interrupted {
		m.entered(a)
	}
}

// opEnded ends an op (n.bad: one never started, or ended before).
func (m *model) opEnded(l *kernel.Lifecycle, n *note) {
	op := m.ops.get(l.Op)
	n.op = op
	if op == nil || op.ended {
		n.bad = true
		return
	}
	op.ended, op.end = true, l.End
	owner := m.agents[op.agent]
	owner.liveOps--
	if op.tool {
		owner.liveTools--
	}
	m.noteFinished(owner) // a finished child whose last op ended
	if i := slices.Index(m.live, op); i >= 0 {
		m.live = slices.Delete(m.live, i, i+1)
	}
}

// timedOut records a timeout: a tool's, or a's turn's.
func (m *model) timedOut(l *kernel.Lifecycle, n *note, a *agentObs) {
	op := m.ops.get(l.Op)
	n.op = op
	if l.Reason == kernel.ReasonToolTimeout {
		if op != nil {
			op.timedOut = true
		}
	} else if l.Reason.IsTimeout() {
		a.t.timedOut = l.Reason
	}
}

// interrupted records the abort of a's turn (n.bad: a second one).
func (m *model) interrupted(l *kernel.Lifecycle, n *note, a *agentObs) {
	m.unwait(a) // an aborted turn's waiting request is never sent
	n.bad = a.t.interrupted && a.t.turn == l.Turn
	a.t.interrupted, a.t.abortReason = true, l.Reason
	// The abort cuts the request that ran when the step began (its
	// cancel may come before or after this record).
	if op := m.ops.get(a.t.lastReq); op != nil && !op.tool && !op.terminal && !op.ended && (op.cancels == 0 || op.cancelStep == m.s.n) {
		a.t.cut = string(op.text)
		m.cut(op, "its abort")
	}
}

// turnStarted starts a's turn (n.bad: not after the last one).
func (m *model) turnStarted(l *kernel.Lifecycle, n *note, a *agentObs) {
	n.bad = l.Turn <= a.startedTurn
	a.startedTurn = l.Turn
	a.t = turnFacts{turn: l.Turn, start: m.now}
	// A child's deadline is the earlier of its own and its parent's.
	a.deadline = m.now + m.lim.TurnTimeout
	if p := m.agent(a.parent); p != nil && p.deadline > 0 && p.deadline < a.deadline {
		a.deadline = p.deadline
	}
	m.s.started = append(m.s.started, a)
}

// turnEnded ends a's turn (a second end of one turn is recorded for the
// checkers, and changes nothing).
func (m *model) turnEnded(l *kernel.Lifecycle, a *agentObs) {
	if l.Outcome == kernel.OutcomeBudgetExhausted && a.t.restarts > 0 {
		m.crashSpent(a, l.Turn)
	}
	e := turnEndObs{l: l, a: a, second: a.endedTurn == l.Turn && l.Turn != 0, facts: a.t, owed: a.owed}
	a.owed = nil
	if !e.second {
		a.endedDeadline, a.endedStep, a.deadline = a.deadline, m.s.n, 0
		a.endedTurn = l.Turn
		a.end = turnEnd{turn: l.Turn, outcome: l.Outcome, reason: l.Reason, text: l.Text, detail: l.Detail}
	}
	m.s.turnEnds = append(m.s.turnEnds, e)
}

// callFinished records a call's result; a delegation's first result is
// held to its child's end, now or when the child's turn ends.
func (m *model) callFinished(l *kernel.Lifecycle, a *agentObs) {
	k := callKey{l.Agent, l.CallID}
	f := m.calls[k]
	if f == nil {
		f = &callObs{l: *l}
		m.calls[k] = f
	}
	f.n++
	c := callFinObs{l: l, a: a, f: f, op: m.ops.get(l.Op), facts: a.t}
	if l.Status == kernel.CallChild && f.n == 1 {
		if child := m.agent(l.Child); child != nil {
			c.child = child
			if child.startedTurn != 0 && child.endedTurn == child.startedTurn {
				c.childEnded, c.childEnd = true, child.end
			} else {
				f.early = true
				child.owed = append(child.owed, f) // judged when the child's turn ends
			}
		}
	}
	m.s.callFins = append(m.s.callFins, c)
}

// delegated records a child a spawned.
func (m *model) delegated(l *kernel.Lifecycle, n *note, a *agentObs) {
	if a.delegated == nil {
		a.delegated = make(map[string]kernel.AgentID)
	}
	a.delegated[l.CallID] = l.Child
	a.t.spawned++
	n.was = a.state
	m.touch(l.Child)
	c := m.observe(l.Child)
	c.kid, c.via = a.t.spawned, callKey{a.id, l.CallID}
	m.spawning = append(m.spawning, l.Child) // its profile: m.profiled
	a.kids = append(a.kids, l.Child)
	n.count = a.t.spawned
}

// entered records that a entered Interrupted: every descendant whose turn
// still runs has had an ancestor aborted.
func (m *model) entered(a *agentObs) {
	s := &m.s
	s.entered = append(s.entered, a.id)
	if p := m.agent(a.parent); p != nil && slices.Contains(s.entered, p.id) {
		return // aborted with its parent, which marked the subtree
	}
	for _, x := range m.agents {
		if x != nil && x != a && x.startedTurn > x.endedTurn && m.descends(x.id, a.id) {
			x.t.parentAborted = true
		}
	}
}

// crashSpent notes a turn that ran out of max_requests with a request a
// recovery asked again among those it counted: the restart spent the
// budget sooner, a change of the story (docs/semantics.md,
// "Expectations under a crash").
func (m *model) crashSpent(a *agentObs, turn uint64) {
	m.spent = append(m.spent, SpentTurn{m.now, fmt.Sprintf("%s: turn %d ran out of max_requests with %d request(s) asked again after a crash among them", a.path, turn, a.t.restarts)})
}

// SpentTurn is a turn that ran out of max_requests with a request a
// recovery asked again among those it counted (a change of the story a
// crash made), and when it ended.
type SpentTurn struct {
	At   time.Duration
	Note string
}
