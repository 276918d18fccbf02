package sim_test

import (
	"strings"
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
	"github.com/escapement/escapement/sim/sweep"
)

// TestSweepCrashEvery: a sweep that also crashes each world after every
// step (one crash per run) breaks no invariant on the real kernel, and
// catches each broken recovery (CrashLoops) within a few hundred worlds, the
// violation naming the loop's invariant and the shrunk world carrying the
// flags that reproduce it — the sweep's --crash-every is the crash
// property at scale, not a run that merely survives crashes.
func TestSweepCrashEvery(t *testing.T) {
	p := sweep.Plan{From: 1, Seeds: 60, Depth: 4, Shards: 1, CrashEvery: 1}
	g := p.Generator()
	crashes := 0
	for _, seed := range p.SeedList() {
		w, err := sweep.RunWorld(g, p, seed, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", seed, w.Violations[0], w.Shrunk.YAML())
		}
		if w.Crashes == 0 {
			t.Fatalf("seed %d: not crashed", seed)
		}
		crashes += w.Crashes
	}
	t.Logf("%d worlds, %d crashed runs, no violation", len(p.SeedList()), crashes)
	// The tools every generated world names (gen: t0, t1, t2), for the
	// loop that treats a scenario's every tool as idempotent.
	generated := &scenario.Scenario{Tools: map[string]scenario.ToolSpec{"t0": {}, "t1": {}, "t2": {}}}
	for _, cl := range sim.CrashLoops() {
		t.Run(string(cl.Invariant)+"/"+cl.Failure[:20], func(t *testing.T) {
			p := sweep.Plan{From: 1, Seeds: 300, Depth: 4, Shards: 1, CrashEvery: 1}
			g := p.Generator()
			for _, seed := range p.SeedList() {
				w, err := sweep.RunWorld(g, p, seed, cl.Core(generated))
				if err != nil {
					t.Fatal(err)
				}
				if len(w.Violations) == 0 || w.Violations[0].Invariant != cl.Invariant {
					continue
				}
				if !strings.Contains(w.SimFlags, "--crash-at ") || !strings.Contains(w.Shrunk.About, w.SimFlags) {
					t.Fatalf("seed %d: the shrunk world does not say how to crash it: flags %q, about %q", seed, w.SimFlags, w.Shrunk.About)
				}
				t.Logf("%s: caught at seed %d after %d crashed run(s), shrunk to %d event(s) (%s)", cl.Failure, seed, w.Crashes, w.ShrunkEvents, w.SimFlags)
				return
			}
			t.Fatalf("%s: a sweep of 300 worlds crashed after every step did not catch it (%s)", cl.Failure, cl.Invariant)
		})
	}
}
