package sim

import (
	"strings"
	"time"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// Shrink looks for a smaller scenario for which fails still returns true:
// greedy delta debugging over the scenario value (drop inputs, faults,
// replies, calls and scripts; shorten texts; speed up and simplify tools),
// repeated until no step helps or budget runs of fails are spent. It is what
// a sweep uses on the worlds it finds failing (rapid shrinks inside its own
// checks; a sweep draws worlds from seeds instead). s is not modified.
func Shrink(s *scenario.Scenario, fails func(*scenario.Scenario) bool, budget int) *scenario.Scenario {
	best := s.Clone()
	try := func(c *scenario.Scenario) bool {
		if budget <= 0 || c.Validate() != nil {
			return false
		}
		budget--
		if fails(c) {
			best = c
			return true
		}
		return false
	}
	for progress := true; progress && budget > 0; {
		progress = false
		for i := len(best.Inputs) - 1; i >= 0; i-- {
			c := best.Clone()
			c.Inputs = append(c.Inputs[:i], c.Inputs[i+1:]...)
			progress = try(c) || progress
		}
		for i := len(best.Faults) - 1; i >= 0; i-- {
			c := best.Clone()
			c.Faults = append(c.Faults[:i], c.Faults[i+1:]...)
			progress = try(c) || progress
		}
		for _, name := range keys.Sorted(best.Agents) {
			for r := len(best.Agents[name]) - 1; r >= 0; r-- {
				if r >= len(best.Agents[name]) {
					continue
				}
				c := best.Clone()
				script := c.Agents[name]
				c.Agents[name] = append(script[:r], script[r+1:]...)
				progress = try(c) || progress
			}
			for r := range best.Agents[name] {
				for k := len(best.Agents[name][r].Calls) - 1; k >= 0; k-- {
					if r >= len(best.Agents[name]) || k >= len(best.Agents[name][r].Calls) {
						continue
					}
					c := best.Clone()
					calls := c.Agents[name][r].Calls
					c.Agents[name][r].Calls = append(calls[:k], calls[k+1:]...)
					progress = try(c) || progress
				}
				if r < len(best.Agents[name]) {
					if words := strings.Fields(best.Agents[name][r].Text); len(words) > 1 {
						c := best.Clone()
						c.Agents[name][r].Text = strings.Join(words[:len(words)/2], " ")
						progress = try(c) || progress
					}
				}
			}
		}
		// Scripts and tools nobody refers to any more go; tools get faster
		// and simpler.
		if c := best.Pruned(); c != nil {
			progress = try(c) || progress
		}
		for _, name := range keys.Sorted(best.Tools) {
			t := best.Tools[name]
			var simpler []scenario.ToolSpec
			if t.Duration > 10*time.Millisecond {
				half := t
				half.Duration /= 2
				simpler = append(simpler, half)
			}
			if plain := (scenario.ToolSpec{Duration: t.Duration, Result: t.Result}); plain != t {
				simpler = append(simpler, plain)
			}
			for _, st := range simpler {
				c := best.Clone()
				c.Tools[name] = st
				if try(c) {
					progress = true
					break
				}
			}
		}
	}
	return best
}

// Breaks reports whether a run of s with opt breaks what v broke: v's
// invariant, and for an expectation the same expectation (a smaller world
// that fails another expectation fails for another reason). A scenario
// that is nil, does not validate or does not run breaks nothing. It is the
// check a shrinker keeps true on the way down (Shrink): sim explore's and
// sim sweep's alike.
func Breaks(s *scenario.Scenario, opt Options, v oracle.Violation) bool {
	if s == nil || s.Validate() != nil {
		return false
	}
	res, err := Run(s, opt)
	if err != nil {
		return false
	}
	for _, got := range res.Violations {
		if got.Invariant == v.Invariant && got.Expect == v.Expect {
			return true
		}
	}
	return false
}
