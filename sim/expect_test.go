package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

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
		if v.Invariant != oracle.Expectation || !strings.HasPrefix(v.Detail, v.Expect+": ") {
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
	c.Agents["ghost"] = scenario.Script{{Text: "boo"}}
	c.Expect.History["ghost"] = scenario.HistoryExpect{Contains: []string{"a"}, Absent: []string{"b"}}
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
