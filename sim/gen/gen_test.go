package gen

import (
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
)

// TestExamplesAreValid: generated worlds validate, load back from their
// canonical YAML, and the same seed gives the same world.
func TestExamplesAreValid(t *testing.T) {
	g := World(DefaultOptions(6))
	agents, events := 0, 0
	for seed := 0; seed < 200; seed++ {
		s := g.Example(seed)
		if err := s.Validate(); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, s.YAML())
		}
		if _, err := scenario.Load("gen.yaml", s.YAML()); err != nil {
			t.Fatalf("seed %d: canonical form does not load: %v", seed, err)
		}
		if string(g.Example(seed).YAML()) != string(s.YAML()) {
			t.Fatalf("seed %d: not deterministic", seed)
		}
		r, err := sim.Run(s, sim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		agents += r.Agents
		events += r.Events
		if !r.Passed {
			t.Fatalf("seed %d: %v\n%s", seed, r.Violations, s.YAML())
		}
	}
	t.Logf("200 worlds: %.1f agents, %.1f events on average", float64(agents)/200, float64(events)/200)
}
