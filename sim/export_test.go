package sim

import (
	"slices"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// BrokenLoop is a deliberately broken agent loop for one failure of the
// catalogue, exported to the property suites (package sim_test), which run
// it against random worlds. Test code only.
type BrokenLoop struct {
	Scenario  string
	Failure   string
	Invariant oracle.Invariant
	Core      CoreFactory
}

// BrokenLoops returns one broken loop per F-bug (F13 has two).
func BrokenLoops() []BrokenLoop { return brokenLoops() }

// InvariantLoops returns the broken loops of the invariants no catalogue
// failure breaks first.
func InvariantLoops() []BrokenLoop { return invariantLoops() }

// Depth6Scenario is BenchmarkSimEvents' world, for benchmarks outside the
// package that measure against it (BenchmarkSweepVsSim).
func Depth6Scenario() *scenario.Scenario { return depth6Scenario() }

// RareLoops returns the broken loops that go wrong only in one rare
// ordering or instant (their Scenario is empty: the test builds the
// world).
func RareLoops() []BrokenLoop { return rareLoops() }

// CancellingRequests lists, in op order, the requests the kernel has
// cancelled and that have not ended yet (their acknowledgement is still on
// its way), so a property can send one a late retry or chunk.
func (m *Sim) CancellingRequests() []kernel.OpID {
	var ids []kernel.OpID
	for id, op := range m.w.ops { // determinism: sorted below
		if !op.tool && op.cancelled {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
