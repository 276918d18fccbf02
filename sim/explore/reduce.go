package explore

import (
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
)

// Partial-order reduction (docs/semantics.md, "Exploration"): a chunk of a
// running stream changes only its own agent — its text, its stall
// deadline, its next chunk — so it commutes with any event that cannot
// reach that agent: one addressed to another agent that is not its
// ancestor (an abort only travels down; a child's outcome travels up, to
// agents whose own work waits for this stream to end). Inputs and faults
// commute with nothing. When a reply could reach max_message_bytes, a
// chunk may cut the turn and tell the parent, and nothing is reduced.

// independent reports that delivering a and b in either order reaches one
// state, with both still due after the other.
func (x *explorer) independent(r *run, a, b sim.Due) bool {
	return x.local(a) && x.apart(r, a, b) || x.local(b) && x.apart(r, b, a)
}

func (x *explorer) local(d sim.Due) bool {
	return d.Kind == sim.DueWorld && d.Event.Kind == kernel.EvLLMDelta && !d.Dup && d.Target != kernel.NoAgent
}

// apart: e, an event of the world or a timer, is addressed to an agent
// that is neither d's nor one of its ancestors.
func (x *explorer) apart(r *run, d, e sim.Due) bool {
	if e.Kind != sim.DueWorld && e.Kind != sim.DueTimer || e.Target == kernel.NoAgent || e.Target == d.Target {
		return false
	}
	c := r.m.Core()
	for a := c.View(d.Target).Parent; a != kernel.NoAgent; a = c.View(a).Parent {
		if a == e.Target {
			return false
		}
	}
	return true
}

// outputCapReachable reports a reply whose message could reach
// max_message_bytes: its text, and each call's id, name and arguments as
// the simulated model streams them (scenario.Call.Wire) plus the kernel's
// per-call overhead (both counted generously: 64 bytes a call, 64 a
// message).
func outputCapReachable(s *scenario.Scenario) bool {
	limit := s.Limits.MaxMessageBytes
	if limit == 0 {
		limit = kernel.DefaultLimits().MaxMessageBytes
	}
	for _, script := range s.Agents { // determinism: any one decides
		for _, r := range script {
			cost := len(r.Text)
			for _, c := range r.Calls {
				name, args := c.Wire()
				cost += len(c.ID) + len(name) + len(args) + 64
			}
			if cost+64 >= limit {
				return true
			}
		}
	}
	return false
}
