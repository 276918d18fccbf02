package scenario

import (
	"slices"
	"strings"
	"testing"
)

// TestScheduleDependentMarks: expect.schedule_dependent names the
// scenario's expectations (or history.REF for all of an agent's history
// checks); anything else, or a name twice, is refused at its place in the
// file with the names it could have given.
func TestScheduleDependentMarks(t *testing.T) {
	s := byName(t, "same-instant-cancel-and-timeout")
	want := []string{"outcomes.main", "llm_requests.main", "history.main", "history.main.marker", "history.main.contains", "history.main.absent"}
	if got := s.ExpectNames(); !slices.Equal(got, want) {
		t.Fatalf("ExpectNames = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		marks []string
		err   string
	}{
		{[]string{"outcomes.main", "history.main.absent"}, ""},
		{[]string{"outcomes.nobody"}, `expect.schedule_dependent[0]: "outcomes.nobody" names no expectation of this scenario (its expectations: outcomes.main, llm_requests.main, history.main,`},
		{[]string{"quiescent_by"}, `"quiescent_by" names no expectation`},
		{[]string{"history.main", "history.main"}, `expect.schedule_dependent[1]: "history.main" given twice`},
	} {
		c := s.Clone()
		c.Expect.ScheduleDependent = tc.marks
		err := c.Validate()
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%v: %v, want %q", tc.marks, err, tc.err)
		}
	}
	// In a file: the line of the mark.
	src := strings.Replace(string(s.YAML()), "schedule_dependent: [", "schedule_dependent: [outcomes.nobody, ", 1)
	if _, err := Load("x.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), "x.yaml:") || !strings.Contains(err.Error(), "outcomes.nobody") {
		t.Fatalf("a bad mark in a file: %v\n%s", err, src)
	}
}

// TestRequired: what must hold on every schedule is the expectations
// without the schedule-dependent ones, whole or field by field.
func TestRequired(t *testing.T) {
	e := byName(t, "same-instant-cancel-and-timeout").Expect
	r := e.Required()
	if len(r.Outcomes) != 0 || r.LLMRequests["main"] != 1 || len(r.History) != 0 || r.ScheduleDependent != nil {
		t.Fatalf("Required() = %+v", r)
	}
	e.ScheduleDependent = []string{"history.main.absent"}
	r = e.Required()
	h := r.History["main"]
	if r.Outcomes["main"] != "interrupted" || h.Absent != nil || len(h.Contains) != 1 || h.Marker == nil {
		t.Fatalf("Required() = %+v", r)
	}
}
