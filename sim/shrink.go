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
	k := &shrinker{best: s.Clone(), fails: fails, budget: budget}
	for progress := true; progress && k.budget > 0; {
		progress = k.round()
	}
	return k.best
}

// shrinker is one Shrink: the smallest failing scenario so far and the
// runs left.
type shrinker struct {
	best   *scenario.Scenario
	fails  func(*scenario.Scenario) bool
	budget int
}

// try keeps c when it is valid and still fails (one run of the budget).
func (k *shrinker) try(c *scenario.Scenario) bool {
	if k.budget <= 0 || c.Validate() != nil {
		return false
	}
	k.budget--
	if k.fails(c) {
		k.best = c
		return true
	}
	return false
}

// round tries each smaller scenario once, in order — fewer inputs,
// faults, replies, calls; shorter texts; scripts and tools nobody refers
// to any more dropped; faster and simpler tools — and reports whether one
// still failed.
func (k *shrinker) round() bool {
	progress := k.dropInputs()
	progress = k.dropFaults() || progress
	for _, name := range keys.Sorted(k.best.Agents) {
		progress = k.dropReplies(name) || progress
		progress = k.shortenReplies(name) || progress
	}
	if c := k.best.Pruned(); c != nil {
		progress = k.try(c) || progress
	}
	for _, name := range keys.Sorted(k.best.Tools) {
		progress = k.simplifyTool(name) || progress
	}
	return progress
}

func (k *shrinker) dropInputs() bool {
	progress := false
	for i := len(k.best.Inputs) - 1; i >= 0; i-- {
		c := k.best.Clone()
		c.Inputs = append(c.Inputs[:i], c.Inputs[i+1:]...)
		progress = k.try(c) || progress
	}
	return progress
}

func (k *shrinker) dropFaults() bool {
	progress := false
	for i := len(k.best.Faults) - 1; i >= 0; i-- {
		c := k.best.Clone()
		c.Faults = append(c.Faults[:i], c.Faults[i+1:]...)
		progress = k.try(c) || progress
	}
	return progress
}

// dropReplies drops each reply of script name, last first.
func (k *shrinker) dropReplies(name string) bool {
	progress := false
	for r := len(k.best.Agents[name]) - 1; r >= 0; r-- {
		if r >= len(k.best.Agents[name]) {
			continue
		}
		c := k.best.Clone()
		script := c.Agents[name]
		c.Agents[name] = append(script[:r], script[r+1:]...)
		progress = k.try(c) || progress
	}
	return progress
}

// shortenReplies drops each call of each reply of script name, and halves
// its text.
func (k *shrinker) shortenReplies(name string) bool {
	progress := false
	for r := range k.best.Agents[name] {
		progress = k.dropCalls(name, r) || progress
		if r < len(k.best.Agents[name]) {
			if words := strings.Fields(k.best.Agents[name][r].Text); len(words) > 1 {
				c := k.best.Clone()
				c.Agents[name][r].Text = strings.Join(words[:len(words)/2], " ")
				progress = k.try(c) || progress
			}
		}
	}
	return progress
}

// dropCalls drops each call of reply r of script name, last first.
func (k *shrinker) dropCalls(name string, r int) bool {
	progress := false
	for i := len(k.best.Agents[name][r].Calls) - 1; i >= 0; i-- {
		if r >= len(k.best.Agents[name]) || i >= len(k.best.Agents[name][r].Calls) {
			continue
		}
		c := k.best.Clone()
		calls := c.Agents[name][r].Calls
		c.Agents[name][r].Calls = append(calls[:i], calls[i+1:]...)
		progress = k.try(c) || progress
	}
	return progress
}

// simplifyTool makes tool name faster (half its duration) or plain (its
// duration and result only: no error, no cancel behaviour), the first
// that still fails.
func (k *shrinker) simplifyTool(name string) bool {
	t := k.best.Tools[name]
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
		c := k.best.Clone()
		c.Tools[name] = st
		if k.try(c) {
			return true
		}
	}
	return false
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
