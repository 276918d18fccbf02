package oracle

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
// does not hold, by what the oracle observed: each agent's last view and
// requests, and when the tree became quiescent.
func (o *Oracle) judgeExpect(e scenario.Expect, c scenario.ExpectCheck, quiescentAt time.Duration, fail func(format string, args ...any)) {
	ref := c.Ref
	switch c.Section {
	case "outcomes":
		id, ok := o.Find(ref)
		if !ok {
			fail("outcomes.%s: no such agent in the run", ref)
			return
		}
		if got := o.m.agents[id].view.Outcome.String(); got != e.Outcomes[ref] {
			fail("outcomes.%s: %s, want %s", ref, got, e.Outcomes[ref])
		}
	case "llm_requests":
		id, ok := o.Find(ref)
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
		if quiescentAt > e.QuiescentBy {
			fail("quiescent_by: quiescent at %v, want by %v", quiescentAt, e.QuiescentBy)
		}
	case "history":
		id, ok := o.Find(ref)
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

// JudgeExpect judges every expectation of e after Finish, at quiescentAt
// (when the tree last became quiescent), and returns the verdicts in
// order, adding an Expectation violation for each failed check. A
// schedule-dependent expectation describes the scenario's own order: a
// permuted run judges it without failing.
func (o *Oracle) JudgeExpect(e scenario.Expect, quiescentAt time.Duration, permuted bool) []ExpectVerdict {
	o.m.now = quiescentAt // the time expectations are judged at
	var told []string     // an agent missing from the run is told once for all its history checks
	var out []ExpectVerdict
	for _, ch := range e.Checks() {
		v := ExpectVerdict{Name: ch.Name(), ScheduleDependent: e.Marked(ch)}
		o.judgeExpect(e, ch, quiescentAt, func(format string, args ...any) {
			v.Failures = append(v.Failures, fmt.Sprintf(format, args...))
		})
		v.Held = len(v.Failures) == 0
		out = append(out, v)
		if v.ScheduleDependent && permuted {
			continue
		}
		for _, f := range v.Failures {
			if slices.Contains(told, f) {
				continue
			}
			told = append(told, f)
			o.Violate(Expectation, kernel.NoAgent, "%s", f)
			if n := len(o.out); n > 0 && o.out[n-1].Detail == f {
				o.out[n-1].Expect = v.Name
			}
		}
	}
	return out
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
