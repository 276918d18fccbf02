package explore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/pool"
	"github.com/escapement/escapement/sim/scenario"
)

// Plan is what a batch of explorations covers and how far each goes —
// what `escapement sim explore` explores (docs/oracle.md, "Exhaustive
// exploration"): the scenarios it is given, every small-scope world, or
// the everyday family.
type Plan struct {
	// SmallScope explores every world of Worlds(Agents), each with every
	// sequence of at most MaxInputs inputs of its alphabet; Family explores
	// the everyday family (Family()). Neither: the scenarios given.
	SmallScope bool
	Agents     int
	Family     bool
	// MaxStates bounds each exploration's distinct states (0: none).
	MaxStates int
	// MaxInputs is Options.MaxInputs: for scenarios, the inputs one
	// schedule may move (-1: all); in small scope, the inputs it makes.
	MaxInputs int
	// Nudge is how far before and after an anchor's instant an input is
	// also placed; 0 places inputs only at the anchors' own instants.
	Nudge time.Duration
	// Core is the agent loop under test (nil: the kernel).
	Core sim.CoreFactory
}

// Validate names the first bad field; paths are the scenario files given
// (small scope and the family take none).
func (p Plan) Validate(paths []string) error {
	switch {
	case p.MaxStates < 0:
		return fmt.Errorf("--max-states must not be negative, got %d", p.MaxStates)
	case p.Nudge < 0:
		return fmt.Errorf("--nudge must not be negative, got %v", p.Nudge)
	case p.SmallScope && len(paths) > 0:
		return fmt.Errorf("--small-scope explores generated worlds; it takes no PATH (got %q)", paths[0])
	case p.Family && len(paths) > 0:
		return fmt.Errorf("--family explores generated scenarios; it takes no PATH (got %q)", paths[0])
	case p.Family && p.SmallScope:
		return errors.New("--family and --small-scope are two different generated sets; give one")
	}
	return p.checkInputs()
}

// checkInputs checks the scope of inputs.
func (p Plan) checkInputs() error {
	switch {
	case p.SmallScope && (p.Agents < 1 || p.Agents > 3):
		return fmt.Errorf("--agents must be in 1..3, got %d", p.Agents)
	case p.SmallScope && p.MaxInputs < 0:
		return fmt.Errorf("--max-inputs must not be negative with --small-scope, got %d", p.MaxInputs)
	case p.MaxInputs < -1:
		return fmt.Errorf("--max-inputs must be -1 (all) or more, got %d", p.MaxInputs)
	}
	return nil
}

// Generated reports whether p explores generated scenarios (small scope
// or the family) rather than the ones it is given.
func (p Plan) Generated() bool { return p.SmallScope || p.Family }

// Item is one exploration of a batch and, once run, what it found.
type Item struct {
	Scenario *scenario.Scenario
	// Alphabet are a small-scope world's inputs (Options.Alphabet);
	// Sequences how many input sequences its schedules draw from them.
	Alphabet  []scenario.Input
	Sequences int
	// Report is nil until it ran (and when the batch stopped before it).
	Report *Report
	// Err is a run that could not start (a bad core or scenario).
	Err error
	// Took is the wall time of its exploration, by the host's clock.
	Took time.Duration
}

// Items are the explorations of p: its generated worlds, or one for each
// scenario of given.
func (p Plan) Items(given []*scenario.Scenario) []*Item {
	var items []*Item
	switch {
	case p.SmallScope:
		for _, w := range Worlds(p.Agents) {
			items = append(items, &Item{Scenario: w.Scenario, Alphabet: w.Alphabet, Sequences: w.Sequences(p.MaxInputs)})
		}
	case p.Family:
		for _, e := range Family() {
			items = append(items, &Item{Scenario: e.Scenario()})
		}
	default:
		for _, s := range given {
			items = append(items, &Item{Scenario: s})
		}
	}
	return items
}

// options are an item's exploration options; stop is polled by it.
func (p Plan) options(it *Item, stop func() bool) Options {
	opt := Options{Core: p.Core, MaxStates: p.MaxStates, MaxInputs: p.MaxInputs, Alphabet: it.Alphabet, Stop: stop, Nudge: p.Nudge}
	if p.Nudge == 0 {
		opt.Nudge = -1 // only the anchors' own instants
	}
	return opt
}

// Host is what a batch needs of the program running it: the workers, a
// clock and where progress goes. The package reads no clock and starts no
// goroutine itself.
type Host struct {
	Pool pool.Pool
	// Now is the host's clock, for each item's Took (nil: not measured).
	Now func() time.Time
	// Progress, when set, is told the distinct states explored so far
	// and how many items are done. Workers call it, concurrently.
	Progress func(states int64, done int)
}

// Run explores items on the host's workers until every one is done or
// ctx ends: an exploration running then stops early (Report.Stopped
// "stopped") and those not started are left without a report.
func (p Plan) Run(ctx context.Context, items []*Item, h Host) {
	stop := func() bool { return ctx.Err() != nil }
	var states atomic.Int64
	var done atomic.Int64
	tell := func() {
		if h.Progress != nil {
			h.Progress(states.Load(), int(done.Load()))
		}
	}
	explore := func(i int) (*Item, error) {
		it, last := items[i], 0
		opt := p.options(it, stop)
		opt.Progress = func(r Report) {
			states.Add(int64(r.States - last))
			last = r.States
			tell()
		}
		began := p.clock(h.Now)
		it.Report, it.Err = Scenario(it.Scenario, opt)
		it.Took = p.clock(h.Now).Sub(began)
		if it.Report != nil {
			states.Add(int64(it.Report.States - last))
		}
		done.Add(1)
		tell()
		return it, nil
	}
	// The items hold their own results: nothing is left to add.
	_ = pool.Run(ctx, h.Pool, len(items), func() func(int) (*Item, error) { return explore }, func(int, *Item) error { return nil })
}

// clock reads now, or the zero time without one.
func (Plan) clock(now func() time.Time) time.Time {
	if now == nil {
		return time.Time{}
	}
	return now()
}

// Failed is the first item whose exploration could not run, or nil.
func Failed(items []*Item) *Item {
	for _, it := range items {
		if it.Err != nil {
			return it
		}
	}
	return nil
}
