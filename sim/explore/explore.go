// Package explore checks a scenario exhaustively instead of by sampling:
// every order of the events due at one virtual instant and every placement
// of each user input at every anchor the world offers (a chunk arriving, a
// stream ending, a tool returning, a deadline, a child starting — the
// instant of any event — before or after that event, and a nudge before or
// after its instant), with the oracle after every step, as in a run. It is
// a stateless model checker in the manner of CHESS and Loom: a schedule is
// a list of choices, a state is reached by running its schedule again from
// the start in the unchanged simulator (sim.Sim.Due, StepDue, Schedule),
// and a state whose canonical encoding (the kernel's state plus the
// simulator's pending work, sim.Sim.AppendState) was explored before is
// not explored again. Sleep sets skip orders that only swap events of
// disjoint subtrees (partial-order reduction). A violation is shrunk and
// returned as a scenario file whose Schedule replays the order that broke
// the invariant (docs/semantics.md, "Exploration").
//
// Nothing here reads the wall clock or starts a goroutine: a host that
// bounds the time passes Options.Stop, and runs explorations in parallel
// itself.
package explore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/escapement/escapement/sim"
)

// Options bound and tune one exploration. The zero value explores the
// scenario's own inputs, every one movable, with a 1ms nudge and no bound.
type Options struct {
	// Core builds the agent loop under test; nil is the real kernel.
	Core sim.CoreFactory
	// MaxStates stops the exploration after this many distinct states (0:
	// no bound). A stop is reported (Report.Stopped), never passed off as
	// exhaustive.
	MaxStates int
	// MaxInputs is the scope for inputs. With Alphabet empty: how many of
	// the scenario's inputs one schedule may move away from their scripted
	// instant (-1: all of them; 0: none, only orders are explored). With
	// Alphabet: how many inputs a schedule makes.
	MaxInputs int
	// Alphabet, when set, replaces the scenario's inputs: every sequence of
	// up to MaxInputs of these, each placed anywhere (small-scope mode).
	Alphabet []sim.Input
	// Nudge is "just before" and "just after" an anchor (default 1ms;
	// negative: only the anchor's own instant).
	Nudge time.Duration
	// NoReduction turns the sleep sets off (to measure them, and to check
	// that they change no verdict).
	NoReduction bool
	// Stop is polled now and then; true stops the exploration early (the
	// host's clock or Ctrl-C), reported as Report.Stopped = "stopped".
	Stop func() bool
	// Progress is called every 4096 transitions with the counts so far.
	Progress func(Report)
	// ShrinkBudget bounds the runs spent shrinking a violation (default
	// 400).
	ShrinkBudget int
}

// Report is what one exploration found.
type Report struct {
	Name string
	// Schedules are the complete runs checked to their end (the end-of-run
	// checks included); every other schedule merged into a state already
	// explored.
	Schedules int
	// States are the distinct states explored; Transitions the moves made
	// (deliveries and input placements, merged ones included); Revisits
	// the moves that reached a state explored before; Slept the moves the
	// sleep sets skipped.
	States, Transitions, Revisits, Slept int
	// Depth is the most moves on one schedule; Replays the runs started
	// from the beginning to reach a state again.
	Depth, Replays int
	// Stopped is "" when the exploration was exhaustive, else the bound
	// that stopped it: "max-states" or "stopped".
	Stopped string
	// Violation is the first one found (nil: none); the exploration stops
	// there.
	Violation *Violation
	// Digest is a SHA-256 over the set of states explored and the counts:
	// two explorations of one scenario with one build give the same.
	Digest string
}

// Violation is an invariant broken on one schedule.
type Violation struct {
	// First is the first violation the oracle reported.
	First sim.Violation
	// Scenario reproduces it with `escapement sim FILE`: the inputs where
	// the schedule placed them, Schedule the order of same-instant events,
	// shrunk. Its Expect is empty (the oracle alone judges).
	Scenario *sim.Scenario
	// Moves is the schedule's length before shrinking.
	Moves int
}

// move is one choice of a schedule: deliver the pick-th due item, or
// place an input.
type move struct {
	place bool
	pick  int       // deliver: index into Due()
	in    sim.Input // place: the input, its At the chosen instant
	moved bool      // place: away from its scripted instant
}

// run is a simulation at the end of a schedule, with the explorer's own
// state: which input comes next and how many moves the scope has left.
type run struct {
	m       *sim.Sim
	next    int  // inputs placed so far
	moved   int  // inputs moved (scenario mode)
	pending bool // a placed input not yet delivered
}

