package oracle

import "github.com/escapement/escapement/kernel"

// staleChecker holds I8: an event for an op the kernel no longer tracks (or
// a duplicate chunk, or a timer not set) changes nothing — its only effect
// is the stale or late record that says it was dropped.
type staleChecker struct{ judge }

func (c *staleChecker) step(s *stepObs) {
	if s.stale == notStale {
		return
	}
	records := 0
	for i := range s.effs {
		e := &s.effs[i]
		if e.Kind == kernel.EffEmit && (e.Life.Kind == kernel.LifeStale || e.Life.Kind == kernel.LifeLate) {
			records++
			continue
		}
		c.violate(StaleChangesNothing, e.Agent, "stale event (%s) caused %s", s.staleWhy, e.Describe())
	}
	if records != 1 {
		c.violate(StaleChangesNothing, s.target, "stale event (%s) left %d stale or late record(s), want 1", s.staleWhy, records)
	}
	for _, ch := range s.changes {
		if ch.from != ch.to {
			c.violate(StaleChangesNothing, ch.a.id, "stale event (%s) moved the agent %s → %s", s.staleWhy, ch.from, ch.to)
		}
	}
	for i := 0; i < len(s.msgs); {
		j := i
		for j < len(s.msgs) && s.msgs[j].a == s.msgs[i].a {
			j++
		}
		c.violate(StaleChangesNothing, s.msgs[i].a.id, "stale event (%s) appended %d message(s)", s.staleWhy, j-i)
		i = j
	}
}
