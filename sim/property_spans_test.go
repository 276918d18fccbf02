package sim_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"pgregory.net/rapid"
)

// TestSpanTeethRapid: each broken span derivation runs over the real
// kernel against random worlds; rapid must find an I25 violation within
// teethRounds rounds of checks and shrink the world to a small one (the
// span derivations' counterpart of TestOracleTeethRapid).
func TestSpanTeethRapid(t *testing.T) {
	for _, sl := range sim.SpanLoops() {
		t.Run(sl.Name, func(t *testing.T) {
			if why := sl.ScenarioOnly(); why != "" {
				t.Skip(why)
			}
			rec := &recordingTB{name: "spans_" + sl.Name}
			t.Cleanup(func() { os.RemoveAll(filepath.Join("testdata", "rapid", rec.name)) })
			start := time.Now()
			prop := func(rt *rapid.T) {
				s := gen.World(teethOptions).Draw(rt, "world")
				r, err := sim.Run(s, sim.Options{Spans: sl.Derive})
				if err != nil {
					rt.Fatal(err)
				}
				for _, v := range r.Violations {
					if v.Invariant == sim.SpansEnd {
						scripts, replies, calls, inputs, faults := s.Size()
						rt.Logf("SHRUNK agents=%d events=%d scripts=%d replies=%d calls=%d inputs=%d faults=%d\n%s",
							r.Agents, r.Events, scripts, replies, calls, inputs, faults, s.YAML())
						rt.Fatalf("%s: %s", sl.Failure, v)
					}
				}
			}
			checks, agents, events, size := teethHunt(t, rec, prop, fmt.Sprintf("%s: no I25 violation", sl.Failure))
			t.Logf("%s → found after %d checks, shrunk to %d agent(s), %d events (scripts=%s replies=%s calls=%s inputs=%s faults=%s) in %v",
				sl.Failure, checks, agents, events, size[3], size[4], size[5], size[6], size[7], time.Since(start).Round(time.Millisecond))
			if agents > maxShrunkAgents || events > maxShrunkEvents {
				t.Errorf("the shrunk counterexample is not small: %d agents, %d events", agents, events)
			}
		})
	}
}
