package scenario

import (
	"maps"
	"slices"

	"github.com/escapement/escapement/internal/keys"
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

// Pruned is s without the scripts no delegation names and the tools no
// call or fault names (the root script stays): what a shrinker tries once
// it has dropped the calls and references to them. It is nil when there
// is nothing to drop.
func (s *Scenario) Pruned() *Scenario {
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
	for _, name := range keys.Sorted(c.Agents) {
		if !usedScripts[name] {
			delete(c.Agents, name)
			changed = true
		}
	}
	for _, name := range keys.Sorted(c.Tools) {
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
