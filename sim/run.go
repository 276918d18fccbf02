package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/kernel/trace"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// Options tune a run. The zero value runs the real kernel and keeps only the
// trace's hash.
type Options struct {
	// Trace receives the JSON Lines trace; nil keeps only its SHA-256.
	Trace io.Writer
	// Core builds the agent loop under test; nil is the real kernel.
	Core CoreFactory
	// Spans builds the span derivation the oracle holds to I25; nil is
	// kernel/spans's (tests pass broken ones).
	Spans func(spans.Config) oracle.SpanDeriver
	// TimeLimit stops a run at this virtual time (default DefaultTimeLimit).
	TimeLimit time.Duration
	// MaxEvents stops a run after this many delivered events (default
	// DefaultMaxEvents).
	MaxEvents int
	// Build names the binary in the trace header.
	Build string
	// Permute, when set, permutes events scheduled for the same virtual
	// instant using the scenario's seed, recording each choice in the trace.
	Permute bool
	// Observe, when set, sees every step (for exports such as Perfetto).
	Observe func(StepInfo)
	// Idempotent names the tools a recovery may run again
	// (kernel.Config.Idempotent; see Sim.Recover).
	Idempotent []string
	// Durable makes the simulated host keep a write-ahead log of the events
	// it delivers, so a crash (Sim.Recover) rebuilds a fresh core from it,
	// as a restarted process does (docs/durable.md); without it the
	// crashed core lives on.
	Durable bool
	// CrashAt crashes the host after the k-th delivered event, for each k
	// (ascending, each at least 1; a recovery is an event too, so k and
	// k+1 crash again right after the recovery). It implies Durable.
	CrashAt []int
	// NoTrace writes no trace at all, not even its hash (Result.TraceSHA256
	// stays empty): an explorer runs a scenario's prefixes again and again,
	// and nobody reads those traces (docs/semantics.md, "Exploration").
	NoTrace bool
	// MemoryBudget bounds what the run may hold, in bytes as the simulator
	// counts them (budget.go); a run past it stops with ErrBudget. 0:
	// DefaultMemoryBudget.
	MemoryBudget int64
}

// StepInfo is one step as seen by Options.Observe.
type StepInfo struct {
	Event   kernel.Event
	Target  kernel.AgentID
	Before  fsm.State
	After   fsm.State
	Effects []kernel.Effect
	Core    Core
}

// The limits a run has unless its Options say otherwise.
const (
	DefaultTimeLimit = 24 * time.Hour
	DefaultMaxEvents = 5_000_000
)

// headerOptions records in a trace header the run options that change the
// trace (those not at their defaults), so Replay runs with the same ones.
func headerOptions(opt Options) map[string]string {
	o := map[string]string{}
	crashHeader(opt, o)
	if opt.Permute {
		o["permute"] = "true"
	}
	if opt.TimeLimit != DefaultTimeLimit {
		o["time_limit"] = opt.TimeLimit.String()
	}
	if opt.MaxEvents != DefaultMaxEvents {
		o["max_events"] = strconv.Itoa(opt.MaxEvents)
	}
	if len(o) == 0 {
		return nil
	}
	return o
}

// optionsFromHeader is headerOptions read back.
func optionsFromHeader(h map[string]string) (Options, error) {
	var opt Options
	for k, v := range h { // determinism: each key sets its own field
		var err error
		switch k {
		case "permute":
			opt.Permute = v == "true"
		case "time_limit":
			opt.TimeLimit, err = time.ParseDuration(v)
		case "max_events":
			opt.MaxEvents, err = strconv.Atoi(v)
		case "durable", "crash_at":
			err = crashFromHeader(&opt, k, v)
		default:
			err = errors.New("unknown option")
		}
		if err != nil {
			return opt, fmt.Errorf("trace header option %s=%q: %w", k, v, err)
		}
	}
	return opt, nil
}

