// Package explore checks a scenario exhaustively instead of by sampling:
// every order of the events due at one virtual instant and every placement
// of each user input at every anchor the world offers (a chunk arriving, a
// stream ending, a tool returning, a deadline, a child starting — the
// instant of any event — before or after that event, and a nudge before or
// after its instant), with the oracle after every step and the scenario's
// expectations at the end of every schedule, as in a run. It is a stateless
// model checker in the manner of CHESS and Loom: a schedule is a list of
// choices, a state is reached by running its schedule again from the start
// in the unchanged simulator (sim.Sim.Due, StepDue, Schedule), and a state
// whose canonical encoding (the kernel's state, the simulator's pending
// work and what the expectations still read of the past:
// sim.Sim.AppendState, AppendExpectState) was explored before is not
// explored again. Sleep sets skip orders that only swap events of disjoint
// subtrees (partial-order reduction). A violation is shrunk and returned as
// a scenario file whose Schedule replays the order that broke the
// invariant or the expectation (docs/semantics.md, "Exploration").
//
// Nothing here reads the wall clock or starts a goroutine: a host that
// bounds the time passes Options.Stop, and runs explorations in parallel
// itself.
package explore

import (
	"fmt"
	"time"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// Options bound and tune one exploration. The zero value explores the
// scenario's own inputs, none of them moved, with a 1ms nudge and no bound.
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
	Alphabet []scenario.Input
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
	// checks and the expectations included), one per distinct end state;
	// every other schedule merged into a state already explored, and
	// shares its ends.
	Schedules int
	// States are the distinct states explored (the first included);
	// Transitions the moves made (deliveries and input placements, merged
	// ones included); Revisits the moves that reached a state explored
	// before; Slept the moves the sleep sets skipped.
	States, Transitions, Revisits, Slept int
	// Depth is the most moves on one schedule; Replays the runs started
	// from the beginning to reach a state again.
	Depth, Replays int
	// Stopped is "" when the exploration was exhaustive, else the bound
	// that stopped it: "max-states" or "stopped".
	Stopped string
	// Violation is the first one found (nil: none); the exploration stops
	// there. An expectation not marked schedule-dependent that fails on a
	// schedule is one (invariant oracle.Expectation).
	Violation *Violation
	// Expectations tell, for each of the scenario's expectations, on how
	// many of the Schedules it held.
	Expectations []ExpectTally
	// Digest is a SHA-256 over the set of states explored and the counts:
	// two explorations of one scenario with one build give the same.
	Digest string
}

// ExpectTally is one expectation over the schedules an exploration ran to
// their end.
type ExpectTally struct {
	Name string
	// ScheduleDependent: the scenario marks it as holding on some
	// schedules only; the others must hold on all.
	ScheduleDependent bool
	Held, Of          int
}

// Unmet lists the schedule-dependent expectations that held on no
// schedule of an exhaustive exploration: they cannot hold at all, the
// scenario's own order included (an exploration a bound stopped lists
// none).
func (r *Report) Unmet() []ExpectTally {
	if r.Stopped != "" || r.Violation != nil {
		return nil
	}
	var out []ExpectTally
	for _, t := range r.Expectations {
		if t.ScheduleDependent && t.Held == 0 && t.Of > 0 {
			out = append(out, t)
		}
	}
	return out
}

// Passed reports an exploration with no violation and no unmet
// expectation (exhaustive or not: see Stopped).
func (r *Report) Passed() bool { return r.Violation == nil && len(r.Unmet()) == 0 }

// Violation is an invariant broken, or an expectation failed, on one
// schedule.
type Violation struct {
	// First is the first violation the oracle reported.
	First oracle.Violation
	// Scenario reproduces it with `escapement sim FILE`: the inputs where
	// the schedule placed them, Schedule the order of same-instant events,
	// shrunk. Its Expect holds the expectations required on every
	// schedule for an expectation's failure, none for an invariant's.
	Scenario *scenario.Scenario
	// Moves is the schedule's length before shrinking.
	Moves int
}

// Scenario explores s. The error is for runs that cannot start (a bad
// core, an invalid scenario); violations are in the report.
func Scenario(s *scenario.Scenario, opt Options) (*Report, error) {
	x, err := newExplorer(s, opt)
	if err != nil {
		return nil, err
	}
	if err := x.explore(); err != nil {
		return nil, err
	}
	return x.finish(), nil
}

// newExplorer prepares an exploration of s.
func newExplorer(s *scenario.Scenario, opt Options) (*explorer, error) {
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
	base.Schedule = nil
	if len(opt.Alphabet) > 0 {
		// Generated inputs: the scenario's expectations are about its own.
		base.Expect = scenario.Expect{}
	}
	if err := base.Validate(); err != nil {
		return nil, fmt.Errorf("explore %s: %w", s.Name, err)
	}
	// Every run starts from this one scenario with no inputs queued (the
	// explorer places them); nothing in a run changes it.
	start := base.Clone()
	start.Inputs = nil
	return &explorer{
		s: base, start: start, opt: opt, rep: &Report{Name: s.Name},
		visited: map[[16]byte]seen{}, ends: map[[16]byte]bool{},
		sleepOK: !opt.NoReduction && !outputCapReachable(base),
		judged:  len(base.ExpectNames()) > 0,
	}, nil
}

// finish shrinks what was found and seals the report.
func (x *explorer) finish() *Report {
	if x.found != nil {
		x.rep.Violation = x.shrink()
	}
	x.rep.Expectations = x.tallies
	x.rep.Digest = x.digest()
	return x.rep
}
