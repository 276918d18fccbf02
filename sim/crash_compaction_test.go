package sim_test

import (
	"testing"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
)

// TestCrashMidCompaction: a host that crashes while a compaction's summary
// streams — after each of its steps — recovers with the history exactly as
// it was before the compaction (I36 judges every step), asks the same
// compaction again, gets the same summary, and ends with the tree the
// uncrashed run ends with (docs/semantics.md, "Compaction" and
// "Expectations under a crash").
func TestCrashMidCompaction(t *testing.T) {
	s := loadEmbedded(t, "compaction-crash-recovers")
	var during []int // the steps after which a compaction's request is live
	step, compacting := 0, kernel.OpID(0)
	ref, refTree := runTree(t, s, sim.Options{Observe: func(si sim.StepInfo) {
		step++
		for _, e := range si.Effects {
			switch {
			case e.Kind == kernel.EffStartLLM && e.Compact:
				compacting = e.Op
			case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeOpEnded && e.Life.Op == compacting:
				compacting = 0
			}
		}
		if compacting != 0 {
			during = append(during, step)
		}
	}})
	if !ref.Passed {
		t.Fatalf("uncrashed: %v", ref.Violations)
	}
	if len(during) < 5 {
		t.Fatalf("the compaction streams over %d steps; the scenario must stream it longer", len(during))
	}
	for _, k := range during {
		recoveries, restarts := 0, 0
		r, tree := runTree(t, s, sim.Options{CrashAt: []int{k}, Observe: func(si sim.StepInfo) {
			if si.Event.Kind != kernel.EvRecover {
				return
			}
			recoveries++
			for _, e := range si.Effects {
				if e.Kind == kernel.EffStartLLM && e.Compact {
					restarts++
				}
			}
		}})
		if !r.Passed {
			t.Errorf("crashed after step %d: %v", k, r.Violations)
		}
		if recoveries != 1 || restarts != 1 {
			t.Errorf("crashed after step %d: %d recoveries asked %d compaction(s) again, want 1 and 1", k, recoveries, restarts)
		}
		if tree != refTree {
			t.Errorf("crashed after step %d, the run ends with another tree: %s", k, firstDiff(tree, refTree))
		}
	}
	t.Logf("crashed after each of %d steps of the compaction: every run recovered it and ended as the uncrashed one", len(during))
}
