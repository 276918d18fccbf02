package oracle

import (
	"slices"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// cancelChecker holds I2 (F2, F9) and I11 (F8, F14). A cancel that acts —
// its target's turn runs and the cancel is bound to it — interrupts the
// target and every working descendant in its own step, and every op in
// flight in an aborted subtree gets exactly one cancel, whatever aborted it
// (a cancel, a deadline, a shutdown, an output limit); so does a tool whose
// own deadline fired. A cancel that finds
// its turn Interrupted or ended is a declared no-op: nothing but an ignored
// record. A turn is interrupted at most once and holds at most one marker.
type cancelChecker struct{ judge }

func (c *cancelChecker) step(s *stepObs) {
	if s.final {
		return
	}
	if s.is(kernel.EvCancel) && c.m.agent(s.cancel.target) != nil && !s.cancel.acting {
		c.noOp(s)
	}
	for i := range s.effs {
		c.effect(&s.effs[i], &s.notes[i])
	}
	for _, o := range s.msgs {
		if o.m.Marker && o.markers > 1 {
			c.violate(IdempotentInterrupts, o.a.id, "turn %d has %d markers", o.a.markerTurn, o.markers)
		}
	}
	if (s.is(kernel.EvCancel) || s.is(kernel.EvShutdown)) && s.cancel.acting {
		c.acted(s)
	}
	// Whatever aborted a subtree, every op still in flight in it got its
	// cancel in this same step.
	for _, id := range s.entered {
		if p := c.m.agent(id).parent; p == kernel.NoAgent || !slices.Contains(s.entered, p) {
			c.allCancelled(id) // else aborted with its parent: the parent's subtree covers it
		}
	}
}

// effect judges the cancels and interrupts of one effect: each op in
// flight cancelled once, each turn interrupted once, a timed-out tool
// cancelled.
func (c *cancelChecker) effect(e *kernel.Effect, n *note) {
	switch {
	case e.Kind == kernel.EffCancelLLM || e.Kind == kernel.EffCancelTool:
		if n.bad {
			c.violate(CancelReachesSubtree, e.Agent, "cancel for op %d, which is not in flight", e.Op)
		} else if n.count > 1 {
			c.violate(CancelReachesSubtree, e.Agent, "op %d cancelled %d times (exactly one cancel per op)", e.Op, n.count)
		}
	case e.Kind != kernel.EffEmit:
	case e.Life.Kind == kernel.LifeInterrupted && n.bad:
		c.violate(IdempotentInterrupts, e.Agent, "turn %d interrupted twice", e.Life.Turn)
	case e.Life.Kind == kernel.LifeTimedOut && e.Life.Reason == kernel.ReasonToolTimeout && n.op != nil && n.op.cancels == 0:
		c.violate(CancelReachesSubtree, e.Agent, "tool op %d timed out and got no cancel", n.op.id)
	}
}

// allCancelled: every op in flight under the aborted agent id got its
// cancel.
func (c *cancelChecker) allCancelled(id kernel.AgentID) {
	for _, op := range c.m.live {
		if op.cancels == 0 && c.m.descends(op.agent, id) {
			c.violate(CancelReachesSubtree, op.agent, "op %d in flight under the aborted %s got no cancel", op.id, c.m.agent(id).path)
		}
	}
}

// noOp: a cancel that finds its turn Interrupted or ended changes nothing;
// its one effect is the ignored record that says so.
func (c *cancelChecker) noOp(s *stepObs) {
	for i := range s.effs {
		if e := &s.effs[i]; !(e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeIgnored && e.Life.Agent == s.cancel.target) {
			c.violate(IdempotentInterrupts, s.cancel.target, "a cancel that found the turn %s (a no-op) caused %s", s.cancel.was, e.Describe())
			return
		}
	}
	if len(s.effs) != 1 {
		c.violate(IdempotentInterrupts, s.cancel.target, "a cancel that found the turn %s left %d ignored records, want 1", s.cancel.was, len(s.effs))
	}
}

// acted: the cancel interrupted its target and reached every working
// descendant.
func (c *cancelChecker) acted(s *stepObs) {
	t := c.m.agent(s.cancel.target)
	if !slices.Contains(s.entered, t.id) {
		c.violate(CancelReachesSubtree, t.id, "cancel did not interrupt its target (still %s)", t.state)
		return
	}
	for _, id := range s.cancel.sub {
		if st := c.m.agent(id).state; st != fsm.Interrupted && st != fsm.Idle {
			c.violate(CancelReachesSubtree, id, "cancel of %s did not reach this descendant (still %s)", t.path, st)
		}
	}
}