// seen is how a state was explored: with how many more inputs the scope
// allowed, and with which due items asleep. A state reached again with no
// more inputs left and no fewer items asleep has nothing new to show.
type seen struct {
	budget int
	sleep  []string
}

type explorer struct {
	s       *sim.Scenario
	opt     Options
	rep     *Report
	visited map[[16]byte]seen
	path    []move
	cur     *run
	stopped bool
	sleepOK bool
	ticks   int
	found   *sim.Violation
	foundAt []move
	err     error
	// visit, in tests, sees every state the search explores from.
	visit func(r *run, due []sim.Due)
}

// Scenario explores s. The error is for runs that cannot start (a bad
// core, an invalid scenario); violations are in the report.
func Scenario(s *sim.Scenario, opt Options) (*Report, error) {
	if opt.Nudge == 0 {
		opt.Nudge = time.Millisecond
	}
	if opt.ShrinkBudget == 0 {
		opt.ShrinkBudget = 400
	}
	if opt.Core == nil {
		// One exploration runs its schedules one after another.
		opt.Core = sim.SequentialKernelCore()
	}
	base := s.Clone()
	base.Expect = sim.Expect{}
	base.Schedule = nil
	if err := base.Validate(); err != nil {
		return nil, fmt.Errorf("explore %s: %w", s.Name, err)
	}
	x := &explorer{
		s: base, opt: opt, rep: &Report{Name: s.Name},
		visited: map[[16]byte]seen{},
		sleepOK: !opt.NoReduction && !outputCapReachable(base),
	}
	if err := x.explore(); err != nil {
		return nil, err
	}
	if x.err != nil {
		return nil, x.err
	}
	if x.found != nil {
		x.rep.Violation = x.shrink()
	}
	x.rep.Digest = x.digest()
	return x.rep, nil
}

// fresh starts the scenario again: no inputs queued (the explorer places
// them), no expectations.
func (x *explorer) fresh() (*run, error) {
	c := x.s.Clone()
	c.Inputs = nil
	m, err := sim.New(c, sim.Options{Core: x.opt.Core})
	if err != nil {
		return nil, err
	}
	// The explorer names due items and prunes states by the core's
	// canonical encoding; a core without one cannot be explored.
	if _, ok := m.Core().(sim.StateEncoder); !ok {
		return nil, fmt.Errorf("the core under test (%T) does not encode its state (sim.StateEncoder), which exploring needs", m.Core())
	}
	return &run{m: m}, nil
}

// replay brings cur to the end of path.
func (x *explorer) replay() error {
	r, err := x.fresh()
	if err != nil {
		return err
	}
	x.rep.Replays++
	for _, mv := range x.path {
		x.apply(r, mv)
	}
	x.cur = r
	return nil
}

// apply makes one move on r.
func (x *explorer) apply(r *run, mv move) {
	if mv.place {
		r.m.Schedule(mv.in)
		r.next++
		r.pending = true
		if mv.moved {
			r.moved++
		}
		return
	}
	d := r.m.Due()[mv.pick]
	if d.Kind == sim.DueInput {
		r.pending = false
	}
	r.m.StepDue(d)
}

// explore runs the depth-first search from the empty schedule.
func (x *explorer) explore() error {
	r, err := x.fresh()
	if err != nil {
		return fmt.Errorf("explore %s: %w", x.s.Name, err)
	}
	x.cur = r
	return x.dfs(nil)
}

// stateKey is the canonical state of r and the canonical names of its due
// items (fresh made sure the core can encode it).
func (x *explorer) stateKey(r *run, due []sim.Due) (key []byte, names []string) {
	b, names, _ := r.m.AppendState(nil, due)
	if len(x.opt.Alphabet) == 0 {
		// Which of the scenario's inputs comes next (the budget of moves
		// is compared, not hashed).
		b = fmt.Appendf(b, "|%d", r.next)
	}
	b = fmt.Appendf(b, "|%v", r.pending)
	return b, names
}

// budget is how many more inputs r may make (alphabet) or move (scenario).
func (x *explorer) budget(r *run) int {
	switch {
	case len(x.opt.Alphabet) > 0:
		return x.opt.MaxInputs - r.next
	case x.opt.MaxInputs < 0:
		return len(x.s.Inputs) - r.next
	}
	return x.opt.MaxInputs - r.moved
}

