package explore

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// The brute-force check of exploration (docs/semantics.md,
// "Exploration"): an enumerator written from the definition of a
// schedule, not from the explorer's moves — every interleaving of the
// deliveries and input placements the scope allows, an input queued at
// its instant and then delivered in any order among what is due with it,
// every schedule run from the start to its end, no state merged, no order
// skipped — against the explorer with its reductions, on small worlds.
// Both must reach the same states and the same ends, with the same
// verdicts (invariants and expectations) at each end; an end reached with
// two verdicts means a state's key forgot something the verdict reads.

// census is what an enumeration saw.
type census struct {
	states map[[16]byte]bool     // every state where no input waits to be delivered
	ends   map[[16]byte][]string // the verdicts seen at each end state
	// broken: invariants broken (the enumeration goes on; the explorer
	// stops at the first).
	broken    map[oracle.Invariant]bool
	schedules int
}

func newCensus() *census {
	return &census{states: map[[16]byte]bool{}, ends: map[[16]byte][]string{}, broken: map[oracle.Invariant]bool{}}
}

// verdict writes what an end's result says: the end-of-run violations
// (expectations by name) and which expectations held.
func verdict(res *sim.Result) string {
	var parts []string
	for _, v := range res.Violations {
		parts = append(parts, string(v.Invariant)+":"+v.Expect)
	}
	for _, e := range res.Expectations {
		parts = append(parts, fmt.Sprintf("%s=%v", e.Name, e.Held))
	}
	return strings.Join(parts, " ")
}

// choice is one step of a brute-force schedule: deliver the pick-th due
// item (an input queued earlier among them), or queue an input.
type choice struct {
	queue bool
	pick  int
	in    scenario.Input
	moved bool
}

// brute enumerates every schedule of s in the scope of opt.
type brute struct {
	x *explorer // for fresh runs and state keys only
	c *census
	// limit bounds the schedules (a test that outgrows it fails: the
	// world is too large for brute force).
	limit int
}

// bruteForce enumerates s; it fails t when the scope holds more than
// limit schedules.
func bruteForce(t *testing.T, s *scenario.Scenario, opt Options, limit int) *census {
	t.Helper()
	x, err := newExplorer(s, opt)
	if err != nil {
		t.Fatal(err)
	}
	b := &brute{x: x, c: newCensus(), limit: limit}
	b.walk(t, nil, b.replay(t, nil))
	return b.c
}

// bstate is a brute-force run at the end of its choices.
type bstate struct {
	r       run
	pending bool // a queued input not yet delivered
}

// replay runs path from the start.
func (b *brute) replay(t *testing.T, path []choice) *bstate {
	r, err := b.x.fresh()
	if err != nil {
		t.Fatal(err)
	}
	st := &bstate{r: *r}
	for _, c := range path {
		st.take(c)
	}
	return st
}

// take makes one choice.
func (st *bstate) take(c choice) {
	if c.queue {
		st.r.m.Schedule(c.in)
		st.r.next++
		st.r.lastAt = c.in.At
		if c.moved {
			st.r.moved++
		}
		st.pending = true
		return
	}
	d := st.r.m.Due()[c.pick]
	if d.Kind == sim.DueInput {
		st.pending = false
	}
	st.r.m.StepDue(d)
}

// walk enumerates every schedule that starts with path; st is a run at
// its end (used by the first choice from here, the others replay).
func (b *brute) walk(t *testing.T, path []choice, st *bstate) {
	if b.c.schedules > b.limit {
		return
	}
	m := st.r.m
	if vs := m.Violations(); len(vs) > 0 {
		for _, v := range vs {
			b.c.broken[v.Invariant] = true
		}
		b.c.schedules++
		return
	}
	if !st.pending {
		b.c.states[b.x.node(&st.r).key] = true
	}
	due := m.Due()
	x, opt := b.x, b.x.opt
	alphabet := len(opt.Alphabet) > 0
	var choices []choice
	// Deliveries: any due item, in any order — but an input the scope
	// may not move keeps its instant: nothing due after it goes first.
	for i, d := range due {
		if !st.pending && !alphabet && st.r.next < len(x.s.Inputs) && opt.MaxInputs >= 0 && st.r.moved >= opt.MaxInputs {
			if d.At > max(x.s.Inputs[st.r.next].At, st.r.lastAt) {
				continue
			}
		}
		choices = append(choices, choice{pick: i})
	}
	if !st.pending {
		choices = append(choices, b.placements(st, due)...)
	}
	end := len(due) == 0 && !st.pending && (alphabet || st.r.next == len(x.s.Inputs))
	var key [16]byte
	if end {
		key = b.x.node(&st.r).key
	}
	live := st
	for _, c := range choices {
		if live == nil {
			live = b.replay(t, path)
		}
		live.take(c)
		b.walk(t, append(slices.Clone(path), c), live)
		live = nil
	}
	if end {
		if live == nil {
			live = b.replay(t, path)
		}
		res, err := live.r.m.Finish()
		if err != nil {
			t.Fatal(err)
		}
		b.c.schedules++
		for _, v := range res.Violations {
			if v.Invariant != oracle.Expectation {
				b.c.broken[v.Invariant] = true
			}
		}
		if v := verdict(res); !slices.Contains(b.c.ends[key], v) {
			b.c.ends[key] = append(b.c.ends[key], v)
		}
	}
}

