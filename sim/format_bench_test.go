package sim_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
)

// benchWorlds are what the emitter renders in practice: the embedded suite,
// and generated depth-6 worlds as a sweep draws them.
func benchWorlds(tb testing.TB) (suite, generated []*sim.Scenario) {
	tb.Helper()
	suite, err := sim.LoadFS(scenarios.FS, ".", "scenarios")
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
// trace header, per scenario, beside the hand-written emitter it replaced.
// Each iteration renders the set with both, timed separately, so their
// ratio does not move with a shared machine's load.
func BenchmarkScenarioYAML(b *testing.B) {
	suite, generated := benchWorlds(b)
	for _, set := range []struct {
		name string
		ss   []*sim.Scenario
	}{{"suite", suite}, {"generated", generated}} {
		b.Run(set.name, func(b *testing.B) {
			var format, legacy time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				for _, s := range set.ss {
					_ = s.YAML()
				}
				t1 := time.Now()
				for _, s := range set.ss {
					_ = sim.LegacyYAML(s)
				}
				t2 := time.Now()
				format, legacy, n = format+t1.Sub(t0), legacy+t2.Sub(t1), n+len(set.ss)
			}
			b.ReportMetric(float64(format.Nanoseconds())/float64(n), "format-ns/scenario")
			b.ReportMetric(float64(legacy.Nanoseconds())/float64(n), "legacy-ns/scenario")
			b.ReportMetric(float64(format)/float64(legacy), "ratio")
		})
	}
}

// BenchmarkScenarioYAMLAllocs: the same renderings one at a time, for
// their allocations.
func BenchmarkScenarioYAMLAllocs(b *testing.B) {
	_, generated := benchWorlds(b)
	for _, emit := range []struct {
		name string
		f    func(*sim.Scenario) []byte
	}{{"format", (*sim.Scenario).YAML}, {"legacy", sim.LegacyYAML}} {
		b.Run(emit.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, s := range generated {
					_ = emit.f(s)
				}
			}
		})
	}
}

// TestYAMLMatchesLegacy: the canonical form is byte for byte what the
// hand-written emitter wrote, on the suite and on generated worlds.
func TestYAMLMatchesLegacy(t *testing.T) {
	suite, generated := benchWorlds(t)
	for _, s := range append(suite, generated...) {
		if got, want := s.YAML(), sim.LegacyYAML(s); !bytes.Equal(got, want) {
			t.Fatalf("%s: canonical YAML differs\n--- got\n%s\n--- want\n%s", s.Name, got, want)
		}
	}
}
