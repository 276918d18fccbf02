package gen

import (
	"pgregory.net/rapid"

	"github.com/escapement/escapement/sim/scenario"
)

// Around draws worlds around a program's own agents: base's scripts, tools
// and limits stay as written, and what a user and a flaky world do to them
// is drawn — the user's inputs (Inputs) and, with o.Faults, injected faults
// (Faults) on top of base's own. base's inputs and expectations are dropped:
// they describe one story, and the oracle's invariants (docs/semantics.md)
// are what must hold in every drawn one. o.MaxDepth and o.MaxAgents do not
// apply (the scripts are base's). base is not modified.
//
// It is the generator for a user's own property test; see the package
// example.
func Around(base *scenario.Scenario, o Options) *rapid.Generator[*scenario.Scenario] {
	return rapid.Custom(func(t *rapid.T) *scenario.Scenario {
		s := base.Clone()
		s.Inputs, s.Expect = nil, scenario.Expect{}
		if o.Faults {
			s.Faults = append(s.Faults, Faults(s).Draw(t, "faults")...)
		}
		s.Inputs = Inputs(s, o).Draw(t, "inputs")
		return s
	})
}

// Inputs draws a user's inputs for s's scripts: a submission at 0, then up
// to o.MaxInputs submissions, interjections, cancels (of the root or of any
// script's agent, some bound to a turn) and, with o.Shutdowns, rarely a
// shutdown — singly or in bursts, about half of them at instants s's scripts
// make interesting (a chunk arriving, a stream ending, a tool returning,
// a deadline), so inputs race chunks, results and timers.
func Inputs(s *scenario.Scenario, o Options) *rapid.Generator[[]scenario.Input] {
	return inputs(s, o)
}

// Faults draws injected faults for s's agents and tools, swarm style: each
// draw turns on a random subset of the fault kinds (possibly none) and places
// one to three of each at random times.
func Faults(s *scenario.Scenario) *rapid.Generator[[]scenario.Fault] {
	return rapid.Custom(func(t *rapid.T) []scenario.Fault { return drawFaults(t, s) })
}