// Result is a run's verdict and counts, without printing anything.
type Result struct {
	// Name and File are the scenario's name and the file it was loaded
	// from (empty for a scenario built in code).
	Name string
	File string
	// Passed is true when Violations is empty: no invariant broke and
	// every expectation held.
	Passed bool
	// Violations are the broken invariants and expectations, in order.
	Violations []oracle.Violation
	// Outcomes maps every agent's path to its last turn's outcome.
	Outcomes map[string]string
	// LLMRequests maps every agent's path to the requests it made, as the
	// model was asked them: a request a recovery restarted counts once.
	LLMRequests map[string]int
	// QuiescentAt is when the tree last became quiescent (every agent Idle,
	// nothing in flight, no timer set); events after it were stale.
	QuiescentAt time.Duration
	// End is the virtual time of the last event delivered.
	End time.Duration
	// Events is how many events the kernel stepped.
	Events int
	// TraceSHA256 is the hex SHA-256 of the run's trace: two runs of one
	// scenario and seed give the same hash within a build (I6).
	TraceSHA256 string
	// Probes counts the reachability probes hit.
	Probes map[oracle.Probe]int
	// Agents is how many agents the tree held.
	Agents int
	// Expectations are the scenario's expectations as judged, in order.
	Expectations []oracle.ExpectVerdict
	// Crashes are the host's crashes, in order, each with how its
	// recovery changed the run's story.
	Crashes []Crash
	// CrashChanged are the expectations the run did not meet after a
	// crash changed its story; they do not fail it (docs/semantics.md,
	// "Expectations under a crash").
	CrashChanged []oracle.Violation
}

// Sim is one simulation in progress. Run drives it to the end; tests that
// drive it action by action (the rapid state-machine test) use Step,
// Advance and Input. It is not safe for concurrent use and starts no
// goroutines.
type Sim struct {
	s    *scenario.Scenario
	opt  Options
	core Core
	w    *world
	o    *oracle.Oracle
	tw   *trace.Writer
	perm *permuter
	// inputs are the scenario's inputs and those Schedule added.
	inputs []scenario.Input
	// sched replays Scenario.Schedule (nil when it is empty).
	sched *schedule
	res   *Result
	now   time.Duration
	stop  bool
	// factory and cfg build a core again when a crash rebuilds the host;
	// log is its write-ahead log (nil unless Options.Durable); crashes
	// counts the crashes of Options.CrashAt done.
	factory CoreFactory
	cfg     kernel.Config
	log     *hostLog
	crashes int
	// recovering: the recovery's own step is being delivered (Recover
	// crashes again after it, once it has done its bookkeeping).
	recovering bool
	// budget counts what the run holds; overBudget is set once it passed.
	budget     budget
	overBudget error
}

// New prepares a run of s: the scenario's inputs and faults are queued.
func New(s *scenario.Scenario, opt Options) (*Sim, error) {
	if opt.TimeLimit == 0 {
		opt.TimeLimit = DefaultTimeLimit
	}
	if opt.MaxEvents == 0 {
		opt.MaxEvents = DefaultMaxEvents
	}
	if opt.MemoryBudget == 0 {
		opt.MemoryBudget = DefaultMemoryBudget
	}
	if err := checkCrashAt(opt.CrashAt); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	factory := opt.Core
	if factory == nil {
		factory = KernelCore
	}
	cfg := s.KernelConfig()
	cfg.Idempotent = opt.Idempotent
	core, err := factory(cfg)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", s.Name, err)
	}
	m := &Sim{
		s: s, opt: opt, core: core,
		w:   newWorld(s, opt.Idempotent),
		o:   oracle.New(core, cfg, derivation(opt.Spans)),
		res: &Result{Name: s.Name, File: s.File},

		factory: factory, cfg: cfg,
		budget: budget{limit: opt.MemoryBudget},
	}
	if !opt.NoTrace {
		out := opt.Trace
		if out == nil {
			out = io.Discard
		}
		hdr := trace.Header{
			Source: "sim", Name: s.Name, Seed: s.Seed, Scenario: string(s.YAML()),
			Limits: s.Limits, RootName: scenario.RootScript, Build: opt.Build, Idempotent: opt.Idempotent,
		}
		hdr.Options = headerOptions(opt)
		m.tw = trace.NewWriter(out, hdr)
	}
	if opt.Durable || len(opt.CrashAt) > 0 {
		m.log = newHostLog()
	}
	m.inputs = slices.Clone(s.Inputs)
	if opt.Permute {
		m.perm = newPermuter(s.Seed)
	}
	if len(s.Schedule) > 0 {
		m.sched = &schedule{picks: s.Schedule}
	}
	for _, in := range s.Inputs {
		m.o.Activity(in.At)
	}
	for _, f := range s.Faults {
		m.o.Activity(f.At)
	}
	return m, nil
}

// derivation is the span derivation a run's oracle holds to I25:
// Options.Spans, or kernel/spans's.
func derivation(derive func(spans.Config) oracle.SpanDeriver) func(spans.Config) oracle.SpanDeriver {
	if derive != nil {
		return derive
	}
	return func(cfg spans.Config) oracle.SpanDeriver { return spans.New(cfg) }
}