// placements are the instants the next input may be queued at, by the
// definition: an anchor — right after the last event, a nudge later, a
// nudge before the next event due, with it; with nothing due, right after
// the last event only — or its scripted instant
// (as written, or with the input before it when that one went later),
// moved when not that one and only within the scope.
func (b *brute) placements(st *bstate, due []sim.Due) []choice {
	x, opt := b.x, b.x.opt
	now := st.r.m.Now()
	next := time.Duration(-1)
	if len(due) > 0 {
		next = due[0].At
	}
	inWindow := func(t time.Duration) bool { return t >= now && (next < 0 || t <= next) }
	anchors := []time.Duration{now} // with nothing due: right after the last event only
	if next >= 0 {
		for _, t := range []time.Duration{now + opt.Nudge, next - opt.Nudge, next} {
			if (t == next || opt.Nudge > 0) && inWindow(t) && !slices.Contains(anchors, t) {
				anchors = append(anchors, t)
			}
		}
	}
	var out []choice
	if len(opt.Alphabet) > 0 {
		if st.r.next >= opt.MaxInputs {
			return nil
		}
		for _, in := range opt.Alphabet {
			for _, t := range anchors {
				in.At = t
				out = append(out, choice{queue: true, in: in})
			}
		}
		return out
	}
	if st.r.next >= len(x.s.Inputs) {
		return nil
	}
	in := x.s.Inputs[st.r.next]
	scripted := max(in.At, st.r.lastAt)
	movable := opt.MaxInputs < 0 || st.r.moved < opt.MaxInputs
	ats := anchors
	if inWindow(scripted) && !slices.Contains(ats, scripted) {
		ats = append(slices.Clone(ats), scripted)
	}
	for _, t := range ats {
		moved := t != scripted
		if moved && !movable {
			continue
		}
		p := in
		p.At = t
		out = append(out, choice{queue: true, in: p, moved: moved})
	}
	return out
}

// explored runs the explorer on s and takes its census.
func explored(t *testing.T, s *scenario.Scenario, opt Options) (*census, *Report) {
	t.Helper()
	x, err := newExplorer(s, opt)
	if err != nil {
		t.Fatal(err)
	}
	c := newCensus()
	x.onEnd = func(key [16]byte, res *sim.Result) {
		c.ends[key] = append(c.ends[key], verdict(res))
	}
	if err := x.explore(); err != nil {
		t.Fatal(err)
	}
	for k := range x.visited { // determinism: a set
		c.states[k] = true
	}
	rep := x.finish()
	if rep.Violation != nil {
		c.broken[rep.Violation.First.Invariant] = true
	}
	return c, rep
}

// diffCensus lists how what the explorer saw differs from what brute
// force saw (nothing: they agree).
func diffCensus(got, want *census) []string {
	var diffs []string
	missing, extra := 0, 0
	for k := range want.states { // determinism: counts
		if !got.states[k] {
			missing++
		}
	}
	for k := range got.states { // determinism: counts
		if !want.states[k] {
			extra++
		}
	}
	if missing > 0 || extra > 0 {
		diffs = append(diffs, fmt.Sprintf("the explorer reached %d states brute force did not, and missed %d of its %d", extra, missing, len(want.states)))
	}
	var ends []string
	for k, vs := range want.ends { // determinism: sorted below
		switch {
		case len(vs) > 1:
			ends = append(ends, fmt.Sprintf("one end state, %d verdicts by the schedules that reach it (its key forgets what they read): %q", len(vs), vs))
		case len(got.ends[k]) == 0:
			ends = append(ends, fmt.Sprintf("an end brute force reached (%q) was never checked by the explorer", vs[0]))
		case got.ends[k][0] != vs[0]:
			ends = append(ends, fmt.Sprintf("an end's verdict: explorer %q, brute force %q", got.ends[k][0], vs[0]))
		}
	}
	for k, vs := range got.ends { // determinism: sorted below
		if len(vs) > 1 {
			ends = append(ends, fmt.Sprintf("the explorer checked one end state %d times", len(vs)))
		}
		if want.ends[k] == nil {
			ends = append(ends, fmt.Sprintf("the explorer checked an end brute force never reached (%q)", vs[0]))
		}
	}
	slices.Sort(ends)
	return append(diffs, ends...)
}

