package sim_test

import (
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/oracle"
)

// TestSpanTeethRapid: each broken span derivation runs over the real kernel
// against the worlds rapid's generator draws from seeds 1, 2, …: one of
// the first teethSeeds must fail with I25 named first, and sim.Shrink must
// bring it down to a small world that still does — the span derivations'
// counterpart of TestOracleTeethRapid, on the same fixed seeds, so it finds
// the same worlds every run.
func TestSpanTeethRapid(t *testing.T) {
	g := gen.World(teethOptions)
	for _, sl := range sim.SpanLoops() {
		t.Run(sl.Name, func(t *testing.T) {
			if why := sl.ScenarioOnly(); why != "" {
				t.Skip(why)
			}
			t.Parallel()
			teethCatches(t, g, sl.Failure, oracle.SpansEnd, sim.Options{Spans: sl.Derive})
		})
	}
}
