package sim_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/explore"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/scenario"
)

// rareCase is a rare loop and the small world explore searches for it.
type rareCase struct {
	loop sim.BrokenLoop
	s    *scenario.Scenario
	opt  explore.Options
}

// toolAtItsDeadline: one tool call that takes exactly its tool_timeout (and runs on
// when cancelled), so
// its result and its deadline fall due in one instant.
func toolAtItsDeadline() *scenario.Scenario {
	lim := kernel.DefaultLimits()
	lim.ToolTimeout = 2 * time.Second
	r := func(text string, calls ...scenario.Call) scenario.Reply {
		return scenario.Reply{Text: text, FirstToken: scenario.DefaultFirstToken, Rate: scenario.DefaultRate, Calls: calls}
	}
	return &scenario.Scenario{
		Name: "tool-at-its-deadline", Seed: 1, Limits: lim,
		Agents: map[string]scenario.Script{scenario.RootScript: {r("", scenario.Call{Tool: "build"}), r("built")}},
		Tools:  map[string]scenario.ToolSpec{"build": {Duration: 2 * time.Second, Result: "ok", OnCancel: scenario.CancelIgnore}},
		Inputs: []scenario.Input{{Submit: "build it"}},
	}
}

func rareCases(t *testing.T) []rareCase {
	loops := sim.RareLoops()
	if len(loops) != 3 {
		t.Fatalf("%d rare loops, want 3", len(loops))
	}
	dt := explore.NewWorld(explore.Tree{Shape: explore.Delegate, Children: []explore.Tree{{Shape: explore.Text}}})
	txt := explore.NewWorld(explore.Tree{Shape: explore.Text})
	return []rareCase{
		// A cancel of main anywhere, the submission first.
		{loops[0], dt.Scenario, explore.Options{Alphabet: []scenario.Input{{Submit: "go"}, {Cancel: scenario.RootScript}}, MaxInputs: 2}},
		// Only the orders of the one instant where result and deadline meet.
		{loops[1], toolAtItsDeadline(), explore.Options{MaxInputs: 0}},
		// Two interjections anywhere in one streamed reply.
		{loops[2], txt.Scenario, explore.Options{Alphabet: []scenario.Input{{Submit: "go"}, {Interject: "also"}}, MaxInputs: 3}},
	}
}

// TestExploreFindsRareLoops: for each loop that goes wrong only in one rare
// order or instant, exhaustive exploration of a small world finds it —
// the named invariant, every time, with the same counts and digest — the
// real kernel passes the same exploration, and the scenario explore
// writes reproduces the violation in a plain run (and, when it needed an
// order, only with that order).
func TestExploreFindsRareLoops(t *testing.T) {
	for _, c := range rareCases(t) {
		t.Run(string(c.loop.Invariant), func(t *testing.T) {
			good, err := explore.Scenario(c.s, c.opt)
			if err != nil {
				t.Fatal(err)
			}
			if good.Violation != nil || good.Stopped != "" {
				t.Fatalf("the kernel: violation %v, stopped %q", good.Violation, good.Stopped)
			}
			bad := c.opt
			bad.Core = c.loop.Core
			var first *explore.Report
			for round := 0; round < 2; round++ {
				rep, err := explore.Scenario(c.s, bad)
				if err != nil {
					t.Fatal(err)
				}
				v := rep.Violation
				if v == nil {
					t.Fatalf("%s: explore missed it (%d states)", c.loop.Failure, rep.States)
				}
				if v.First.Invariant != c.loop.Invariant {
					t.Fatalf("%s: first violation %s, want %s", c.loop.Failure, v.First, c.loop.Invariant)
				}
				if first == nil {
					first = rep
					t.Logf("%s → %s after %d states; reproduce with:\n%s", c.loop.Failure, v.First, rep.States, v.Scenario.YAML())
					continue
				}
				if rep.Digest != first.Digest || rep.States != first.States || string(v.Scenario.YAML()) != string(first.Violation.Scenario.YAML()) {
					t.Fatalf("two explorations differ: %s/%d vs %s/%d", rep.Digest, rep.States, first.Digest, first.States)
				}
			}
			// Read back from its file, as `escapement sim FILE` does.
			s, err := scenario.Load(c.s.Name+".yaml", first.Violation.Scenario.YAML())
			if err != nil {
				t.Fatal(err)
			}
			res, err := sim.Run(s, sim.Options{Core: c.loop.Core})
			if err != nil {
				t.Fatal(err)
			}
			if res.Passed || res.Violations[0].Invariant != c.loop.Invariant {
				t.Fatalf("the written scenario does not reproduce it: %v", res.Violations)
			}
			if res, _ := sim.Run(s, sim.Options{}); !res.Passed {
				t.Fatalf("the written scenario fails the real kernel: %v", res.Violations)
			}
			if len(s.Schedule) > 0 {
				plain := s.Clone()
				plain.Schedule = nil
				if res, _ := sim.Run(plain, sim.Options{Core: c.loop.Core}); !res.Passed {
					t.Fatalf("the loop fails without the schedule's order too: %v", res.Violations)
				}
			}
		})
	}
}

// TestRareLoopsSweep measures what random sweeps find of the rare loops:
// ESCAPEMENT_RARE_SWEEP=10000 go test ./sim -run TestRareLoopsSweep -v
// runs that many generated worlds (depth 6, the sweep's generator) with
// each loop, in the default order and with same-instant events permuted,
// and logs how many found it (docs/oracle.md, "Exhaustive exploration").
func TestRareLoopsSweep(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ESCAPEMENT_RARE_SWEEP"))
	if n == 0 {
		t.Skip("set ESCAPEMENT_RARE_SWEEP=N to run N worlds per loop")
	}
	g := gen.World(gen.DefaultOptions(6))
	for _, loop := range sim.RareLoops() {
		for _, permute := range []bool{false, true} {
			found, named := 0, 0
			for seed := 1; seed <= n; seed++ {
				s := g.Example(seed)
				res, err := sim.Run(s, sim.Options{Core: loop.Core, Permute: permute})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Passed {
					found++
					if res.Violations[0].Invariant == loop.Invariant {
						named++
					}
				}
			}
			t.Logf("%s: permute=%v: %d of %d worlds failed (%d naming %s)", loop.Failure, permute, found, n, named, loop.Invariant)
		}
	}
}