// bruteCase is one small world.
type bruteCase struct {
	name string
	s    *scenario.Scenario
	opt  Options
}

func bruteCases(t *testing.T) []bruteCase {
	var cases []bruteCase
	// Every small-scope world (at most three agents), with every
	// sequence of inputs from its alphabet placed anywhere — three for one
	// agent, two for a chain, one for two siblings, as far as brute force
	// goes in a few seconds — at the anchors' instants (the small-scope
	// default).
	for _, w := range Worlds(3) {
		n := 3 // one agent
		switch {
		case len(w.Tree.Children) == 2:
			n = 1 // two siblings: their orders multiply
		case w.Tree.Size() > 1:
			n = 2
		}
		cases = append(cases, bruteCase{fmt.Sprintf("%s/inputs=%d", w.Tree, n), w.Scenario, Options{Alphabet: w.Alphabet, MaxInputs: n, Nudge: -1}})
	}
	// With nudges: one text reply, one input of two.
	txt := NewWorld(Tree{Shape: Text})
	cases = append(cases, bruteCase{"T-nudged", txt.Scenario, Options{Alphabet: txt.Alphabet[:2], MaxInputs: 1}})
	// Scenarios with expectations, some schedule-dependent: their own
	// inputs, none, one or all of them movable.
	for _, tc := range []struct {
		name  string
		moved int
	}{
		{"same-instant-cancel-and-timeout", 0}, {"same-instant-cancel-and-timeout", 1},
		{"same-instant-interject-and-stream-end", -1}, {"deadline-stall-exact", 1},
		{"cancel-single-child", 1}, {"parallel-delegation-cancel", 1}, {"interrupt-races-results", 1},
	} {
		cases = append(cases, bruteCase{fmt.Sprintf("%s/moved=%d", tc.name, tc.moved), byName(t, tc.name), Options{MaxInputs: tc.moved}})
	}
	// The everyday family's smallest member with an input moved.
	e := Everyday{Shape: Pair, Chunks: 2, Inputs: 2}
	cases = append(cases, bruteCase{e.String(), e.Scenario(), Options{MaxInputs: 1}})
	return cases
}

// TestExploreMatchesBruteForce: on every small world, the explorer — with
// its sleep sets and without — reaches exactly the states and ends brute
// force reaches, with the same verdicts, and each end state has one
// verdict whichever schedule reached it.
func TestExploreMatchesBruteForce(t *testing.T) {
	slept, merged := 0, 0
	defer func() {
		if !t.Failed() && (slept == 0 || merged == 0) {
			t.Errorf("the reductions never acted (%d moves slept, %d merged): the comparison shows nothing", slept, merged)
		}
	}()
	for _, tc := range bruteCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			want := bruteForce(t, tc.s, tc.opt, 200_000)
			if want.schedules > 200_000 {
				t.Fatalf("more than 200000 schedules: too large for brute force")
			}
			if len(want.broken) > 0 {
				t.Fatalf("the kernel broke %v", want.broken)
			}
			for _, noRed := range []bool{false, true} {
				opt := tc.opt
				opt.NoReduction = noRed
				got, rep := explored(t, tc.s, opt)
				if rep.Stopped != "" || !rep.Passed() {
					t.Fatalf("explorer: stopped %q, violation %v, unmet %v", rep.Stopped, rep.Violation, rep.Unmet())
				}
				for _, d := range diffCensus(got, want) {
					t.Errorf("reduction=%v: %s", !noRed, d)
				}
				slept += rep.Slept
				merged += rep.Revisits
				if rep.Schedules != len(want.ends) {
					t.Errorf("reduction=%v: %d schedules checked, %d distinct ends", !noRed, rep.Schedules, len(want.ends))
				}
			}
			t.Logf("%d schedules by brute force, %d states, %d ends", want.schedules, len(want.states), len(want.ends))
		})
	}
}

