package sim_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/scenario"
)

// TestTraceHashWithoutFile: a run that only hashes its trace (a sweep's,
// whose writer hashes in smaller blocks) reports the hash of exactly the
// bytes the same run writes to a file.
func TestTraceHashWithoutFile(t *testing.T) {
	worlds := []*scenario.Scenario{sim.Depth6Scenario()}
	g := gen.World(gen.DefaultOptions(6))
	for seed := 1; seed <= 20; seed++ {
		worlds = append(worlds, g.Example(seed))
	}
	for i, s := range worlds {
		var buf bytes.Buffer
		file, err := sim.Run(s.Clone(), sim.Options{Trace: &buf})
		if err != nil {
			t.Fatal(err)
		}
		hashed, err := sim.Run(s.Clone(), sim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(buf.Bytes())
		if want := hex.EncodeToString(sum[:]); file.TraceSHA256 != want || hashed.TraceSHA256 != want {
			t.Fatalf("%s: trace of %d bytes hashes to %s; the run with a file says %s, without %s",
				s.Name, buf.Len(), want, file.TraceSHA256, hashed.TraceSHA256)
		}
		if i == 0 && buf.Len() < 64<<10 {
			t.Fatalf("%s: a trace of %d bytes does not cross many flushes", s.Name, buf.Len())
		}
	}
}

// TestSequentialKernelCore: kernels that share one state machine
// (SequentialKernelCore, as a sweep's worker and an exploration build
// them) trace exactly what kernels with their own do, even when their
// runs' steps interleave on one goroutine.
func TestSequentialKernelCore(t *testing.T) {
	g := gen.World(gen.DefaultOptions(6))
	shared := sim.SequentialKernelCore()
	for seed := 1; seed <= 40; seed += 2 {
		a, b := g.Example(seed), g.Example(seed+1)
		var want [2]string
		for i, s := range []*scenario.Scenario{a, b} {
			r, err := sim.Run(s.Clone(), sim.Options{})
			if err != nil {
				t.Fatal(err)
			}
			want[i] = r.TraceSHA256
		}
		var runs [2]*sim.Sim
		for i, s := range []*scenario.Scenario{a, b} {
			m, err := sim.New(s.Clone(), sim.Options{Core: shared})
			if err != nil {
				t.Fatal(err)
			}
			runs[i] = m
		}
		for more := true; more; {
			more = false
			for _, m := range runs {
				more = m.Step() || more
			}
		}
		for i, m := range runs {
			r, err := m.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if r.TraceSHA256 != want[i] || !r.Passed {
				t.Fatalf("seed %d with a shared machine: trace %s (passed %v), with its own %s", seed+i, r.TraceSHA256, r.Passed, want[i])
			}
		}
	}
}
