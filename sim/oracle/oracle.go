package oracle

import (
	"fmt"
	"time"

	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
)

// Oracle checks the invariants of docs/semantics.md after every step, the
// way TigerBeetle's simulator checks its own: one shadow model of what was
// observed (model), updated once per step, and one checker per group of
// invariants, each in its own file, each judging the step the model read
// and the end of the run. Probes are a separate observer. The oracle judges
// from what it can observe — the events delivered, the effects returned,
// the lifecycle events and each agent's View — never from kernel
// internals, so a broken agent loop cannot hide from it.
//
// The simulator drives it: Before with each event, After with the effects
// the step returned, Finish once at the end, then JudgeExpect for the
// scenario's expectations. It is not safe for concurrent use.
type Oracle struct {
	m      *model
	checks []checker
	// quiesce is also told of activity and of a run stopped by its time
	// limit; deadline of the chunks that only moved a stall deadline.
	quiesce  *quiesceChecker
	deadline *deadlineChecker
	// spans derives the spans from every step for their checker (I25).
	spans       SpanDeriver
	spanChecker *spanChecker
	probes      *probeSet
	out         []Violation
	recent      [recentEvents]kernel.Event
	nrecent     int
	// all holds the checkers checks points to: allocated with the oracle
	// in one piece, not one by one (an oracle is built for every run).
	all struct {
		stale      staleChecker
		freeze     freezeChecker
		input      inputChecker
		fsm        fsmChecker
		transcript transcriptChecker
		outcome    outcomeChecker
		content    contentChecker
		call       callChecker
		cancel     cancelChecker
		quiesce    quiesceChecker
		accounting accountingChecker
		progress   progressChecker
		view       viewChecker
		profile    profileChecker
		checks     [17]checker
	}
}

// checker judges one group of invariants.
type checker interface {
	// elapse runs when virtual time has moved to the next event's instant,
	// before that event is read: deadlines that passed are judged here.
	elapse()
	// step judges one step the model has read.
	step(s *stepObs)
	// finish runs once after the last step.
	finish()
}

// judge is what every checker holds: the model it reads and the oracle it
// reports to.
type judge struct {
	o *Oracle
	m *model
}

func (j judge) violate(inv Invariant, agent kernel.AgentID, format string, args ...any) {
	j.o.Violate(inv, agent, format, args...)
}

func (judge) elapse() {}
func (judge) finish() {}

// maxViolations bounds what one run records (a limit on everything).
const maxViolations = 64

// recentEvents is how many delivered events a violation quotes.
const recentEvents = 8

// emittedRing is how many lifecycle hashes the model keeps: at least a
// simulated kernel's whole log (ReplayWindow; the engine checks its log
// capacity against it at compile time), so every event a late subscriber
// can replay is compared. A bounded ring instead of a slice of every hash:
// a long run's memory stays flat.
const emittedRing = 1024

// New is the oracle of one run of the agent loop t, configured as cfg
// (its limits, root name, delegate tool and idempotent tools). derive
// builds the span derivation it holds to I25: kernel/spans's, or in tests
// a broken one.
func New(t Tree, cfg kernel.Config, derive func(spans.Config) SpanDeriver) *Oracle {
	o := &Oracle{m: newModel(t, cfg), probes: newProbeSet()}
	o.spans = derive(spans.Config{RootName: cfg.RootName, DelegateTool: cfg.DelegateTool})
	j := judge{o, o.m}
	all := &o.all
	all.stale = staleChecker{judge: j}
	all.freeze = freezeChecker{judge: j}
	all.input = inputChecker{judge: j}
	all.fsm = fsmChecker{judge: j, legal: legalMoves()}
	all.transcript = transcriptChecker{judge: j}
	all.outcome = outcomeChecker{judge: j}
	all.content = contentChecker{judge: j}
	all.call = callChecker{judge: j}
	all.cancel = cancelChecker{judge: j}
	all.quiesce = quiesceChecker{judge: j}
	all.accounting = accountingChecker{judge: j}
	all.progress = progressChecker{judge: j}
	all.view = viewChecker{judge: j, quiet: true}
	all.profile = profileChecker{judge: j}
	o.quiesce = &all.quiesce
	o.deadline = newDeadlineChecker(j)
	o.spanChecker = newSpanChecker(j)
	// The order is the order violations of one step are reported in.
	all.checks = [...]checker{
		&all.stale,
		&all.freeze,
		&all.input,
		&all.fsm,
		newUserTextChecker(j),
		&all.transcript,
		&all.outcome,
		&all.content,
		&all.call,
		&all.cancel,
		o.quiesce,
		o.deadline,
		&all.accounting,
		&all.progress,
		&all.view,
		o.spanChecker,
		&all.profile,
	}
	o.checks = all.checks[:]
	return o
}

// Violate records a violation of inv by agent (kernel.NoAgent: the tree),
// located at the oracle's clock: the simulator reports this way what it
// checks itself (a rebuilt host, I24; the event budget).
func (o *Oracle) Violate(inv Invariant, agent kernel.AgentID, format string, args ...any) {
	if len(o.out) >= maxViolations {
		return
	}
	path := ""
	if a := o.m.agent(agent); a != nil {
		path = a.path
	}
	v := Violation{Invariant: inv, At: o.m.now, Agent: path, Detail: fmt.Sprintf(format, args...)}
	n := min(o.nrecent, recentEvents)
	for i := o.nrecent - n; i < o.nrecent; i++ {
		v.Recent = append(v.Recent, textcut.Clip(o.recent[i%recentEvents].Describe(), 160))
	}
	o.out = append(o.out, v)
}

// Before is told the event about to be stepped and the agent it is
// addressed to.
func (o *Oracle) Before(ev *kernel.Event, target kernel.AgentID) {
	// Events are formatted only when a violation quotes them.
	o.recent[o.nrecent%recentEvents] = *ev
	o.nrecent++
	o.m.now = ev.At
	for _, c := range o.checks {
		c.elapse()
	}
	o.m.begin(ev, target)
	o.probes.before(o.m)
}

// After reads the step's effects and judges the step.
func (o *Oracle) After(effs []kernel.Effect) {
	o.m.apply(effs)
	s := &o.m.s
	o.spanChecker.changes = o.spans.Step(s.ev, effs)
	if s.chunkOnly {
		// Most steps are a chunk of a running stream that changed nothing
		// but that stream: its text and its stall deadline. No checker has
		// anything to judge in it but the deadline's move — and the spans,
		// should the derivation have changed one.
		o.deadline.lower(s.op.lastChunkAt + o.m.lim.StallTimeout)
		if len(o.spanChecker.changes) > 0 {
			o.spanChecker.step(s)
		}
		return
	}
	for _, c := range o.checks {
		c.step(&o.m.s)
	}
	if o.m.s.is(kernel.EvRecover) {
		// A recovery ends a shutdown the crashed host had begun: its turns
		// settled in this step (reason shutdown, judged above); the new host
		// was not asked to stop (docs/semantics.md, "Recovery").
		o.m.shutdown = false
	}
	o.probes.observe(o.m)
}

// Finish reads every agent once more and runs the end-of-run checks.
func (o *Oracle) Finish() {
	o.m.readAll()
	for _, c := range o.checks {
		c.step(&o.m.s)
	}
	// A run that ended stuck is told first; then what it left undone.
	o.quiesce.finish()
	for _, c := range o.checks {
		if c != checker(o.quiesce) {
			c.finish()
		}
	}
}

// Activity notes a user input, a fault or a crash at t: the liveness
// bound runs from the last one.
func (o *Oracle) Activity(t time.Duration) { o.quiesce.activity(t) }
