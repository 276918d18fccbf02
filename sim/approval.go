package sim

import (
	"fmt"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/scenario"
)

// A scenario's person (docs/semantics.md, "Approvals"): the inputs approve
// and deny become kernel decisions, addressed to the call of an agent, with
// the digest of the arguments the call asked about — the person approves
// what the request showed them, so a late decision carries the real digest
// and is stale, not refused.

// askKey names one call of one agent.
type askKey struct {
	agent kernel.AgentID
	call  string
}

// noteAsked records the arguments of each approval request a step made,
// as the person reads them off the request (a request asked again by a
// recovery shows the same).
func (m *Sim) noteAsked(effs []kernel.Effect) {
	for i := range effs {
		if l := &effs[i].Life; effs[i].Kind == kernel.EffEmit && l.Kind == kernel.LifeApprovalRequested {
			if m.asked == nil {
				m.asked = make(map[askKey]string)
			}
			m.asked[askKey{l.Agent, l.CallID}] = l.Text
		}
	}
}

// decisionEvent turns an approve or deny input into a decision, resolving
// its agent at the moment it is given. The digest is that of the
// arguments the call asked about (scenario.Input.DecisionDigest); a call
// that never asked has none, and the kernel refuses the decision.
func (m *Sim) decisionEvent(in scenario.Input) (kernel.Event, string) {
	call, verdict := in.Decision()
	id, ok := m.o.Find(in.DecisionAgent())
	if !ok {
		return kernel.Event{}, fmt.Sprintf("%s of %s's %s: no such agent (yet); nothing to decide", in.Kind(), in.DecisionAgent(), call)
	}
	args, asked := m.asked[askKey{id, call}]
	digest := in.DecisionDigest(args)
	if !asked && in.Digest == "" {
		digest = ""
	}
	return kernel.Decide(0, id, call, digest, verdict, in.Note), ""
}

// appendDecisionEnc adds what names a decision input to its queued item's
// encoding (Sim.itemEnc): two decisions that differ in anything they say
// are two different pending inputs to an explorer.
func appendDecisionEnc(ie *kernelEnc, in scenario.Input) {
	for _, f := range [...]string{in.Approve, in.Deny, in.Agent, in.Digest, in.Note, in.For} {
		ie.str(f)
	}
}
