package sim_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
	"pgregory.net/rapid"
)

// The teeth tests prove the oracle would notice each broken loop in worlds
// nobody wrote for it: a generated world that breaks the loop's invariant,
// found and shrunk the same way every run. A teeth test that searched with
// random seeds would be a coin — it passes only as long as its draw finds
// the loop — so they search a fixed, ordered range of the generators' seeds
// instead, and shrink with sim.Shrink, whose bound is a number of runs, not
// wall time. The properties that must hold (TestWorlds, TestCrashAnyStep,
// ...) keep rapid's random seeds: they cannot flip while the code is right,
// and every run samples new worlds (docs/oracle.md, "Property suites").

// teethSeeds is the range a teeth test searches, seeds 1 to teethSeeds of
// its generator in order; the first world its loop fails is its
// counterexample. Every loop in the suite is found well inside it (the
// test logs each seed; the rarest needed about 1,500 when this bound was
// set); a loop the oracle stops catching is not found in any of them, and
// the test fails.
const teethSeeds = 5000

// teethShrinkBudget bounds the runs sim.Shrink spends on one teeth
// counterexample. The shrink is deterministic, so the world it ends at is
// the same on every machine, however loaded.
const teethShrinkBudget = 3000

// maxShrunkAgents and maxShrunkEvents bound the counterexample a teeth
// test's shrink must reach (TestOracleTeethRapid,
// TestCrashCatchesBrokenRecoveries).
const maxShrunkAgents, maxShrunkEvents = 5, 80

// teethOptions are the worlds TestOracleTeethRapid draws: depth up to 4
// and at most 8 agents (wider fan-outs are the sweeps' and TestWorlds').
var teethOptions = func() gen.Options {
	o := gen.DefaultOptions(4)
	o.MaxAgents = 8
	return o
}()

// teethFind returns the first seed in 1..teethSeeds whose case catches
// reports as caught, and false when none does.
func teethFind(catches func(seed int) bool) (int, bool) {
	for seed := 1; seed <= teethSeeds; seed++ {
		if catches(seed) {
			return seed, true
		}
	}
	return 0, false
}

// caughtFirst reports whether r's first violation is inv: a broken loop
// must be named by its own invariant, not by another it trips on the way.
func caughtFirst(r *sim.Result, inv oracle.Invariant) bool {
	return r != nil && len(r.Violations) > 0 && r.Violations[0].Invariant == inv
}

// shrunkSize is a shrunk counterexample's size for the teeth tests' logs.
func shrunkSize(s *scenario.Scenario, r *sim.Result) string {
	scripts, replies, calls, inputs, faults := s.Size()
	return strings.Join([]string{
		strconv.Itoa(r.Agents) + " agent(s)", strconv.Itoa(r.Events) + " events",
		"scripts=" + strconv.Itoa(scripts), "replies=" + strconv.Itoa(replies), "calls=" + strconv.Itoa(calls),
		"inputs=" + strconv.Itoa(inputs), "faults=" + strconv.Itoa(faults),
	}, ", ")
}

// TestOracleTeethRapid: for every F-bug, and for every invariant no F-bug
// breaks first, a deliberately broken agent loop runs against the worlds
// rapid's generator draws from seeds 1, 2, …: one of the first teethSeeds
// must fail with the loop's invariant named first, and sim.Shrink must
// bring it down to a small world that still does.
func TestOracleTeethRapid(t *testing.T) {
	g := gen.World(teethOptions)
	for _, bl := range slices.Concat(sim.BrokenLoops(), sim.InvariantLoops(), sim.CompactionLoops()) {
		id := bl.Failure[:strings.Index(bl.Failure, ":")]
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			teethCatches(t, g, bl.Failure, bl.Invariant, sim.Options{Core: bl.Core})
		})
	}
}

// teethCatches finds the first world of seeds 1..teethSeeds of g that
// runs under opt fail with inv named first, shrinks it with sim.Shrink,
// and checks the shrunk world still fails that way and is small; failure
// names the broken loop in messages.
func teethCatches(t *testing.T, g *rapid.Generator[*scenario.Scenario], failure string, inv oracle.Invariant, opt sim.Options) {
	t.Helper()
	run := func(s *scenario.Scenario) *sim.Result {
		r, err := sim.Run(s, opt)
		if err != nil {
			t.Fatalf("%s: %v\n%s", failure, err, s.YAML())
		}
		return r
	}
	seed, ok := teethFind(func(seed int) bool { return caughtFirst(run(g.Example(seed)), inv) })
	if !ok {
		t.Fatalf("%s: no world of seeds 1..%d fails with %s first", failure, teethSeeds, inv)
	}
	shrunk := sim.Shrink(g.Example(seed), func(s *scenario.Scenario) bool { return caughtFirst(run(s), inv) }, teethShrinkBudget)
	r := run(shrunk)
	if !caughtFirst(r, inv) {
		t.Fatalf("%s: the shrunk world no longer fails with %s first: %v\n%s", failure, inv, r.Violations, shrunk.YAML())
	}
	t.Logf("%s → %s; world of seed %d, shrunk to %s", failure, r.Violations[0], seed, shrunkSize(shrunk, r))
	if r.Agents > maxShrunkAgents || r.Events > maxShrunkEvents {
		t.Errorf("the shrunk counterexample is not small: %d agents, %d events\n%s", r.Agents, r.Events, shrunk.YAML())
	}
}
