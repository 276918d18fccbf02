package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/scenario"
)

// ExpectVerdict is one expectation of a scenario, judged at the end of a
// run.
type ExpectVerdict struct {
	// Name is the expectation's name: outcomes.REF, llm_requests.REF,
	// quiescent_by, or history.REF.marker, .partial, .contains, .absent
	// (REF as the scenario writes it). Its failures start with it.
	Name string
	// ScheduleDependent: the scenario marks it as holding on some
	// schedules only (Expect.ScheduleDependent; docs/semantics.md,
	// "Exploration").
	ScheduleDependent bool
	// Held is true when it held; Failures say why not, one per check.
	Held     bool
	Failures []string
}

// judgeExpect judges one expectation of e, calling fail for each way it
// does not hold. It reads the core and the oracle's counts.
func judgeExpect(e scenario.Expect, c scenario.ExpectCheck, core Core, o *oracle, res *Result, fail func(format string, args ...any)) {
	ref := c.Ref
	switch c.Section {
	case "outcomes":
		id, ok := findAgent(core, o.m, ref)
		if !ok {
			fail("outcomes.%s: no such agent in the run", ref)
			return
		}
		if got := o.m.agents[id].view.Outcome.String(); got != e.Outcomes[ref] {
			fail("outcomes.%s: %s, want %s", ref, got, e.Outcomes[ref])
		}
	case "llm_requests":
		id, ok := findAgent(core, o.m, ref)
		got := 0
		if ok { // finish observed every agent
			got = o.m.agents[id].asked()
		}
		if !ok && e.LLMRequests[ref] != 0 {
			fail("llm_requests.%s: no such agent in the run", ref)
			return
		}
		if got != e.LLMRequests[ref] {
			fail("llm_requests.%s: %d, want %d", ref, got, e.LLMRequests[ref])
		}
	case "quiescent_by":
		if res.QuiescentAt > e.QuiescentBy {
			fail("quiescent_by: quiescent at %v, want by %v", res.QuiescentAt, e.QuiescentBy)
		}
	case "history":
		id, ok := findAgent(core, o.m, ref)
		if !ok {
			fail("history.%s: no such agent in the run", ref)
			return
		}
		judgeHistory(e.History[ref], c, o.m.agents[id].view.History, fail) // a freed agent's as last read
	}
}

// judgeHistory judges one history check of an agent's final history h.
func judgeHistory(want scenario.HistoryExpect, c scenario.ExpectCheck, h []kernel.Message, fail func(format string, args ...any)) {
	flag := func(want *bool, has func(kernel.Message) bool) {
		if got := slices.ContainsFunc(h, has); got != *want {
			fail("history.%s.%s: %v, want %v", c.Ref, c.Field, got, *want)
		}
	}
	switch c.Field {
	case "marker":
		flag(want.Marker, func(m kernel.Message) bool { return m.Marker })
	case "partial":
		flag(want.Partial, func(m kernel.Message) bool { return m.Partial })
	case "contains":
		for _, sub := range want.Contains {
			if !historyContains(h, sub) {
				fail("history.%s.contains: no message contains %q", c.Ref, sub)
			}
		}
	case "absent":
		for _, sub := range want.Absent {
			if historyContains(h, sub) {
				fail("history.%s.absent: a message contains %q", c.Ref, sub)
			}
		}
	}
}

// checkExpect judges every expectation, adding an "expect" violation for
// each failed check. A schedule-dependent expectation describes the
// scenario's own order: a permuted run judges it without failing.
func checkExpect(s *scenario.Scenario, c Core, o *oracle, res *Result, permuted bool) {
	o.m.now = res.QuiescentAt // the time expectations are judged at
	var told []string         // an agent missing from the run is told once for all its history checks
	for _, ch := range s.Expect.Checks() {
		v := ExpectVerdict{Name: ch.Name(), ScheduleDependent: s.Expect.Marked(ch)}
		judgeExpect(s.Expect, ch, c, o, res, func(format string, args ...any) {
			v.Failures = append(v.Failures, fmt.Sprintf(format, args...))
		})
		v.Held = len(v.Failures) == 0
		res.Expectations = append(res.Expectations, v)
		if v.ScheduleDependent && permuted {
			continue
		}
		for _, f := range v.Failures {
			if slices.Contains(told, f) {
				continue
			}
			told = append(told, f)
			o.violate(Expectation, kernel.NoAgent, "%s", f)
			if n := len(o.out); n > 0 && o.out[n-1].Detail == f {
				o.out[n-1].Expect = v.Name
			}
		}
	}
}

func historyContains(h []kernel.Message, sub string) bool {
	for _, m := range h {
		if strings.Contains(m.Content, sub) {
			return true
		}
		for _, c := range m.ToolCalls {
			if strings.Contains(c.Arguments, sub) {
				return true
			}
		}
	}
	return false
}

// AppendExpectState appends to dst what the scenario's expectations,
// judged at the end of the run, will read of the run's past — beyond its
// state (AppendState), which holds every outcome and history they read:
// for each llm_requests expectation, the requests its agent made so far
// (counted to one past the number expected: every larger count fails
// alike); for quiescent_by, whether the tree is quiescent now, and whether
// it became so, or delivered its last event, after the bound. An explorer
// that prunes on a state adds this, so two schedules whose expectations
// could still end differently never merge (docs/semantics.md,
// "Exploration").
func (m *Sim) AppendExpectState(dst []byte) []byte {
	e := m.s.Expect
	enc := kernelEnc{b: dst}
	for _, ref := range keys.Sorted(e.LLMRequests) {
		got := int64(-1) // not there (yet)
		if id, ok := findAgent(m.core, m.o.m, ref); ok {
			got = 0
			if a := m.o.m.agent(id); a != nil {
				got = int64(min(a.asked(), e.LLMRequests[ref]+1))
			}
		}
		enc.int(got)
	}
	if by := e.QuiescentBy; by > 0 {
		mo := m.o.m
		enc.flags(mo.quiet, mo.quiet && mo.quietAt > by, m.res.End > by)
	}
	return enc.b
}
