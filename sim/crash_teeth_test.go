package sim_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/scenario"
	"pgregory.net/rapid"
)

// crashTeethOptions are the worlds TestCrashCatchesBrokenRecoveries draws:
// smaller than TestOracleTeethRapid's (depth 2, at most 4 agents, a few
// inputs), since every world runs twice (uncrashed, to place the crash
// points, then crashed) and each broken recovery needs only a tool, a
// stream or a child in flight at a crash.
var crashTeethOptions = func() gen.Options {
	o := gen.DefaultOptions(2)
	o.MaxAgents, o.MaxInputs = 4, 4
	return o
}()

// fataler is what runCrash needs of a test: *testing.T or *rapid.T.
type fataler interface {
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// crashTeeth judges crashed worlds for one broken recovery.
type crashTeeth struct {
	t  *testing.T
	cl sim.CrashLoop
}

// run places d's crash points and runs it crashed. A world the broken
// recovery fails uncrashed, or one with no step to crash after (a shrink
// can drop every input), is no crash's counterexample: ok is false.
func (ct crashTeeth) run(d crashDraw) (c crashCase, r *sim.Result, ok bool) {
	d.idempotent = slices.DeleteFunc(slices.Clone(d.idempotent), func(name string) bool {
		_, ok := d.s.Tools[name] // a shrink may have dropped the tool
		return !ok
	})
	if len(d.s.Inputs) == 0 {
		return crashCase{s: d.s}, &sim.Result{}, false
	}
	c, ref, err := d.place(ct.cl.Core)
	if err != nil {
		ct.t.Fatalf("%s: %v\n%s", ct.cl.Failure, err, d.s.YAML())
	}
	if !ref.Passed || ref.Events == 0 {
		return c, ref, false
	}
	return c, runCrash(ct.t, c, ct.cl.Core), true
}

// catches reports whether d, crashed, fails with the loop's invariant
// named first.
func (ct crashTeeth) catches(d crashDraw) bool {
	_, r, ok := ct.run(d)
	return ok && caughtFirst(r, ct.cl.Invariant)
}

// shrink brings a crashed counterexample down: the world first (sim.Shrink,
// the crash points and idempotent tools held), then one crash point instead
// of several, no idempotent tool, and the earliest step a single crash
// still catches the loop at.
func (ct crashTeeth) shrink(d crashDraw) crashDraw {
	d.s = sim.Shrink(d.s, func(s *scenario.Scenario) bool {
		c := d
		c.s = s
		return ct.catches(c)
	}, teethShrinkBudget)
	for _, simpler := range []func(crashDraw) crashDraw{
		func(c crashDraw) crashDraw { c.after = nil; return c },
		func(c crashDraw) crashDraw { c.idempotent = nil; return c },
	} {
		if c := simpler(d); ct.catches(c) {
			d = c
		}
	}
	if len(d.after) == 0 {
		for first := 0; first < d.first; first++ {
			c := d
			c.first = first
			if ct.catches(c) {
				return c
			}
		}
	}
	return d
}

// TestCrashCatchesBrokenRecoveries: each broken recovery (sim.CrashLoops)
// passes the uncrashed worlds it is drawn, and the crash property finds it
// — a crashed world of seeds 1..teethSeeds of the crash generator
// (TestCrashAnyStep's draws: a world, the tools a crash may run again, one
// to three crash points) that fails with the invariant that names it first
// — and shrinks that world to a small one.
func TestCrashCatchesBrokenRecoveries(t *testing.T) {
	draws := rapid.Custom(func(t *rapid.T) crashDraw { return drawCrashPoints(t, crashTeethOptions) })
	for i, cl := range sim.CrashLoops() {
		t.Run(strconv.Itoa(i+1)+"_"+string(cl.Invariant), func(t *testing.T) {
			t.Parallel()
			ct := crashTeeth{t: t, cl: cl}
			seed, ok := teethFind(func(seed int) bool {
				d := draws.Example(seed)
				c, r, ok := ct.run(d)
				if !ok {
					t.Fatalf("%s: the broken recovery fails an uncrashed world (seed %d): %v\n%s", cl.Failure, seed, r.Violations, c.s.YAML())
				}
				return caughtFirst(r, cl.Invariant)
			})
			if !ok {
				t.Fatalf("%s: no crashed world of seeds 1..%d fails with %s first", cl.Failure, teethSeeds, cl.Invariant)
			}
			c, r, ok := ct.run(ct.shrink(draws.Example(seed)))
			if !ok || !caughtFirst(r, cl.Invariant) {
				t.Fatalf("%s: the shrunk world no longer fails with %s first: %v\n%s", cl.Failure, cl.Invariant, r.Violations, c.s.YAML())
			}
			t.Logf("%s → %s; crashed world of seed %d, shrunk to %s, crash_at=%s, idempotent=%v",
				cl.Failure, r.Violations[0], seed, shrunkSize(c.s, r), sim.FormatCrashAt(c.at), c.idempotent)
			if r.Agents > maxShrunkAgents || r.Events > maxShrunkEvents {
				t.Errorf("the shrunk counterexample is not small: %d agents, %d events\n%s", r.Agents, r.Events, c.s.YAML())
			}
		})
	}
}
