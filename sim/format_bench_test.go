package sim_test

import (
	"bytes"
	"testing"

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
// trace header, per scenario, beside the hand-written emitter it replaced
// (in the same run, so the ratio is not the machine's load drift).
func BenchmarkScenarioYAML(b *testing.B) {
	suite, generated := benchWorlds(b)
	for _, set := range []struct {
		name string
		ss   []*sim.Scenario
	}{{"suite", suite}, {"generated", generated}} {
		for _, emit := range []struct {
			name string
			f    func(*sim.Scenario) []byte
		}{{"format", (*sim.Scenario).YAML}, {"legacy", sim.LegacyYAML}} {
			b.Run(set.name+"/"+emit.name, func(b *testing.B) {
				b.ReportAllocs()
				n, bytes := 0, 0
				for b.Loop() {
					for _, s := range set.ss {
						bytes += len(emit.f(s))
					}
					n += len(set.ss)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/scenario")
				b.ReportMetric(float64(bytes)/float64(n), "B/scenario")
			})
		}
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
