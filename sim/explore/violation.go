package explore

import (
	"fmt"
	"slices"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// scenarioOf writes the schedule path as a scenario a plain run
// reproduces: the inputs it placed, in order, at the instants it chose,
// and Schedule, the pick among the events due at each instant where two
// or more were (found by running the file and matching each delivery of
// the path by its identity). It returns nil when the path cannot be
// written so (it then is not a reproduction).
func (x *explorer) scenarioOf(path []move, v oracle.Violation) *scenario.Scenario {
	c := x.s.Clone()
	c.Inputs = nil
	c.Expect = scenario.Expect{}
	if v.Invariant == oracle.Expectation {
		// The expectations required on every schedule; those that hold
		// on some only are not this schedule's to meet.
		c.Expect = x.s.Expect.Required()
	}
	var ids []string
	r, err := x.fresh()
	if err != nil {
		return nil
	}
	for _, mv := range path {
		if mv.place {
			c.Inputs = append(c.Inputs, mv.in)
			ids = append(ids, sim.Due{Kind: sim.DueInput, Index: len(c.Inputs) - 1}.Identity())
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

// breaks reports that a plain run of c breaks what v broke (sim.Breaks).
func (x *explorer) breaks(c *scenario.Scenario, v oracle.Violation) bool {
	return sim.Breaks(c, sim.Options{Core: x.opt.Core}, v)
}

// shrink turns the violating path into a small scenario: the schedule up
// to the violation written as a scenario, sim.Shrink over it with its
// schedule (not for an expectation's failure), then picks set back to the
// default order where the violation stays.
func (x *explorer) shrink() *Violation {
	v := &Violation{First: *x.found, Moves: len(x.foundAt)}
	found, inv := *x.found, x.found.Invariant
	c := x.scenarioOf(x.foundAt, found)
	if !x.breaks(c, found) {
		// Not reproducible by a plain run (it should be: say so loudly).
		v.First.Detail += " (explore: the schedule could not be written as a scenario that reproduces it)"
		v.Scenario = c
		return v
	}
	if inv != oracle.Expectation {
		c = sim.Shrink(c, func(s *scenario.Scenario) bool { return x.breaks(s, found) }, x.opt.ShrinkBudget)
	}
	// An expectation is the scenario's own, on its inputs at their
	// instants: only the order of same-instant events is made plainer
	// (a smaller world would fail it for other reasons).
	for i := range c.Schedule {
		if c.Schedule[i] == 0 {
			continue
		}
		t := c.Clone()
		t.Schedule = slices.Clone(c.Schedule)
		t.Schedule[i] = 0
		if x.breaks(t, found) {
			c = t
		}
	}
	for len(c.Schedule) > 0 && c.Schedule[len(c.Schedule)-1] == 0 {
		c.Schedule = c.Schedule[:len(c.Schedule)-1]
	}
	c.About = fmt.Sprintf("found by escapement sim explore: %s (%s)", inv, inv.Statement())
	if inv == oracle.Expectation {
		c.About = fmt.Sprintf("found by escapement sim explore: the expectation %s fails on this schedule", found.Expect)
	}
	v.Scenario = c
	return v
}
