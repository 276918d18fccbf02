package explore

import (
	"os"
	"strconv"
	"testing"
	"time"

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

func TestProbeSmall(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EXPLORE_SMALL"))
	if n == 0 {
		t.Skip()
	}
	agents, _ := strconv.Atoi(os.Getenv("EXPLORE_AGENTS"))
	tot := Report{}
	for _, w := range Worlds(agents) {
		nudge, _ := time.ParseDuration(os.Getenv("EXPLORE_NUDGE"))
		rep, err := Scenario(w.Scenario, Options{Alphabet: w.Alphabet, MaxInputs: n, MaxStates: 5000000, Nudge: nudge})
		if err != nil {
			t.Fatal(err)
		}
		tot.States += rep.States
		tot.Replays += rep.Replays
		tot.Transitions += rep.Transitions
		t.Logf("%-12s sched=%d states=%d trans=%d rev=%d slept=%d depth=%d replays=%d stop=%q viol=%v", w.Tree, rep.Schedules, rep.States, rep.Transitions, rep.Revisits, rep.Slept, rep.Depth, rep.Replays, rep.Stopped, rep.Violation != nil)
		if rep.Violation != nil {
			t.Logf("  %v", rep.Violation.First)
		}
	}
	t.Logf("total states=%d trans=%d replays=%d", tot.States, tot.Transitions, tot.Replays)
}
