package oracle

import "github.com/escapement/escapement/kernel"

// fsmChecker holds I7: every transition the kernel reports is one the
// oracle's own statement of the machine (specMoves) declares, leading where
// it says; the transitions of a step explain each agent's change of state,
// link up, and no declared pair is refused as undeclared.
type fsmChecker struct {
	judge
	legal *legalTable
}

func (c *fsmChecker) step(s *stepObs) {
	for i := range s.effs {
		e := &s.effs[i]
		switch {
		case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTransition:
			l := &e.Life
			if to, ok := c.legal.lookup(l.From, l.Trigger); !ok {
				c.violate(DeclaredTransitions, l.Agent, "transition %s --%s--> %s is not declared", l.From, l.Trigger, l.To)
			} else if to != l.To {
				c.violate(DeclaredTransitions, l.Agent, "transition %s --%s--> %s; the machine says %s", l.From, l.Trigger, l.To, to)
			}
		case e.Kind == kernel.EffError && e.Code == kernel.ErrCodeUndeclared:
			if _, ok := c.legal.lookup(e.State, e.Trigger); ok {
				c.violate(DeclaredTransitions, e.Agent, "%s in %s refused as undeclared, but the machine declares it", e.Trigger, e.State)
			}
		}
	}
	for _, ch := range s.changes {
		chain := s.transOf(ch.a.id)
		switch {
		case len(chain) == 0:
			c.violate(DeclaredTransitions, ch.a.id, "state changed %s → %s with no declared transition", ch.from, ch.to)
			continue
		case chain[0].From != ch.from || chain[len(chain)-1].To != ch.to:
			c.violate(DeclaredTransitions, ch.a.id, "transitions %s…%s do not explain %s → %s", chain[0].From, chain[len(chain)-1].To, ch.from, ch.to)
			continue
		}
		for k := 1; k < len(chain); k++ {
			if chain[k-1].To != chain[k].From {
				c.violate(DeclaredTransitions, ch.a.id, "transition to %s followed by one from %s", chain[k-1].To, chain[k].From)
				break
			}
		}
	}
}