// dropLateInterjection is a loop that loses an interjection typed in the
// very instant a chunk of its root's stream arrived, after it — a rare
// order the explorer must find wherever brute force finds it.
type dropLateInterjection struct {
	sim.Core
	enc     sim.StateEncoder
	chunkAt time.Duration
	chunk   bool
}

func (c *dropLateInterjection) AppendState(dst []byte, r kernel.Renamer) []byte {
	return c.enc.AppendState(dst, r)
}

func (c *dropLateInterjection) Step(ev kernel.Event) []kernel.Effect {
	if ev.Kind == kernel.EvInterject && c.chunk && c.chunkAt == ev.At {
		return nil
	}
	out := c.Core.Step(ev)
	if ev.Kind == kernel.EvLLMDelta && c.Core.Target(ev) == kernel.Root {
		c.chunk, c.chunkAt = true, ev.At
	}
	return out
}

func dropLateInterjectionCore(cfg kernel.Config) (sim.Core, error) {
	c, err := sim.KernelCore(cfg)
	if err != nil {
		return nil, err
	}
	return &dropLateInterjection{Core: c, enc: c.(sim.StateEncoder)}, nil
}

// TestExploreFindsWhatBruteForceFinds: a loop broken in one rare order is
// caught by the explorer exactly where brute force catches it: in the
// small worlds where some schedule breaks an invariant, the explorer
// reports one of those invariants; where none does, it passes.
func TestExploreFindsWhatBruteForceFinds(t *testing.T) {
	caught := 0
	for _, tc := range bruteCases(t) {
		if len(tc.opt.Alphabet) == 0 || tc.s.Agents["b"] != nil {
			continue // a scenario's own inputs, or three agents: enough without them
		}
		tc.opt.Core = dropLateInterjectionCore
		want := bruteForce(t, tc.s, tc.opt, 200_000)
		_, rep := explored(t, tc.s, tc.opt)
		if len(want.broken) == 0 {
			if rep.Violation != nil {
				t.Errorf("%s: the explorer reports %v; no schedule breaks an invariant", tc.name, rep.Violation.First)
			}
			continue
		}
		caught++
		if rep.Violation == nil {
			t.Errorf("%s: brute force breaks %v, the explorer found nothing in %d states", tc.name, want.broken, rep.States)
			continue
		}
		if inv := rep.Violation.First.Invariant; !want.broken[inv] {
			t.Errorf("%s: the explorer reports %s, brute force %v", tc.name, inv, want.broken)
		}
	}
	if caught == 0 {
		t.Fatal("no small world lets the broken loop fail: the test checks nothing")
	}
	t.Logf("the broken loop fails in %d small worlds; the explorer finds it in each", caught)
}

// forgetful is the kernel with a state encoding that leaves out every
// agent's history: two schedules that differ only in what a history
// says merge, as a careless "forget what cannot matter" would make them.
type forgetful struct {
	sim.Core
	k sim.StateEncoder
}

func (c forgetful) AppendState(dst []byte, r kernel.Renamer) []byte {
	for id := 0; id < c.NumAgents(); id++ {
		v := c.View(kernel.AgentID(id))
		dst = fmt.Appendf(dst, "%d %s %d %s|", id, v.State, v.Turn, v.Outcome)
	}
	return dst
}

// TestBruteForceCatchesForgetfulKeys: the comparison has teeth against a
// state key that forgets what the future reads — here every history, so
// that ends whose histories differ merge: brute force sees one end state
// with two verdicts, or an end the explorer never checked.
func TestBruteForceCatchesForgetfulKeys(t *testing.T) {
	core := func(cfg kernel.Config) (sim.Core, error) {
		c, err := sim.KernelCore(cfg)
		if err != nil {
			return nil, err
		}
		return forgetful{Core: c, k: c.(sim.StateEncoder)}, nil
	}
	s := byName(t, "same-instant-interject-and-stream-end")
	opt := Options{MaxInputs: -1, Core: core}
	want := bruteForce(t, s, opt, 10_000)
	got, _ := explored(t, s, opt)
	if len(diffCensus(got, want)) == 0 {
		t.Fatal("the explorer with a forgetful key agrees with brute force")
	}
	twoVerdicts := false
	for _, vs := range want.ends { // determinism: any
		twoVerdicts = twoVerdicts || len(vs) > 1
	}
	if !twoVerdicts {
		t.Fatal("a key without histories merged no two ends that differ: the test shows nothing")
	}
}
