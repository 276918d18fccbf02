package sim

import (
	"strings"

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
)

// Probes lists every probe in report order.
func Probes() []Probe {
	return []Probe{
		ProbeCancelDeepTooling, ProbeCancelDuringInterrupted, ProbeCancelSingleChild,
		ProbeInterjectStreaming, ProbeInterjectTooling, ProbeInterjectDelegating,
		ProbeTimeoutRacesResult, ProbeLateAfterAbandon, ProbeLateResultAfterCancel,
		ProbeAbandoned, ProbeToolTimeout, ProbeTimeout, ProbeBudget, ProbeDepth4Delegation,
	}
}

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

func (o *oracle) probeInterject(root fsm.State) {
	switch root {
	case fsm.Streaming:
		o.probes.hit(ProbeInterjectStreaming)
	case fsm.Tooling:
		o.probes.hit(ProbeInterjectTooling)
	case fsm.Delegating:
		o.probes.hit(ProbeInterjectDelegating)
	}
}

func (o *oracle) probeCancel(target kernel.AgentID) {
	if target != kernel.Root {
		o.probes.hit(ProbeCancelSingleChild)
	}
	for id, x := range o.agents {
		if x != nil && x.state == fsm.Tooling && depthOf(x.path) >= 4 && o.descends(kernel.AgentID(id), target) {
			o.probes.hit(ProbeCancelDeepTooling)
			return
		}
	}
}

func depthOf(path string) int { return strings.Count(path, "/") }

// probeRace notes results and timeouts per agent and instant; a result and a
// timeout of the same agent at the same virtual instant is a race the
// permutation mode should explore.
func (o *oracle) probeRace(agent kernel.AgentID, timeout bool) {
	now := int64(o.now)
	p := o.probes
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
