package explore

import (
	"os"
	"strconv"
	"testing"

	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
)

func suite(t testing.TB) []*sim.Scenario {
	t.Helper()
	ss, err := sim.LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func TestProbeSuite(t *testing.T) {
	if os.Getenv("EXPLORE_PROBE") == "" {
		t.Skip()
	}
	mi, _ := strconv.Atoi(os.Getenv("EXPLORE_PROBE"))
	for _, s := range suite(t) {
		rep, err := Scenario(s, Options{MaxInputs: mi, MaxStates: 300000})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-40s sched=%d states=%d trans=%d rev=%d slept=%d depth=%d replays=%d stop=%q viol=%v", s.Name, rep.Schedules, rep.States, rep.Transitions, rep.Revisits, rep.Slept, rep.Depth, rep.Replays, rep.Stopped, rep.Violation != nil)
		if rep.Violation != nil {
			t.Logf("  %v", rep.Violation.First)
		}
	}
}
