package oracle

import (
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// Probe names an interesting situation a run can reach (FoundationDB's code
// probes): a sweep reports how often each was reached and fails when one
// never was, so the generators cannot silently stop covering it.
type Probe string

// Probes.
const (
	ProbeCancelDeepTooling       Probe = "cancel_depth4_tooling"
	ProbeCancelDuringInterrupted Probe = "cancel_during_interrupted"
	ProbeCancelSingleChild       Probe = "cancel_single_child"
	ProbeCancelThirdChild        Probe = "cancel_third_child"
	ProbeInterjectStreaming      Probe = "interject_streaming"
	ProbeInterjectTooling        Probe = "interject_tooling"
	ProbeInterjectDelegating     Probe = "interject_delegating"
	ProbeTimeoutRacesResult      Probe = "timeout_races_result"
	ProbeLateAfterAbandon        Probe = "late_result_after_abandon"
	ProbeLateResultAfterCancel   Probe = "late_result_after_cancel"
	ProbeAbandoned               Probe = "op_abandoned"
	ProbeToolTimeout             Probe = "tool_timeout"
	ProbeTimeout                 Probe = "agent_timeout"
	ProbeBudget                  Probe = "budget_exhausted"
	ProbeDepth4Delegation        Probe = "delegation_depth4"
	ProbeOutputLimit             Probe = "cap_output_limit"
	ProbeMaxCalls                Probe = "cap_max_calls"
	ProbeToolWaited              Probe = "cap_tool_waited"
)

// Probes lists every probe in report order.
func Probes() []Probe {
	return []Probe{
		ProbeCancelDeepTooling, ProbeCancelDuringInterrupted, ProbeCancelSingleChild, ProbeCancelThirdChild,
		ProbeInterjectStreaming, ProbeInterjectTooling, ProbeInterjectDelegating,
		ProbeTimeoutRacesResult, ProbeLateAfterAbandon, ProbeLateResultAfterCancel,
		ProbeAbandoned, ProbeToolTimeout, ProbeTimeout, ProbeBudget, ProbeDepth4Delegation,
		ProbeOutputLimit, ProbeMaxCalls, ProbeToolWaited,
	}
}

// MinDepth is the shallowest delegation chain a world needs before p can
// be reached (the root alone is 0): a child's situations need a child,
// the depth-4 probes an agent four delegations down. A sweep requires a
// probe only when its worlds may be that deep (sweep.Summary.Unreached).
func (p Probe) MinDepth() int {
	switch p {
	case ProbeCancelDeepTooling, ProbeDepth4Delegation:
		return 4
	case ProbeCancelSingleChild, ProbeCancelThirdChild, ProbeInterjectDelegating:
		return 1
	}
	return 0
}

// probeSet is the probes' observer: it reads the model before and after
// each step, apart from the checkers, and judges nothing.
type probeSet struct {
	counts map[Probe]int
	// same-instant race detection: the last instant a result and a timeout
	// were seen, per agent.
	resultAt  map[kernel.AgentID]int64
	timeoutAt map[kernel.AgentID]int64
}

func newProbeSet() *probeSet {
	return &probeSet{counts: map[Probe]int{}, resultAt: map[kernel.AgentID]int64{}, timeoutAt: map[kernel.AgentID]int64{}}
}

func (p *probeSet) hit(name Probe) { p.counts[name]++ }

// before sees the states the step's input meets.
func (p *probeSet) before(m *model) {
	s := &m.s
	switch {
	case s.is(kernel.EvInterject):
		switch s.rootWas {
		case fsm.Streaming:
			p.hit(ProbeInterjectStreaming)
		case fsm.Tooling:
			p.hit(ProbeInterjectTooling)
		case fsm.Delegating:
			p.hit(ProbeInterjectDelegating)
		}
	case s.is(kernel.EvCancel) || s.is(kernel.EvShutdown):
		c := &s.cancel
		switch {
		case c.acting:
			if c.target != kernel.Root {
				p.hit(ProbeCancelSingleChild)
			}
			for _, id := range c.sub {
				if x := m.agents[id]; x.state == fsm.Tooling && x.depth >= 4 {
					p.hit(ProbeCancelDeepTooling)
					break
				}
			}
		case c.was == fsm.Interrupted && m.agent(c.target) != nil:
			p.hit(ProbeCancelDuringInterrupted)
		}
	}
}

// observe sees what the step did.
func (p *probeSet) observe(m *model) {
	s := &m.s
	switch {
	case s.stale == staleEnded && (s.is(kernel.EvToolResult) || s.is(kernel.EvLLMEnd)):
		p.hit(ProbeLateAfterAbandon)
	case s.answer:
		if s.is(kernel.EvToolResult) && s.op.cancels > 0 && s.ev.Status != kernel.ToolCancelled {
			p.hit(ProbeLateResultAfterCancel)
		}
		p.race(m, s.op.agent, false)
	}
	if s.capCut != nil {
		p.hit(ProbeOutputLimit)
	}
	for _, id := range s.entered {
		if m.agents[id].kid >= 3 {
			p.hit(ProbeCancelThirdChild)
		}
	}
	for i := range s.effs {
		p.effect(m, &s.effs[i], &s.notes[i])
	}
}

// effect sees one effect of the step.
func (p *probeSet) effect(m *model, e *kernel.Effect, n *note) {
	s := &m.s
	switch {
	case e.Kind == kernel.EffStartTool:
		if req := n.req; req != nil && !(s.answer && s.op == req) {
			p.hit(ProbeToolWaited) // started later than its stream's end
		}
	case e.Kind == kernel.EffEmit:
		p.life(m, &e.Life)
	}
}

// life sees one lifecycle record of the step.
func (p *probeSet) life(m *model, l *kernel.Lifecycle) {
	switch {
	case l.Kind == kernel.LifeOpEnded && l.End == kernel.OpAbandoned:
		p.hit(ProbeAbandoned)
	case l.Kind == kernel.LifeTimedOut:
		if l.Reason != kernel.ReasonToolTimeout {
			p.hit(ProbeTimeout)
		}
		p.race(m, l.Agent, true)
	case l.Kind == kernel.LifeCallFinished:
		switch l.Reason {
		case kernel.ReasonToolTimeout:
			p.hit(ProbeToolTimeout)
		case kernel.ReasonMaxCalls:
			p.hit(ProbeMaxCalls)
		}
	case l.Kind == kernel.LifeTurnEnded && l.Reason == kernel.ReasonBudget:
		p.hit(ProbeBudget)
	case l.Kind == kernel.LifeDelegated:
		if c := m.agent(l.Child); c != nil && c.depth >= 4 {
			p.hit(ProbeDepth4Delegation)
		}
	}
}

// race notes results and timeouts per agent and instant; a result and a
// timeout of the same agent at the same virtual instant is a race the
// permutation mode should explore.
func (p *probeSet) race(m *model, agent kernel.AgentID, timeout bool) {
	now := int64(m.now)
	if timeout {
		if at, ok := p.resultAt[agent]; ok && at == now {
			p.hit(ProbeTimeoutRacesResult)
		}
		p.timeoutAt[agent] = now
		return
	}
	if at, ok := p.timeoutAt[agent]; ok && at == now {
		p.hit(ProbeTimeoutRacesResult)
	}
	p.resultAt[agent] = now
}
