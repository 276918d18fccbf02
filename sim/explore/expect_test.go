package explore

import (
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// TestExploreFailsAFailingExpectation: a scenario whose expectation fails
// in a plain run fails its exploration too (it once passed: exploration
// judged the invariants only), naming the expectation; the scenario it
// writes fails the same expectation under a plain run.
func TestExploreFailsAFailingExpectation(t *testing.T) {
	s := byName(t, "cancel-single-child").Clone()
	s.Expect.Outcomes["slow"] = "completed" // it is interrupted
	if res, err := sim.Run(s, sim.Options{}); err != nil || res.Passed {
		t.Fatalf("the plain run must fail the expectation: %v %v", res, err)
	}
	for _, moved := range []int{0, 2} {
		rep, err := Scenario(s, Options{MaxInputs: moved})
		if err != nil {
			t.Fatal(err)
		}
		v := rep.Violation
		if v == nil || v.First.Invariant != oracle.Expectation || v.First.Expect != "outcomes.slow" || rep.Passed() {
			t.Fatalf("moved=%d: explore passed or named something else: %+v", moved, rep)
		}
		reproduces(t, v, "outcomes.slow")
	}
}

// reproduces: the scenario v wrote, read back from its YAML, fails the
// expectation name under a plain run.
func reproduces(t *testing.T, v *Violation, name string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Load(v.Scenario.Name+".yaml", v.Scenario.YAML())
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(s, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range res.Violations {
		if got.Invariant == oracle.Expectation && got.Expect == name {
			return s
		}
	}
	t.Fatalf("the written scenario does not fail %s: %v\n%s", name, res.Violations, v.Scenario.YAML())
	return nil
}

// TestExploreCatchesAnExpectationOneOrderBreaks: an expectation that holds
// in the scenario's own order but not in another order of one instant —
// the scenario passes a plain run — fails exploration, and the written
// scenario's schedule is the order that breaks it. Marked
// schedule-dependent, it is counted instead: on how many schedules (with
// every input at its instant) it held, beside the required ones, which
// held on all.
func TestExploreCatchesAnExpectationOneOrderBreaks(t *testing.T) {
	marked := byName(t, "same-instant-cancel-and-timeout")
	s := marked.Clone()
	s.Expect.ScheduleDependent = nil
	if res, err := sim.Run(s, sim.Options{}); err != nil || !res.Passed {
		t.Fatalf("the plain run must pass: %v %v", res, err)
	}
	rep, err := Scenario(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := rep.Violation
	if v == nil || v.First.Expect != "outcomes.main" {
		t.Fatalf("explore missed the order that breaks outcomes.main: %+v", rep)
	}
	w := reproduces(t, v, "outcomes.main")
	if len(w.Schedule) == 0 {
		t.Fatalf("the written scenario has no schedule:\n%s", v.Scenario.YAML())
	}
	plain := w.Clone()
	plain.Schedule = nil
	if res, _ := sim.Run(plain, sim.Options{}); !res.Passed {
		t.Fatalf("without its schedule the written scenario fails too: %v", res.Violations)
	}

	rep, err = Scenario(marked, Options{MaxInputs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Passed() || rep.Stopped != "" {
		t.Fatalf("the marked scenario: %+v", rep)
	}
	want := map[string][2]int{ // held, of
		"outcomes.main":         {1, 2},
		"llm_requests.main":     {2, 2},
		"history.main.marker":   {2, 2},
		"history.main.contains": {1, 2},
		"history.main.absent":   {1, 2},
	}
	if len(rep.Expectations) != len(want) {
		t.Fatalf("tallies: %+v", rep.Expectations)
	}
	for _, e := range rep.Expectations {
		w, ok := want[e.Name]
		if !ok || e.Held != w[0] || e.Of != w[1] || e.ScheduleDependent != (e.Name != "llm_requests.main") {
			t.Errorf("%+v, want held %d of %d", e, w[0], w[1])
		}
	}
}

// TestExploreUnmetExpectation: a schedule-dependent expectation that holds
// on no schedule fails the exploration (Report.Unmet), which was
// exhaustive; one that holds on some passes.
func TestExploreUnmetExpectation(t *testing.T) {
	s := byName(t, "same-instant-cancel-and-timeout").Clone()
	s.Expect.Outcomes["main"] = "failed"
	rep, err := Scenario(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if u := rep.Unmet(); rep.Passed() || rep.Violation != nil || rep.Stopped != "" || len(u) != 1 || u[0].Name != "outcomes.main" || u[0].Of != 2 {
		t.Fatalf("want exactly outcomes.main unmet on 2 schedules: %+v", rep)
	}
}

// TestExploreJudgesOnlyScriptedSchedules: expectations are the
// scenario's for its inputs where it put them; a schedule that moves an
// input is judged by the oracle alone (cancel-single-child's cancel, moved
// after the slow child answered, leaves it completed — no failure), and
// the tallies count only the schedules that moved none.
func TestExploreJudgesOnlyScriptedSchedules(t *testing.T) {
	s := byName(t, "cancel-single-child")
	scripted, err := Scenario(s, Options{MaxInputs: 0})
	if err != nil {
		t.Fatal(err)
	}
	moved, err := Scenario(s, Options{MaxInputs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !scripted.Passed() || !moved.Passed() || moved.Schedules <= scripted.Schedules {
		t.Fatalf("scripted %+v\nmoved %+v", scripted, moved)
	}
	for i, e := range moved.Expectations {
		if e != scripted.Expectations[i] || e.Held != e.Of {
			t.Errorf("moved %+v, scripted %+v", e, scripted.Expectations[i])
		}
	}
}
