package scenario

import (
	"slices"

	"github.com/escapement/escapement/internal/keys"
)

// ExpectCheck is one expectation of a scenario before it is judged: its
// section of expect (outcomes, llm_requests, quiescent_by, history), the
// agent reference it names and, for a history check, the field (marker,
// partial, contains, absent; "" for a history entry that asks nothing but
// that the agent is there). The oracle judges each at the end of a run
// (sim/oracle, expect.go).
type ExpectCheck struct {
	Section, Ref, Field string
}

// Name is the expectation's name: outcomes.REF, llm_requests.REF,
// quiescent_by, or history.REF.FIELD (REF as the scenario writes it).
func (c ExpectCheck) Name() string {
	switch {
	case c.Ref == "":
		return c.Section
	case c.Field == "":
		return c.Section + "." + c.Ref
	}
	return c.Section + "." + c.Ref + "." + c.Field
}

// Group is the mark that covers it besides its name: history.REF for
// each of REF's history checks.
func (c ExpectCheck) Group() string {
	if c.Section == "history" {
		return "history." + c.Ref
	}
	return c.Name()
}

// Checks lists e's expectations in the order they are judged (and their
// failures reported): outcomes, llm_requests, quiescent_by, then each
// agent's history checks, agents in name order.
func (e Expect) Checks() []ExpectCheck {
	var out []ExpectCheck
	for _, ref := range keys.Sorted(e.Outcomes) {
		out = append(out, ExpectCheck{Section: "outcomes", Ref: ref})
	}
	for _, ref := range keys.Sorted(e.LLMRequests) {
		out = append(out, ExpectCheck{Section: "llm_requests", Ref: ref})
	}
	if e.QuiescentBy > 0 {
		out = append(out, ExpectCheck{Section: "quiescent_by"})
	}
	for _, ref := range keys.Sorted(e.History) {
		want := e.History[ref]
		if want.Marker == nil && want.Partial == nil && len(want.Contains) == 0 && len(want.Absent) == 0 {
			// Nothing to check but that the agent is there.
			out = append(out, ExpectCheck{Section: "history", Ref: ref})
			continue
		}
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"marker", want.Marker != nil},
			{"partial", want.Partial != nil},
			{"contains", len(want.Contains) > 0},
			{"absent", len(want.Absent) > 0},
		} {
			if f.set {
				out = append(out, ExpectCheck{Section: "history", Ref: ref, Field: f.name})
			}
		}
	}
	return out
}

// ExpectNames lists the names a scenario's expect.schedule_dependent may
// give: every expectation's name, and history.REF for all of REF's
// history checks at once.
func (s *Scenario) ExpectNames() []string {
	var names []string
	for _, c := range s.Expect.Checks() {
		if g := c.Group(); g != c.Name() && !slices.Contains(names, g) {
			names = append(names, g)
		}
		names = append(names, c.Name())
	}
	return names
}

// Marked reports that e marks check c as holding on some schedules only
// (by its name or its group's).
func (e Expect) Marked(c ExpectCheck) bool {
	marks := e.ScheduleDependent
	return slices.Contains(marks, c.Name()) || slices.Contains(marks, c.Group())
}

// Required is e without the expectations it marks schedule-dependent:
// what must hold on every schedule.
func (e Expect) Required() Expect {
	var r Expect
	for _, c := range e.Checks() {
		if e.Marked(c) {
			continue
		}
		switch c.Section {
		case "outcomes":
			r.Outcomes = setKey(r.Outcomes, c.Ref, e.Outcomes[c.Ref])
		case "llm_requests":
			r.LLMRequests = setKey(r.LLMRequests, c.Ref, e.LLMRequests[c.Ref])
		case "quiescent_by":
			r.QuiescentBy = e.QuiescentBy
		case "history":
			h, want := r.History[c.Ref], e.History[c.Ref]
			switch c.Field {
			case "marker":
				h.Marker = want.Marker
			case "partial":
				h.Partial = want.Partial
			case "contains":
				h.Contains = want.Contains
			case "absent":
				h.Absent = want.Absent
			}
			r.History = setKey(r.History, c.Ref, h)
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