// Run runs one scenario to quiescence (or the limits) and checks every
// invariant after every step. The returned error is for failures of the run
// itself (a bad core, a trace that cannot be written), not for violations.
func Run(s *scenario.Scenario, opt Options) (*Result, error) {
	m, err := New(s, opt)
	if err != nil {
		return nil, err
	}
	for m.Step() {
	}
	return m.Finish()
}

// Now is the virtual time.
func (m *Sim) Now() time.Duration { return m.now }

// Pending is how many items (world events, timers, inputs, faults) are queued.
func (m *Sim) Pending() int { return m.w.q.len() }

// Violations so far.
func (m *Sim) Violations() []oracle.Violation { return m.o.Violations() }

// Core is the agent loop under simulation.
func (m *Sim) Core() Core { return m.core }

// Step delivers the next queued item, moving the clock to it. It returns
// false when nothing is left or a limit stopped the run.
func (m *Sim) Step() bool { return m.stepUntil(time.Duration(math.MaxInt64)) }

// stepUntil delivers the next queued item due by until. Dead items
// (superseded world events, stopped timers) on the way are dropped, and the
// bound is checked again after each: a dead item due in time must not let a
// live one beyond until through.
func (m *Sim) stepUntil(until time.Duration) bool {
	for !m.stop && m.w.q.len() > 0 && m.w.q.peek().at <= until {
		if m.perm != nil {
			if note := m.perm.reorder(&m.w.q); note != "" {
				m.note(m.w.q.peek().at, note)
			}
		}
		if m.sched != nil && !m.dead(m.w.q.peek()) {
			if note := m.sched.reorder(m); note != "" {
				m.note(m.w.q.peek().at, note)
			}
		}
		if m.dead(m.w.q.peek()) {
			// Dropped before the limits are judged: a stopped timer or a
			// superseded event is no work pending, and it does not move
			// the clock.
			m.w.q.pop()
			continue
		}
		if !m.withinLimits() {
			return false
		}
		if m.take() {
			return true
		}
	}
	return false
}

// withinLimits stops the run when the head item lies past the time limit
// or the event budget is spent.
func (m *Sim) withinLimits() bool {
	if m.w.q.peek().at > m.opt.TimeLimit {
		m.o.TimeLimitReached(m.w.q.peek().at, m.opt.TimeLimit)
		m.stop = true
		return false
	}
	if m.res.Events >= m.opt.MaxEvents {
		m.o.EventLimitReached(m.opt.MaxEvents)
		m.stop = true
		return false
	}
	if m.budget.spent() {
		m.overBudget = m.budget.err(m.s.Name, m.res.Events)
		m.stop = true
		return false
	}
	return true
}

// take pops the head item and acts on it: a fault activates, an input or
// a world event is delivered. It reports whether the kernel was stepped
// (a fault, or a cancel of an agent not there yet, steps nothing).
func (m *Sim) take() bool {
	it := m.w.q.pop()
	if it.at > m.now {
		m.now = it.at
	}
	var ev kernel.Event
	switch it.kind {
	case itemWorld:
		ev = it.ev
	case itemTimer:
		delete(m.w.timers, it.ev.Op)
		ev = it.ev
	case itemFault:
		m.note(it.at, m.w.activate(it.at, m.core, it.index))
		return false
	case itemInput:
		var note string
		ev, note = inputEvent(m.inputs[it.index], m.o)
		if note != "" {
			m.note(it.at, note)
		}
		if ev.Kind == kernel.EventNone {
			return false
		}
	}
	m.deliver(ev, &it)
	return true
}

// note writes a note into the trace (none with Options.NoTrace).
func (m *Sim) note(at time.Duration, text string) {
	if m.tw != nil {
		m.tw.Note(at, text)
	}
}

// dead reports an item that would deliver nothing: a world event superseded
// by a cancel or a fault, or a timer since stopped.
func (m *Sim) dead(it *item) bool {
	switch it.kind {
	case itemWorld:
		return it.gen != it.op.gen
	case itemTimer:
		return !m.w.timers[it.ev.Op]
	}
	return false
}

// Advance delivers everything due within d and moves the clock by d.
func (m *Sim) Advance(d time.Duration) {
	until := m.now + d
	for m.stepUntil(until) {
	}
	if until > m.now {
		m.now = until
	}
}

// Input delivers a user input now (the state-machine test's actions). The
// input counts as activity for the liveness bound.
func (m *Sim) Input(in scenario.Input) {
	ev, note := inputEvent(in, m.o)
	m.o.Activity(m.now)
	if note != "" {
		m.note(m.now, note)
	}
	if ev.Kind != kernel.EventNone {
		m.deliver(ev, nil)
	}
}

