package sim_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"pgregory.net/rapid"
)

// worldCheck is the property the fuzzer and the seeds check: a world drawn
// by sim/gen (scripts, tools, limits, faults and user inputs), run with
// same-instant events in file order or permuted, breaks no invariant.
func worldCheck(t *rapid.T) {
	s := gen.World(gen.DefaultOptions(6)).Draw(t, "world")
	permute := rapid.Bool().Draw(t, "permute")
	r, err := sim.Run(s, sim.Options{Permute: permute})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Passed {
		t.Fatalf("%d violation(s); first: %s\nworld: %d agents, %d events, permute=%v\nreproduce: %s%s\n%s",
			len(r.Violations), r.Violations[0], r.Agents, r.Events, permute, writeFailure(s, r), permuteFlag(permute), s.YAML())
	}
}

func permuteFlag(on bool) string {
	if on {
		return " --permute"
	}
	return ""
}

// FuzzWorld is coverage-guided search over whole worlds: rapid.MakeFuzz
// reads the fuzzer's input as the bitstream rapid draws from (8 bytes a
// draw), so Go's fuzzer mutates worlds at the level of their draws and
// keeps the inputs that reach new code in the kernel, the simulator or the
// oracle. An input too short for a whole world is skipped. The seeds are a
// run of zero bytes (every draw at its minimum: the smallest world) and a
// few random streams, as rapid's own random worlds are; inputs worth
// keeping live in testdata/fuzz/FuzzWorld (`make fuzz` runs it for
// FUZZTIME). A failure writes the world as a scenario file that `escapement
// sim FILE` reproduces, and the fuzzer saves the input under testdata.
func FuzzWorld(f *testing.F) {
	f.Add(make([]byte, 8<<10))
	rng := rand.New(rand.NewPCG(11, 2026)) // fixed seeds: the same corpus every run
	for range 4 {
		b := make([]byte, 8<<10)
		for i := 0; i < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
		}
		f.Add(b)
	}
	f.Fuzz(rapid.MakeFuzz(worldCheck))
}
