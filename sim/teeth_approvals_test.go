package sim_test

import (
	"strings"
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
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
			teethCatches(t, g, bl.Failure, bl.Invariant, sim.Options{Core: bl.Core})
		})
	}
}
