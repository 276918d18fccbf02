package sim

import (
	"strings"
	"testing"

	"github.com/escapement/escapement/sim/scenario"
)

// TestScheduleFixesOrder: a scenario's schedule picks which of the events
// due at one instant goes first — here the first-token deadline before the
// Esc pressed at that instant, so the turn times out and the Esc finds it
// Interrupted — and a round trip through YAML (a trace header's copy)
// keeps it; a choice past the events due is noted in the trace. Without it the Esc goes first (the scenario's own
// expectation).
func TestScheduleFixesOrder(t *testing.T) {
	s := byName(t, "same-instant-cancel-and-timeout").Clone()
	s.Expect = scenario.Expect{}
	plain := mustRun(t, s, Options{})
	if plain.Outcomes[scenario.RootScript] != "interrupted" {
		t.Fatalf("plain order: %s", plain.Outcomes[scenario.RootScript])
	}
	s.Schedule = []int{1}
	re, err := scenario.Load("s.yaml", s.YAML())
	if err != nil {
		t.Fatal(err)
	}
	if len(re.Schedule) != 1 || re.Schedule[0] != 1 {
		t.Fatalf("schedule lost in YAML: %v\n%s", re.Schedule, s.YAML())
	}
	var trace strings.Builder
	r := mustRun(t, re, Options{Trace: &trace})
	if !r.Passed || r.Outcomes[scenario.RootScript] != "timed_out" {
		t.Fatalf("scheduled order: %s %v", r.Outcomes[scenario.RootScript], r.Violations)
	}
	// A choice past the events due is noted in the trace, and the first
	// goes.
	s.Schedule = []int{7}
	trace.Reset()
	r = mustRun(t, s, Options{Trace: &trace})
	if r.Outcomes[scenario.RootScript] != "interrupted" || !strings.Contains(trace.String(), "schedule: choice 1 is 7") {
		t.Fatalf("out-of-range choice: %s, trace lacks the note", r.Outcomes[scenario.RootScript])
	}
	s.Schedule = []int{-1}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "schedule") {
		t.Fatalf("a negative choice: %v", err)
	}
}
