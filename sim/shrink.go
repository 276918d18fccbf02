package sim

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Clone returns a copy of s whose scripts, calls, tools, faults, inputs and
// expectation maps can be changed freely (a shrinker or generator does).
// Call.Args values are shared: nothing changes them after loading.
func (s *Scenario) Clone() *Scenario {
	c := *s
	c.Agents = make(map[string]Script, len(s.Agents))
	for name, script := range s.Agents { // determinism: a copy, entry by entry
		cp := make(Script, len(script))
		for i, r := range script {
			r.Calls = append([]Call(nil), r.Calls...)
			cp[i] = r
		}
		c.Agents[name] = cp
	}
	c.Tools = maps.Clone(s.Tools)
	if c.Tools == nil {
		c.Tools = map[string]ToolSpec{}
	}
	c.Faults = append([]Fault(nil), s.Faults...)
	c.Inputs = append([]Input(nil), s.Inputs...)
	c.Expect.Outcomes = maps.Clone(s.Expect.Outcomes)
	c.Expect.LLMRequests = maps.Clone(s.Expect.LLMRequests)
	c.Expect.History = maps.Clone(s.Expect.History)
	c.Expect.ScheduleDependent = slices.Clone(s.Expect.ScheduleDependent)
	return &c
}

// Size is what the shrinker minimises, roughly in order of importance.
func (s *Scenario) Size() (scripts, replies, calls, inputs, faults int) {
	for _, script := range s.Agents { // determinism: sums
		scripts++
		replies += len(script)
		for _, r := range script {
			calls += len(r.Calls)
		}
	}
	return scripts, replies, calls, len(s.Inputs), len(s.Faults)
}

// Shrink looks for a smaller scenario for which fails still returns true:
// greedy delta debugging over the scenario value (drop inputs, faults,
// replies, calls and scripts; shorten texts; speed up and simplify tools),
// repeated until no step helps or budget runs of fails are spent. It is what
// a sweep uses on the worlds it finds failing (rapid shrinks inside its own
// checks; a sweep draws worlds from seeds instead). s is not modified.
func Shrink(s *Scenario, fails func(*Scenario) bool, budget int) *Scenario {
	best := s.Clone()
	try := func(c *Scenario) bool {
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
		for _, name := range sortedKeys(best.Agents) {
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
		if c := pruneUnreferenced(best); c != nil {
			progress = try(c) || progress
		}
		for _, name := range sortedKeys(best.Tools) {
			t := best.Tools[name]
			var simpler []ToolSpec
			if t.Duration > 10*time.Millisecond {
				half := t
				half.Duration /= 2
				simpler = append(simpler, half)
			}
			if plain := (ToolSpec{Duration: t.Duration, Result: t.Result}); plain != t {
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

// pruneUnreferenced drops scripts no delegation names and tools no call or
// fault names (the root script stays); nil when there is nothing to drop.
func pruneUnreferenced(s *Scenario) *Scenario {
	usedScripts := map[string]bool{RootScript: true}
	usedTools := map[string]bool{}
	for _, script := range s.Agents { // determinism: building sets
		for _, r := range script {
			for _, c := range r.Calls {
				usedScripts[c.Delegate] = true
				usedTools[c.Tool] = true
			}
		}
	}
	// Every agent reference (a fault's agent, a cancel's target, an
	// expectation's key) keeps the scripts it names.
	refs := []string{}
	for _, f := range s.Faults {
		refs = append(refs, f.Agent)
		usedTools[f.Tool] = true
	}
	for _, in := range s.Inputs {
		if in.Cancel != "" {
			refs = append(refs, in.Cancel)
		}
	}
	refs = append(refs, slices.Collect(maps.Keys(s.Expect.Outcomes))...)
	refs = append(refs, slices.Collect(maps.Keys(s.Expect.LLMRequests))...)
	refs = append(refs, slices.Collect(maps.Keys(s.Expect.History))...)
	for _, ref := range refs {
		for _, name := range refScripts(ref) {
			usedScripts[name] = true
		}
	}
	c := s.Clone()
	changed := false
	for _, name := range sortedKeys(c.Agents) {
		if !usedScripts[name] {
			delete(c.Agents, name)
			changed = true
		}
	}
	for _, name := range sortedKeys(c.Tools) {
		if !usedTools[name] {
			delete(c.Tools, name)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return c
}
