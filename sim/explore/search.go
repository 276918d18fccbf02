package explore

import (
	"fmt"
	"slices"
	"time"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// The depth-first search over schedules (docs/semantics.md, "Exploration").

// move is one choice of a schedule: deliver the pick-th due item, or place
// an input and deliver it at once, ahead of what else is due at its
// instant (an input that goes after an event of its instant is placed
// after that event is delivered, so each order is reached one way).
type move struct {
	place bool
	pick  int            // deliver: index into Due()
	in    scenario.Input // place: the input, its At the chosen instant
	moved bool           // place: away from its instant (docs/semantics.md, "Exploration")
}

// run is a simulation at the end of a schedule, with the explorer's own
// state: which input comes next, how many it moved, and where the last
// one went.
type run struct {
	m     *sim.Sim
	next  int // inputs placed so far
	moved int // inputs moved (scenario mode)
	// lastAt is the instant of the last input placed.
	lastAt time.Duration
}

// seen is how a state was explored: with how many more inputs the scope
// allowed, and with which due items asleep. A state reached again with no
// more inputs left and no fewer items asleep has nothing new to show.
type seen struct {
	budget int
	sleep  []string
}

// node is a state the search stands in: its key and the canonical names
// of its due items.
type node struct {
	key   [16]byte
	due   []sim.Due
	names []string
}

type explorer struct {
	s *scenario.Scenario // the scenario explored, its inputs and expectations
	// start is s without inputs: every run starts from it.
	start   *scenario.Scenario
	opt     Options
	rep     *Report
	visited map[[16]byte]seen
	// ends are the end states whose schedules were checked to their end.
	ends    map[[16]byte]bool
	tallies []ExpectTally
	path    []move
	cur     *run
	stopped bool
	sleepOK bool
	// judged: the scenario has expectations (judged on the schedules
	// that keep its inputs at their instants).
	judged  bool
	ticks   int
	found   *oracle.Violation
	foundAt []move
	err     error
	// In tests: onVisit sees every state the search explores from (it
	// may leave x.cur nil), onReach every state a move reaches (a merged
	// one too), onEnd every schedule checked to its end.
	onVisit func(r *run, due []sim.Due)
	onReach func(key [16]byte)
	onEnd   func(key [16]byte, res *sim.Result)
}

// fresh starts the scenario again: no inputs queued (the explorer places
// them).
func (x *explorer) fresh() (*run, error) {
	m, err := sim.New(x.start, sim.Options{Core: x.opt.Core, NoTrace: true})
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
	if !mv.place {
		r.m.StepDue(r.m.Due()[mv.pick])
		return
	}
	i := r.m.Schedule(mv.in)
	r.next++
	r.lastAt = mv.in.At
	if mv.moved {
		r.moved++
	}
	due := r.m.Due()
	if len(due) == 0 || due[0].Kind != sim.DueInput || due[0].Index != i {
		// moves never places an input later than the next item due.
		panic(fmt.Sprintf("explore: input placed at %v is not due first", mv.in.At))
	}
	r.m.StepDue(due[0])
}

// explore runs the depth-first search from the empty schedule.
func (x *explorer) explore() error {
	r, err := x.fresh()
	if err != nil {
		return fmt.Errorf("explore %s: %w", x.s.Name, err)
	}
	x.cur = r
	n := x.node(r)
	x.rep.States++
	x.visited[n.key] = seen{budget: x.budget(r)}
	if x.onReach != nil {
		x.onReach(n.key)
	}
	if err := x.dfs(n, nil); err != nil {
		return err
	}
	return x.err
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

// dfs explores every move from n, the state x.cur is in (x.path),
// skipping the due items in sleep (by canonical name).
func (x *explorer) dfs(n node, sleep []string) error {
	if x.stopped || x.found != nil {
		return nil
	}
	mvs := x.moves(x.cur, n.due)
	r, err := x.visit(n)
	if err != nil {
		return err
	}
	if len(n.due) == 0 && (len(x.opt.Alphabet) > 0 || r.next == len(x.s.Inputs)) {
		// Nothing is left to happen: this schedule may end here (the
		// end-of-run checks), after the moves that place more inputs
		// (small-scope mode: a scenario's own inputs all happen).
		defer x.end(n.key)
	}
	var done []string // due items explored from here, for the sleep sets
	for _, mv := range mvs {
		if x.stopped || x.found != nil || x.err != nil {
			return nil
		}
		name, err := x.move(n, mv, sleep, done)
		if err != nil {
			return err
		}
		if name != "" {
			done = append(done, name)
		}
	}
	return nil
}

// visit shows n to the test hook onVisit, and replays to it when the hook
// moved the run on: it returns the run in n's state.
func (x *explorer) visit(n node) (*run, error) {
	r := x.cur
	if x.onVisit == nil {
		return r, nil
	}
	x.onVisit(r, n.due)
	if x.cur != r {
		if err := x.replay(); err != nil {
			return nil, err
		}
		r = x.cur
	}
	return r, nil
}

// move explores mv from n, unless it delivers an item that sleeps there.
// It returns the name of the item it delivered ("" for a placement, or a
// move skipped).
func (x *explorer) move(n node, mv move, sleep, done []string) (string, error) {
	var name string
	if !mv.place {
		name = n.names[mv.pick]
		if slices.Contains(sleep, name) {
			x.rep.Slept++
			return "", nil
		}
	}
	if x.cur == nil {
		if err := x.replay(); err != nil {
			return "", err
		}
	}
	r := x.cur
	if err := x.step(r, mv, x.childSleep(r, n, mv, sleep, done)); err != nil {
		return "", err
	}
	x.cur = nil // r moved on: the next sibling replays
	return name, nil
}

// childSleep is the sleep set of the state mv reaches: what sleeps at n
// and what was explored from n already (done), as far as it commutes with
// mv.
func (x *explorer) childSleep(r *run, n node, mv move, sleep, done []string) []string {
	if !x.sleepOK || mv.place {
		return nil
	}
	d := n.due[mv.pick]
	var out []string
	for _, z := range append(slices.Clone(sleep), done...) {
		if j := slices.Index(n.names, z); j >= 0 && x.independent(r, n.due[j], d) {
			out = append(out, z)
		}
	}
	return out
}

// step makes move mv from the state r is in and explores what it reaches,
// unless that was explored before.
func (x *explorer) step(r *run, mv move, sleep []string) error {
	x.apply(r, mv)
	x.path = append(x.path, mv)
	defer func() { x.path = x.path[:len(x.path)-1] }()
	x.rep.Transitions++
	x.tick()
	x.rep.Depth = max(x.rep.Depth, len(x.path))
	if vs := r.m.Violations(); len(vs) > 0 {
		x.report(vs[0])
		return nil
	}
	child := x.node(r)
	if x.onReach != nil {
		x.onReach(child.key)
	}
	budget := x.budget(r)
	if old, ok := x.visited[child.key]; ok {
		// Explored before: only a larger scope, or what slept then and is
		// awake now, is left to explore.
		if budget <= old.budget && isSubset(old.sleep, sleep) {
			x.rep.Revisits++
			return nil
		}
		if budget <= old.budget {
			sleep = intersect(old.sleep, sleep)
		}
	} else {
		if x.opt.MaxStates > 0 && x.rep.States >= x.opt.MaxStates {
			x.stop("max-states")
			return nil
		}
		x.rep.States++
	}
	if x.stopped {
		return nil
	}
	x.visited[child.key] = seen{budget: budget, sleep: slices.Clone(sleep)}
	return x.dfs(child, sleep)
}

// end runs the end-of-run checks and judges the expectations at the end
// state key, which x.path reaches, once per end state.
func (x *explorer) end(key [16]byte) {
	if x.stopped || x.found != nil || x.err != nil || x.ends[key] {
		return
	}
	x.ends[key] = true
	if x.cur == nil {
		if x.err = x.replay(); x.err != nil {
			return
		}
	}
	x.rep.Schedules++
	r := x.cur
	res, err := r.m.Finish()
	x.cur = nil
	if err != nil {
		x.err = err
		return
	}
	if x.onEnd != nil {
		x.onEnd(key, res)
	}
	// The expectations are the scenario's for its inputs where it put
	// them: judged on the schedules that keep every input at its
	// instant; the others the oracle alone judges.
	scripted := len(x.opt.Alphabet) == 0 && x.scripted(r)
	if scripted {
		x.tally(res)
	}
	for _, v := range res.Violations {
		if v.Invariant == oracle.Expectation && (!scripted || x.dependent(v.Expect)) {
			continue // not this schedule's to meet, or counted, not required
		}
		x.report(v)
		return
	}
}

// scripted reports that r placed every input at its scripted instant.
func (x *explorer) scripted(r *run) bool { return r.moved == 0 }

// dependent reports that the expectation named name is schedule-dependent.
func (x *explorer) dependent(name string) bool {
	i := slices.IndexFunc(x.tallies, func(t ExpectTally) bool { return t.Name == name })
	return i >= 0 && x.tallies[i].ScheduleDependent
}

// tally counts one end's expectations.
func (x *explorer) tally(res *sim.Result) {
	for _, v := range res.Expectations {
		i := slices.IndexFunc(x.tallies, func(t ExpectTally) bool { return t.Name == v.Name })
		if i < 0 {
			x.tallies = append(x.tallies, ExpectTally{Name: v.Name, ScheduleDependent: v.ScheduleDependent})
			i = len(x.tallies) - 1
		}
		x.tallies[i].Of++
		if v.Held {
			x.tallies[i].Held++
		}
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

func (x *explorer) report(v oracle.Violation) {
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
