package explore

import (
	"fmt"
	"slices"

	"github.com/escapement/escapement/sim"
)

// scenarioOf writes the schedule path as a scenario a plain run
// reproduces: the inputs it placed, in order, at the instants it chose,
// and Schedule, the pick among the events due at each instant where two
// or more were (found by running the file and matching each delivery of
// the path by its identity). It returns nil when the path cannot be
// written so (it then is not a reproduction).
func (x *explorer) scenarioOf(path []move) *sim.Scenario {
	c := x.s.Clone()
	c.Inputs = nil
	var ids []string
	r, err := x.fresh()
	if err != nil {
		return nil
	}
	for _, mv := range path {
		if mv.place {
			c.Inputs = append(c.Inputs, mv.in)
		} else {
			ids = append(ids, r.m.Due()[mv.pick].Identity())
		}
		x.apply(r, mv)
	}
	if c.Validate() != nil {
		return nil
	}
	m, err := sim.New(c, sim.Options{Core: x.opt.Core})
	if err != nil {
		return nil
	}
	var picks []int
	for _, id := range ids {
		due := m.Due()
		i := slices.IndexFunc(due, func(d sim.Due) bool { return d.Identity() == id })
		if i < 0 {
			return nil
		}
		if len(due) > 1 {
			picks = append(picks, i)
		}
		m.StepDue(due[i])
	}
	// Trailing zeros are the default order.
	for len(picks) > 0 && picks[len(picks)-1] == 0 {
		picks = picks[:len(picks)-1]
	}
	c.Schedule = picks
	return c
}

// breaks reports that a plain run of c breaks inv.
func (x *explorer) breaks(c *sim.Scenario, inv sim.Invariant) bool {
	if c == nil || c.Validate() != nil {
		return false
	}
	res, err := sim.Run(c, sim.Options{Core: x.opt.Core})
	if err != nil {
		return false
	}
	for _, v := range res.Violations {
		if v.Invariant == inv {
			return true
		}
	}
	return false
}

// shrink turns the violating path into a small scenario: shorter paths
// first (the schedule up to the violation, without moves a plain run does
// not need), then sim.Shrink over the scenario with its schedule, then
// picks set back to the default order where the violation stays.
func (x *explorer) shrink() *Violation {
	v := &Violation{First: *x.found, Moves: len(x.foundAt)}
	inv := x.found.Invariant
	c := x.scenarioOf(x.foundAt)
	if !x.breaks(c, inv) {
		// Not reproducible by a plain run (it should be: say so loudly).
		v.First.Detail += " (explore: the schedule could not be written as a scenario that reproduces it)"
		v.Scenario = c
		return v
	}
	budget := x.opt.ShrinkBudget
	c = sim.Shrink(c, func(s *sim.Scenario) bool { return x.breaks(s, inv) }, budget)
	for i := range c.Schedule {
		if c.Schedule[i] == 0 {
			continue
		}
		t := c.Clone()
		t.Schedule = slices.Clone(c.Schedule)
		t.Schedule[i] = 0
		if x.breaks(t, inv) {
			c = t
		}
	}
	for len(c.Schedule) > 0 && c.Schedule[len(c.Schedule)-1] == 0 {
		c.Schedule = c.Schedule[:len(c.Schedule)-1]
	}
	c.About = fmt.Sprintf("found by escapement sim explore: %s (%s)", inv, inv.Statement())
	v.Scenario = c
	return v
}
