package sim_test

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
	"github.com/escapement/escapement/sim/sweep"
	"pgregory.net/rapid"
)

// The crash-at-every-step property (docs/durable.md, "Proof in the
// simulator"). A crash after step k drops everything the world had in
// flight, rebuilds a fresh kernel from the k logged events (held to the
// logged lines, I24), steps kernel.Recover and runs on to quiescence, the
// oracle judging every step of the stitched run — the recovered run may
// change only what a crash legitimately changes: a request restarted
// (I10 keeps the partial text, I4 the transcript valid), an idempotent
// tool run again and no other (I14), every op in flight resolved once
// (I9, I21), every child's outcome reaching its parent (I13, I20, I22),
// every deadline where it was (I5), each user text as often as it was
// accepted (I10), and the tree idle in the end (liveness).
//
// Which steps crash: every step of every embedded scenario
// (TestCrashEveryStepScenarios: Σ n² steps, small for 48 scenarios), and
// in random worlds one to three steps drawn uniformly from the world's run
// (TestCrashAnyStep). Crashing generated worlds at every step costs Σ n²
// per world — about a hundred runs' worth for the mean world, thousands for
// the long tail — while a drawn step costs about two runs; with the step
// drawn uniformly and independently per world, every step index of every
// run length is hit many times over a suite (100,000 worlds in `make
// soak`), and rapid shrinks a failure to its earliest crash point as well
// as to a small world.

// crashRange is the range crash points are drawn from before they are
// folded into a run's length: above the length of nearly every generated
// run (the longest of 300 at depth 6 was about 600 steps), so the fold
// keeps them near uniform.
const crashRange = 1024

// crashCase is a world, the tools a crash may run again, and the steps
// after which its host crashes.
type crashCase struct {
	s          *scenario.Scenario
	idempotent []string
	at         []int
	events     int
}

// crashDraw is what drawCrash draws: a world, the tools a crash may run
// again, and its crash points before they are folded into the run's length
// (first and each of after from 0 to crashRange-1).
type crashDraw struct {
	s          *scenario.Scenario
	idempotent []string
	first      int
	after      []int
}

// drawCrashPoints draws a crashDraw.
func drawCrashPoints(t *rapid.T, o gen.Options) crashDraw {
	d := crashDraw{s: gen.World(o).Draw(t, "world")}
	for _, name := range slices.Sorted(maps.Keys(d.s.Tools)) {
		if rapid.Bool().Draw(t, "idempotent_"+name) {
			d.idempotent = append(d.idempotent, name)
		}
	}
	d.first = rapid.IntRange(0, crashRange-1).Draw(t, "crash_at")
	for more := rapid.IntRange(0, 2).Draw(t, "more_crashes"); more > 0; more-- {
		d.after = append(d.after, rapid.IntRange(0, crashRange-1).Draw(t, "crash_after"))
	}
	return d
}

// place runs d's world uncrashed with core and folds d's crash points into
// the run's length; ref is that run. A recovery adds steps, so later crash
// points may fall after the crashed run's end (then they do not happen);
// the first always does. Each point was drawn from a fixed range and is
// folded into the run's length: when shrinking changes the length, a point
// within it stays where it was (a range that followed the length would
// move every point).
func (d crashDraw) place(core func(*scenario.Scenario) sim.CoreFactory) (c crashCase, ref *sim.Result, err error) {
	ref, err = sim.Run(d.s, sim.Options{Idempotent: d.idempotent, Core: coreFor(core, d.s)})
	if err != nil {
		return crashCase{}, nil, err
	}
	n := ref.Events
	at := []int{1 + d.first%n}
	for _, a := range d.after {
		at = append(at, at[len(at)-1]+a%(n+1))
	}
	return crashCase{s: d.s, idempotent: d.idempotent, at: at, events: n}, ref, nil
}

// drawCrash draws a crashCase: crash points within the world's uncrashed
// run, which must itself pass (a failure there is TestWorlds' business,
// not a crash's).
func drawCrash(t *rapid.T, o gen.Options, core func(*scenario.Scenario) sim.CoreFactory) crashCase {
	c, ref, err := drawCrashPoints(t, o).place(core)
	if err != nil {
		t.Fatal(err)
	}
	if !ref.Passed {
		t.Fatalf("the world fails before any crash: %s\nreproduce: %s", ref.Violations[0], writeFailure(c.s, ref))
	}
	return c
}

// runCrash runs a crashCase; the first crash point always falls within the
// run, so at least one recovery is stepped.
func runCrash(t fataler, c crashCase, core func(*scenario.Scenario) sim.CoreFactory) *sim.Result {
	recoveries := 0
	r, err := sim.Run(c.s, sim.Options{Idempotent: c.idempotent, CrashAt: c.at, Core: coreFor(core, c.s), Observe: countRecoveries(&recoveries)})
	if err != nil {
		t.Fatal(err)
	}
	if recoveries == 0 || recoveries > len(c.at) {
		t.Fatalf("crash points %v gave %d recoveries", c.at, recoveries)
	}
	return r
}

// coreFor builds a run's core factory (nil: the real kernel).
func coreFor(core func(*scenario.Scenario) sim.CoreFactory, s *scenario.Scenario) sim.CoreFactory {
	if core == nil {
		return nil
	}
	return core(s)
}

// countRecoveries is an Options.Observe that counts the recovery steps.
func countRecoveries(n *int) func(sim.StepInfo) {
	return func(st sim.StepInfo) {
		if st.Event.Kind == kernel.EvRecover {
			*n++
		}
	}
}

