package scenario_test

import (
	"testing"

	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/scenario"
)

// benchWorlds are what the emitter renders in practice: the embedded suite,
// and generated depth-6 worlds as a sweep draws them.
func benchWorlds(tb testing.TB) (suite, generated []*scenario.Scenario) {
	tb.Helper()
	suite, err := scenario.LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		tb.Fatal(err)
	}
	g := gen.World(gen.DefaultOptions(6))
	for seed := range 200 {
		generated = append(generated, g.Example(seed))
	}
	return suite, generated
}

// BenchmarkScenarioYAML: the canonical rendering every run does for its
// trace header, per scenario. (The hand-written emitter the format
// replaced stayed beside it as test code up to commit 5be8e99, whose
// version of this benchmark timed both in every iteration: the derived
// one took 0.62x the time on the suite and 0.86x on generated worlds,
// medians of -count 10, with a tenth of the allocations.)
func BenchmarkScenarioYAML(b *testing.B) {
	suite, generated := benchWorlds(b)
	for _, set := range []struct {
		name string
		ss   []*scenario.Scenario
	}{{"suite", suite}, {"generated", generated}} {
		b.Run(set.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for _, s := range set.ss {
					_ = s.YAML()
				}
				n += len(set.ss)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/scenario")
		})
	}
}
