package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/escapement/escapement/kernel"
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

// expectCheck is one expectation before it is judged: where it is in the
// scenario's expect (its section, the agent it names, the history field)
// and how to judge it.
type expectCheck struct {
	section, ref, field string
	judge               func(fail func(format string, args ...any))
}

// name is the expectation's name (ExpectVerdict.Name).
func (c expectCheck) name() string {
	switch {
	case c.ref == "":
		return c.section
	case c.field == "":
		return c.section + "." + c.ref
	}
	return c.section + "." + c.ref + "." + c.field
}

// group is the mark that covers it besides its name: history.REF for
// each of REF's history checks.
func (c expectCheck) group() string {
	if c.section == "history" {
		return "history." + c.ref
	}
	return c.name()
}

// expectChecks lists s's expectations in the order they are judged (and
// their failures reported). They read the core and the oracle's counts
// only when judged.
func expectChecks(s *Scenario, c Core, o *oracle, res *Result) []expectCheck {
	e := s.Expect
	var out []expectCheck
	add := func(section, ref, field string, judge func(fail func(string, ...any))) {
		out = append(out, expectCheck{section: section, ref: ref, field: field, judge: judge})
	}
	for _, ref := range sortedKeys(e.Outcomes) {
		add("outcomes", ref, "", func(fail func(string, ...any)) {
			id, ok := findAgent(c, o.m, ref)
			if !ok {
				fail("outcomes.%s: no such agent in the run", ref)
				return
			}
			if got := o.m.agents[id].view.Outcome.String(); got != e.Outcomes[ref] {
				fail("outcomes.%s: %s, want %s", ref, got, e.Outcomes[ref])
			}
		})
	}
	for _, ref := range sortedKeys(e.LLMRequests) {
		add("llm_requests", ref, "", func(fail func(string, ...any)) {
			id, ok := findAgent(c, o.m, ref)
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
		})
	}
	if e.QuiescentBy > 0 {
		add("quiescent_by", "", "", func(fail func(string, ...any)) {
			if res.QuiescentAt > e.QuiescentBy {
				fail("quiescent_by: quiescent at %v, want by %v", res.QuiescentAt, e.QuiescentBy)
			}
		})
	}
	for _, ref := range sortedKeys(e.History) {
		want := e.History[ref]
		history := func(fail func(string, ...any)) ([]kernel.Message, bool) {
			id, ok := findAgent(c, o.m, ref)
			if !ok {
				fail("history.%s: no such agent in the run", ref)
				return nil, false
			}
			return o.m.agents[id].view.History, true // a freed agent's as last read
		}
		if want.Marker == nil && want.Partial == nil && len(want.Contains) == 0 && len(want.Absent) == 0 {
			// Nothing to check but that the agent is there.
			add("history", ref, "", func(fail func(string, ...any)) { history(fail) })
			continue
		}
		flag := func(field string, want *bool, has func(kernel.Message) bool) {
			if want == nil {
				return
			}
			add("history", ref, field, func(fail func(string, ...any)) {
				h, ok := history(fail)
				if !ok {
					return
				}
				if got := slices.ContainsFunc(h, has); got != *want {
					fail("history.%s.%s: %v, want %v", ref, field, got, *want)
				}
			})
		}
		flag("marker", want.Marker, func(m kernel.Message) bool { return m.Marker })
		flag("partial", want.Partial, func(m kernel.Message) bool { return m.Partial })
		if len(want.Contains) > 0 {
			add("history", ref, "contains", func(fail func(string, ...any)) {
				h, ok := history(fail)
				for _, sub := range want.Contains {
					if ok && !historyContains(h, sub) {
						fail("history.%s.contains: no message contains %q", ref, sub)
					}
				}
			})
		}
		if len(want.Absent) > 0 {
			add("history", ref, "absent", func(fail func(string, ...any)) {
				h, ok := history(fail)
				for _, sub := range want.Absent {
					if ok && historyContains(h, sub) {
						fail("history.%s.absent: a message contains %q", ref, sub)
					}
				}
			})
		}
	}
	return out
}

// ExpectNames lists the names a scenario's expect.schedule_dependent may
// give: every expectation's name, and history.REF for all of REF's
// history checks at once.
func (s *Scenario) ExpectNames() []string {
	var names []string
	for _, c := range expectChecks(s, nil, nil, nil) {
		if g := c.group(); g != c.name() && !slices.Contains(names, g) {
			names = append(names, g)
		}
		names = append(names, c.name())
	}
	return names
}

// scheduleDependent reports that the scenario marks check c as holding on
// some schedules only.
func (s *Scenario) scheduleDependent(c expectCheck) bool {
	marks := s.Expect.ScheduleDependent
	return slices.Contains(marks, c.name()) || slices.Contains(marks, c.group())
}

// checkExpect judges every expectation, adding an "expect" violation for
// each failed check. A schedule-dependent expectation describes the
// scenario's own order: a permuted run judges it without failing.
func checkExpect(s *Scenario, c Core, o *oracle, res *Result, permuted bool) {
	o.m.now = res.QuiescentAt // the time expectations are judged at
	var told []string         // an agent missing from the run is told once for all its history checks
	for _, ch := range expectChecks(s, c, o, res) {
		v := ExpectVerdict{Name: ch.name(), ScheduleDependent: s.scheduleDependent(ch)}
		ch.judge(func(format string, args ...any) {
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

// Required is e without the expectations it marks schedule-dependent:
// what must hold on every schedule.
func (e Expect) Required() Expect {
	s := &Scenario{Expect: e}
	var r Expect
	for _, c := range expectChecks(s, nil, nil, nil) {
		if s.scheduleDependent(c) {
			continue
		}
		switch c.section {
		case "outcomes":
			r.Outcomes = setKey(r.Outcomes, c.ref, e.Outcomes[c.ref])
		case "llm_requests":
			r.LLMRequests = setKey(r.LLMRequests, c.ref, e.LLMRequests[c.ref])
		case "quiescent_by":
			r.QuiescentBy = e.QuiescentBy
		case "history":
			h, want := r.History[c.ref], e.History[c.ref]
			switch c.field {
			case "marker":
				h.Marker = want.Marker
			case "partial":
				h.Partial = want.Partial
			case "contains":
				h.Contains = want.Contains
			case "absent":
				h.Absent = want.Absent
			}
			r.History = setKey(r.History, c.ref, h)
		}
	}
	return r
}

func setKey[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
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
	for _, ref := range sortedKeys(e.LLMRequests) {
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
