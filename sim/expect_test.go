package sim

import (
	"slices"
	"strings"
	"testing"
	"time"
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

// TestExpectVerdicts: a run judges each expectation under its name, says
// which are schedule-dependent, and tags each expectation violation with
// its name; a permuted run — another order — does not fail a
// schedule-dependent one.
func TestExpectVerdicts(t *testing.T) {
	s := byName(t, "same-instant-cancel-and-timeout").Clone()
	s.Schedule = []int{1} // the timeout first: the dependent ones fail
	res := mustRun(t, s, Options{})
	var names []string
	for _, v := range res.Expectations {
		names = append(names, v.Name)
		if dep := v.Name != "llm_requests.main"; v.ScheduleDependent != dep {
			t.Errorf("%s: schedule-dependent %v", v.Name, v.ScheduleDependent)
		}
		if v.Held == (len(v.Failures) > 0) {
			t.Errorf("%s: held %v with failures %v", v.Name, v.Held, v.Failures)
		}
	}
	if !slices.Equal(names, []string{"outcomes.main", "llm_requests.main", "history.main.marker", "history.main.contains", "history.main.absent"}) {
		t.Fatalf("verdicts %v", names)
	}
	var tagged []string
	for _, v := range res.Violations {
		if v.Invariant != Expectation || !strings.HasPrefix(v.Detail, v.Expect+": ") {
			t.Errorf("violation %v tagged %q", v, v.Expect)
		}
		tagged = append(tagged, v.Expect)
	}
	if !slices.Equal(tagged, []string{"outcomes.main", "history.main.contains", "history.main.absent"}) {
		t.Fatalf("violations tagged %v", tagged)
	}
	// Permuted, the same order fails nothing: every expectation that
	// failed is schedule-dependent.
	res = mustRun(t, s, Options{Permute: true})
	for _, v := range res.Violations {
		t.Errorf("permuted: %v", v)
	}
	// An agent missing from the run is told once for all its history
	// checks.
	c := byName(t, "same-instant-cancel-and-timeout").Clone()
	c.Agents["ghost"] = Script{{Text: "boo"}}
	c.Expect.History["ghost"] = HistoryExpect{Contains: []string{"a"}, Absent: []string{"b"}}
	res = mustRun(t, c, Options{})
	n := 0
	for _, v := range res.Violations {
		if strings.HasPrefix(v.Detail, "history.ghost: no such agent") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("a missing agent told %d times: %v", n, res.Violations)
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

// TestAppendExpectState: what the expectations read of the past is in
// the encoding — the requests made, up to one past the number expected —
// and nothing when the scenario expects nothing of it.
func TestAppendExpectState(t *testing.T) {
	base := byName(t, "cancel-single-child").Clone() // llm_requests: main 2, fast 2, slow 1
	enc := func(want map[string]int, by time.Duration) []byte {
		s := base.Clone()
		s.Expect.LLMRequests, s.Expect.QuiescentBy = want, by
		m, err := New(s, Options{NoTrace: true})
		if err != nil {
			t.Fatal(err)
		}
		for m.Step() {
		}
		return m.AppendExpectState(nil)
	}
	if b := enc(nil, 0); len(b) != 0 {
		t.Fatalf("no expectation of the past, encoding %v", b)
	}
	// main made 2 requests: expecting none, any count past 0 encodes
	// alike; expecting 1, 2 or 5, the count is 2.
	a, b, c, d := enc(map[string]int{"main": 0}, 0), enc(map[string]int{"main": 1}, 0), enc(map[string]int{"main": 2}, 0), enc(map[string]int{"main": 5}, 0)
	if string(b) != string(c) || string(c) != string(d) || string(a) == string(b) {
		t.Fatalf("encodings %v %v %v %v", a, b, c, d)
	}
	// Quiescent at 4.305s: a bound before it and one after differ, two
	// after it do not.
	early, late, later := enc(nil, time.Second), enc(nil, 5*time.Second), enc(nil, time.Minute)
	if string(early) == string(late) || string(late) != string(later) {
		t.Fatalf("quiescent_by encodings %v %v %v", early, late, later)
	}
}