// Recover crashes the host now and recovers it (docs/semantics.md,
// "Recovery"): the world forgets every op in flight and every timer — none
// will ever answer or fire — and the kernel is stepped with kernel.Recover
// and resolves them. With Options.Durable the crashed core is dropped and a
// fresh one rebuilt from the host's logged events first (Sim.rebuild, I24);
// without it the core lives on. The crash counts as activity for the
// liveness bound.
func (m *Sim) Recover() {
	c := Crash{After: m.res.Events, At: m.now, Changed: m.w.crash(m.now, m.core)}
	if m.o.ShutdownBegun() {
		c.Changed = append(c.Changed, shutdownEnds)
	}
	m.o.Activity(m.now)
	if m.log != nil {
		m.rebuild()
	}
	m.recovering = true
	m.deliver(kernel.Recover(0), nil)
	m.recovering = false
	c.Changed = append(c.Changed, m.w.recovered(m.core)...)
	m.res.Crashes = append(m.res.Crashes, c)
	m.crashDue()
}

// Deliver delivers a world event now, as a driver would — the
// state-machine test's hostile events: an answer naming an op of another
// kind or one long gone, a fragment with a negative index. The world does
// not know of it; its own events still come.
func (m *Sim) Deliver(ev kernel.Event) { m.deliver(ev, nil) }

func (m *Sim) deliver(ev kernel.Event, it *item) {
	ev.At = m.now
	target := m.core.Target(ev)
	before := m.core.AgentState(target)
	m.o.Before(&ev, target)
	effs := m.core.Step(ev)
	if m.tw != nil {
		m.tw.Step(m.core, ev, target, before, effs)
	}
	m.o.After(effs)
	if m.log != nil {
		m.log.record(m.core, ev, target, before, effs)
	}
	if m.opt.Observe != nil {
		m.opt.Observe(StepInfo{Event: ev, Target: target, Before: before, After: m.core.AgentState(target), Effects: effs, Core: m.core})
	}
	m.budget.step(&ev, effs, m.core.NumAgents())
	m.w.apply(m.now, m.core, effs)
	if it != nil && it.kind == itemWorld {
		m.w.delivered(it.op, ev, m.now, it.dup)
	}
	m.res.Events++
	m.res.End = m.now
	if !m.recovering {
		m.crashDue()
	}
}

// Finish delivers whatever is still queued, runs the end-of-run checks and
// the expectations, and closes the trace.
func (m *Sim) Finish() (*Result, error) {
	for m.Step() {
	}
	if m.overBudget != nil {
		return nil, m.overBudget // its end-of-run checks would read all of it
	}
	res, o := m.res, m.o
	o.Finish()
	res.QuiescentAt = res.End
	if quiet, since := o.Quiet(); quiet {
		res.QuiescentAt = since
	}
	if m.tw != nil {
		sum, err := m.tw.Close(res.End)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", m.s.Name, err)
		}
		res.TraceSHA256 = sum
	}
	res.Probes = o.Probes()
	res.Agents = m.core.NumAgents()
	res.Outcomes, res.LLMRequests = o.Tally() // Finish observed every agent (a freed one as last held)
	res.Expectations = o.JudgeExpect(m.s.Expect, res.QuiescentAt, m.opt.Permute)
	res.Violations = crashJudged(res, o.Spent(), o.Violations())
	res.Passed = len(res.Violations) == 0
	return res, nil
}

// inputEvent turns a scripted input into a kernel event, resolving a cancel's
// agent at the moment it is pressed (one the core has freed too: the press
// names it, and the core answers it as for any finished agent), as the
// oracle resolves a scenario's references.
func inputEvent(in scenario.Input, o *oracle.Oracle) (kernel.Event, string) {
	switch {
	case in.Submit != "":
		return kernel.Submit(0, in.Submit), ""
	case in.Interject != "":
		return kernel.Interject(0, in.Interject), ""
	case in.Shutdown:
		return kernel.Shutdown(0), ""
	}
	id, ok := o.Find(in.Cancel)
	if !ok {
		return kernel.Event{}, fmt.Sprintf("cancel of %s: no such agent (yet); nothing to press", in.Cancel)
	}
	return kernel.CancelTurn(0, id, in.Turn), ""
}

// ExitCode is the CLI's verdict for a set of results: 0 when every run
// passed, 1 when any expectation or invariant failed.
func ExitCode(rs []*Result) int {
	for _, r := range rs {
		if !r.Passed {
			return 1
		}
	}
	return 0
}
