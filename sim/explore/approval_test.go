package explore

import (
	"strings"
	"testing"
)

// TestExploreApprovalScenarios: every embedded approval scenario explores
// exhaustively — every order of one instant's events, and every input
// (decisions among them) moved to every anchor — with no violation and
// every expectation not marked schedule-dependent holding
// (docs/semantics.md, "Approvals", "Exploration").
func TestExploreApprovalScenarios(t *testing.T) {
	n := 0
	for _, s := range suite(t) {
		if !strings.HasPrefix(s.Name, "approval-") {
			continue
		}
		n++
		r, err := Scenario(s, Options{MaxInputs: -1})
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation != nil || r.Stopped != "" || r.Schedules < 2 {
			t.Errorf("%s: want an exhaustive clean exploration of several schedules: %+v", s.Name, r)
		}
	}
	if n < 10 {
		t.Fatalf("only %d approval scenarios in the suite", n)
	}
}
