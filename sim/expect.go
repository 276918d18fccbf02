package sim

import (
	"strings"

	"github.com/escapement/escapement/kernel"
)

// checkExpect adds an "expect" violation for every unmet expectation.
func checkExpect(s *Scenario, c Core, o *oracle, res *Result) {
	e := s.Expect
	o.m.now = res.QuiescentAt // the time expectations are judged at
	fail := func(format string, args ...any) { o.violate(Expectation, kernel.NoAgent, format, args...) }
	for _, ref := range sortedKeys(e.Outcomes) {
		id, ok := findAgent(c, ref)
		if !ok {
			fail("outcomes.%s: no such agent in the run", ref)
			continue
		}
		if got := c.View(id).Outcome.String(); got != e.Outcomes[ref] {
			fail("outcomes.%s: %s, want %s", ref, got, e.Outcomes[ref])
		}
	}
	for _, ref := range sortedKeys(e.LLMRequests) {
		id, ok := findAgent(c, ref)
		got := 0
		if ok { // finish observed every agent
			got = o.m.agents[id].asked()
		}
		if !ok && e.LLMRequests[ref] != 0 {
			fail("llm_requests.%s: no such agent in the run", ref)
			continue
		}
		if got != e.LLMRequests[ref] {
			fail("llm_requests.%s: %d, want %d", ref, got, e.LLMRequests[ref])
		}
	}
	if e.QuiescentBy > 0 && res.QuiescentAt > e.QuiescentBy {
		fail("quiescent_by: quiescent at %v, want by %v", res.QuiescentAt, e.QuiescentBy)
	}
	for _, ref := range sortedKeys(e.History) {
		id, ok := findAgent(c, ref)
		if !ok {
			fail("history.%s: no such agent in the run", ref)
			continue
		}
		h := c.View(id).History
		want := e.History[ref]
		var marker, partial bool
		for _, m := range h {
			marker = marker || m.Marker
			partial = partial || m.Partial
		}
		if want.Marker != nil && *want.Marker != marker {
			fail("history.%s.marker: %v, want %v", ref, marker, *want.Marker)
		}
		if want.Partial != nil && *want.Partial != partial {
			fail("history.%s.partial: %v, want %v", ref, partial, *want.Partial)
		}
		for _, sub := range want.Contains {
			if !historyContains(h, sub) {
				fail("history.%s.contains: no message contains %q", ref, sub)
			}
		}
		for _, sub := range want.Absent {
			if historyContains(h, sub) {
				fail("history.%s.absent: a message contains %q", ref, sub)
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