// dfs explores every move from the state x.cur is in (x.path), skipping
// those in sleep (canonical names of due items).
func (x *explorer) dfs(sleep []string) error {
	if x.stopped || x.found != nil {
		return nil
	}
	r := x.cur
	due := r.m.Due()
	mvs := x.moves(r, due)
	if x.visit != nil {
		x.visit(r, due)
		if x.cur != r {
			if err := x.replay(); err != nil {
				return err
			}
			r = x.cur
		}
	}
	if len(due) == 0 && !r.pending && (len(x.opt.Alphabet) > 0 || r.next == len(x.inputs())) {
		// Nothing is left to happen: this schedule may end here (the
		// end-of-run checks), after the moves that place more inputs
		// (small-scope mode: a scenario's own inputs all happen).
		defer x.end()
	}
	_, names := x.stateKey(r, due)
	var done []string // due items explored from here, for the sleep sets
	for _, mv := range mvs {
		if x.stopped || x.found != nil {
			return nil
		}
		var name string
		if !mv.place {
			name = names[mv.pick]
			if slices.Contains(sleep, name) {
				x.rep.Slept++
				continue
			}
		}
		if x.cur == nil {
			if err := x.replay(); err != nil {
				return err
			}
		}
		r = x.cur
		// The child's sleep set: what sleeps here and what was explored
		// here already, as far as it commutes with this move.
		var childSleep []string
		if x.sleepOK && !mv.place {
			d := r.m.Due()[mv.pick]
			for _, z := range append(slices.Clone(sleep), done...) {
				if j := slices.Index(names, z); j >= 0 && x.independent(r, due[j], d) {
					childSleep = append(childSleep, z)
				}
			}
		}
		x.apply(r, mv)
		x.path = append(x.path, mv)
		x.rep.Transitions++
		x.tick()
		if len(x.path) > x.rep.Depth {
			x.rep.Depth = len(x.path)
		}
		if vs := r.m.Violations(); len(vs) > 0 {
			x.report(vs[0])
			x.path = x.path[:len(x.path)-1]
			return nil
		}
		explore := true
		key, _ := x.stateKey(r, r.m.Due())
		h := sha256.Sum256(key)
		var k [16]byte
		copy(k[:], h[:16])
		budget := x.budget(r)
		if old, ok := x.visited[k]; ok {
			// Explored before: only a larger scope, or what slept then
			// and is awake now, is left to explore.
			if budget <= old.budget && isSubset(old.sleep, childSleep) {
				explore = false
				x.rep.Revisits++
			} else if budget <= old.budget {
				childSleep = intersect(old.sleep, childSleep)
			}
		} else {
			x.rep.States++
			if x.opt.MaxStates > 0 && x.rep.States > x.opt.MaxStates {
				x.rep.States--
				x.stop("max-states")
			}
		}
		if explore && !x.stopped {
			x.visited[k] = seen{budget: budget, sleep: slices.Clone(childSleep)}
		}
		if explore && !x.stopped {
			if err := x.dfs(childSleep); err != nil {
				return err
			}
		}
		x.path = x.path[:len(x.path)-1]
		if !mv.place {
			done = append(done, name)
		}
		x.cur = nil // r moved on: the next sibling replays
	}
	return nil
}

// end runs the end-of-run checks at the state x.path reaches.
func (x *explorer) end() {
	if x.stopped || x.found != nil || x.err != nil {
		return
	}
	if x.cur == nil {
		if x.err = x.replay(); x.err != nil {
			return
		}
	}
	x.rep.Schedules++
	res, err := x.cur.m.Finish()
	x.cur = nil
	if err != nil {
		x.err = err
		return
	}
	if !res.Passed {
		x.report(res.Violations[0])
	}
}

func (x *explorer) stop(why string) {
	if !x.stopped {
		x.stopped = true
		x.rep.Stopped = why
	}
}

func (x *explorer) tick() {
	x.ticks++
	if x.ticks%256 == 0 && x.opt.Stop != nil && x.opt.Stop() {
		x.stop("stopped")
	}
	if x.ticks%4096 == 0 && x.opt.Progress != nil {
		x.opt.Progress(*x.rep)
	}
}

func (x *explorer) report(v sim.Violation) {
	if x.found == nil {
		x.found = &v
		x.foundAt = slices.Clone(x.path)
	}
}

// isSubset reports a ⊆ b.
func isSubset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}

func intersect(a, b []string) []string {
	var out []string
	for _, s := range a {
		if slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// digest hashes the set of states explored (sorted) and the counts.
func (x *explorer) digest() string {
	keys := make([][16]byte, 0, len(x.visited))
	for k := range x.visited { // determinism: sorted below
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
	h := sha256.New()
	for _, k := range keys {
		h.Write(k[:])
	}
	r := x.rep
	fmt.Fprintf(h, "%d %d %d %d %d %d %q", r.Schedules, r.States, r.Transitions, r.Revisits, r.Depth, r.Slept, r.Stopped)
	return hex.EncodeToString(h.Sum(nil))[:16]
}