// TestCrashAnyStep: random worlds of depth up to 6, crashed after one to
// three drawn steps and recovered from their logs, break no invariant
// (rapid's 100 worlds in `make test`; RAPID_CHECKS=100000 in `make soak`).
func TestCrashAnyStep(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := drawCrash(t, gen.DefaultOptions(6), nil)
		r := runCrash(t, c, nil)
		if !r.Passed {
			t.Fatalf("crashed after steps %v of %d (idempotent %v): %d violation(s); first: %s\nreproduce: %s %s\n%s",
				c.at, c.events, c.idempotent, len(r.Violations), r.Violations[0], writeFailure(c.s, r),
				sweep.SimFlags(sim.Options{CrashAt: c.at, Idempotent: c.idempotent}), c.s.YAML())
		}
	})
}

// crashStride is how many steps apart TestCrashEveryStepScenarios crashes
// a scenario: CRASH_STRIDE, by default 3 (about 360 crashed runs, a few
// seconds under the race detector); `make soak` sets 1, every step.
func crashStride(t *testing.T) int {
	v := os.Getenv("CRASH_STRIDE")
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("CRASH_STRIDE=%q: want a whole number from 1", v)
	}
	return n
}

// TestCrashEveryStepScenarios: every embedded scenario crashed after each
// of its steps in turn (every crashStride-th step, the offset turning with
// the scenario so every residue is crashed somewhere; with no tool
// idempotent, then with every tool idempotent, alternately), recovered
// from its log and run to the end, breaks no invariant and meets its
// expectations as docs/semantics.md ("Expectations under a crash") reads
// them: a crash whose recovery changed nothing of the story — it asked
// again, at the instant they were first asked, requests that had shown
// nothing, and ran again likewise idempotent tools — leaves the run as it
// was: every expectation holds, and the final tree (every agent's
// outcome, history and requests as asked, the time it fell quiet) is the
// uncrashed run's. A crash that changed the story sets aside only the
// expectations it changed, and says how.
func TestCrashEveryStepScenarios(t *testing.T) {
	ss, err := scenario.LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	stride := crashStride(t)
	crashes, unchanged, setAside := 0, 0, 0
	for i, s := range ss {
		all := slices.Sorted(maps.Keys(s.Tools))
		ref, refTree := runTree(t, s, sim.Options{})
		if !ref.Passed {
			t.Fatalf("%s: %v", s.Name, ref.Violations)
		}
		for k := 1 + i%stride; k <= ref.Events; k += stride {
			recoveries := 0
			opt := sim.Options{CrashAt: []int{k}, Observe: countRecoveries(&recoveries)}
			if k%2 == 0 {
				opt.Idempotent = all
			}
			r, tree := runTree(t, s, opt)
			crashes++
			if recoveries != 1 || len(r.Crashes) != 1 {
				t.Fatalf("%s: a crash after step %d gave %d recoveries (%d crashes)", s.Name, k, recoveries, len(r.Crashes))
			}
			if !r.Passed {
				t.Errorf("%s crashed after step %d of %d (idempotent %v): %v", s.Name, k, ref.Events, opt.Idempotent, r.Violations)
			}
			if len(r.Crashes[0].Changed) > 0 {
				setAside += len(r.CrashChanged)
				continue
			}
			unchanged++
			if len(r.CrashChanged) > 0 {
				t.Errorf("%s crashed after step %d: the crash changed nothing, yet expectations were set aside: %v", s.Name, k, r.CrashChanged)
			}
			if tree != refTree || r.QuiescentAt != ref.QuiescentAt || !maps.Equal(r.LLMRequests, ref.LLMRequests) {
				t.Errorf("%s crashed after step %d: the crash changed nothing, yet the run differs (quiescent at %v, want %v; requests %v, want %v)\n%s",
					s.Name, k, r.QuiescentAt, ref.QuiescentAt, r.LLMRequests, ref.LLMRequests, firstDiff(tree, refTree))
			}
		}
	}
	if unchanged == 0 {
		t.Fatal("no crash left a story unchanged: the expectations were never judged after a crash")
	}
	t.Logf("%d scenarios, %d crashes (every %d step(s)): %d changed nothing (every expectation judged), %d expectation(s) set aside after the others",
		len(ss), crashes, stride, unchanged, setAside)
}

// runTree runs s and returns its result and its final tree: every agent's
// path, outcome and history, as text — a finished child's as it was in the
// last step that held it (it is freed in the step after it finished, which
// a crash's recovery step may or may not be;
// docs/semantics.md, "Finished agents").
func runTree(t *testing.T, s *scenario.Scenario, opt sim.Options) (*sim.Result, string) {
	t.Helper()
	var held []oracle.View
	observe := opt.Observe
	opt.Observe = func(si sim.StepInfo) {
		if observe != nil {
			observe(si)
		}
		for id := range si.Core.NumAgents() {
			if id == len(held) {
				held = append(held, oracle.View{})
			}
			if v := si.Core.View(kernel.AgentID(id)); !v.Freed {
				held[id] = v
			}
		}
	}
	m, err := sim.New(s, opt)
	if err != nil {
		t.Fatal(err)
	}
	for m.Step() {
	}
	r, err := m.Finish()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	c := m.Core()
	for id := 0; id < c.NumAgents(); id++ {
		v := c.View(kernel.AgentID(id))
		if v.Freed {
			v = held[id]
		}
		fmt.Fprintf(&b, "%s %s/%s\n", v.Path, v.Outcome, v.Reason)
		for _, msg := range v.History {
			fmt.Fprintf(&b, "  %s %q calls=%v partial=%v marker=%v synthetic=%v\n", msg.Role, msg.Content, msg.ToolCalls, msg.Partial, msg.Marker, msg.Synthetic)
		}
	}
	return r, b.String()
}

// firstDiff quotes the first line where two texts differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  crashed:   %s\n  uncrashed: %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines, the uncrashed run %d", len(al), len(bl))
}
