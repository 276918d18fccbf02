package sim_test

import (
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
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
			run := func(s *scenario.Scenario) *sim.Result {
				r, err := sim.Run(s, sim.Options{Spans: sl.Derive})
				if err != nil {
					t.Fatalf("%s: %v\n%s", sl.Failure, err, s.YAML())
				}
				return r
			}
			seed, ok := teethFind(func(seed int) bool { return caughtFirst(run(g.Example(seed)), oracle.SpansEnd) })
			if !ok {
				t.Fatalf("%s: no world of seeds 1..%d fails with %s first", sl.Failure, teethSeeds, oracle.SpansEnd)
			}
			shrunk := sim.Shrink(g.Example(seed), func(s *scenario.Scenario) bool { return caughtFirst(run(s), oracle.SpansEnd) }, teethShrinkBudget)
			r := run(shrunk)
			if !caughtFirst(r, oracle.SpansEnd) {
				t.Fatalf("%s: the shrunk world no longer fails with %s first: %v\n%s", sl.Failure, oracle.SpansEnd, r.Violations, shrunk.YAML())
			}
			t.Logf("%s → %s; world of seed %d, shrunk to %s", sl.Failure, r.Violations[0], seed, shrunkSize(shrunk, r))
			if r.Agents > maxShrunkAgents || r.Events > maxShrunkEvents {
				t.Errorf("the shrunk counterexample is not small: %d agents, %d events\n%s", r.Agents, r.Events, shrunk.YAML())
			}
		})
	}
}
