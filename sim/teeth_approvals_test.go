package sim_test

import (
	"strings"
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/scenario"
)

// TestApprovalTeethRapid: each broken loop of the approval invariants
// (I27–I31) fails, its invariant named first, a world of seeds
// 1..teethSeeds of the generator TestOracleTeethRapid searches — worlds
// whose tools ask and whose person decides, late, twice, for other
// arguments, after a cancel (sim/gen) — and sim.Shrink brings it down to
// a small world, the same way on every run.
func TestApprovalTeethRapid(t *testing.T) {
	g := gen.World(teethOptions)
	for _, bl := range sim.ApprovalLoops() {
		id := bl.Failure[:strings.Index(bl.Failure, ":")]
		t.Run(id+"/"+bl.Scenario, func(t *testing.T) {
			t.Parallel()
			run := func(s *scenario.Scenario) *sim.Result {
				r, err := sim.Run(s, sim.Options{Core: bl.Core})
				if err != nil {
					t.Fatalf("%s: %v\n%s", bl.Failure, err, s.YAML())
				}
				return r
			}
			seed, ok := teethFind(func(seed int) bool { return caughtFirst(run(g.Example(seed)), bl.Invariant) })
			if !ok {
				t.Fatalf("%s: no world of seeds 1..%d fails with %s first", bl.Failure, teethSeeds, bl.Invariant)
			}
			shrunk := sim.Shrink(g.Example(seed), func(s *scenario.Scenario) bool { return caughtFirst(run(s), bl.Invariant) }, teethShrinkBudget)
			r := run(shrunk)
			if !caughtFirst(r, bl.Invariant) {
				t.Fatalf("%s: the shrunk world no longer fails with %s first: %v\n%s", bl.Failure, bl.Invariant, r.Violations, shrunk.YAML())
			}
			t.Logf("%s → %s; world of seed %d, shrunk to %s", bl.Failure, r.Violations[0], seed, shrunkSize(shrunk, r))
			if r.Agents > maxShrunkAgents || r.Events > maxShrunkEvents {
				t.Errorf("the shrunk counterexample is not small: %d agents, %d events\n%s", r.Agents, r.Events, shrunk.YAML())
			}
		})
	}
}
