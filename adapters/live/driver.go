package live

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// ErrStopped is returned by inputs sent after Run has returned, and by
// Submit, Say, Interject and Cancel while the tree shuts down (the shutdown
// already cancelled everything and no turn may start; Inspect still works).
// While the tree shuts down, Submit, Say and Interject wrap
// kernel.ErrShutdown as well.
var ErrStopped = errors.New("live driver stopped")

// ErrWriteAhead is what Run returns (wrapped, with the cause) when
// Config.WriteAhead failed: the driver stopped acting at that step.
var ErrWriteAhead = errors.New("write-ahead log failed")

// ErrRejected wraps the kernel's refusal of an input (an EffError), e.g. a
// submit while the root is working. The error wraps the refusal's own error
// too (kernel.Effect.Err): errors.Is matches kernel.ErrEmptyText,
// kernel.ErrShutdown or kernel.ErrUnknownAgent, and errors.As finds a
// *fsm.UndeclaredError.
var ErrRejected = errors.New("kernel rejected the input")

// Config configures a Driver.
type Config struct {
	// Kernel configures the agent tree. Its Limits must be set (the zero
	// Limits are refused): start from kernel.DefaultLimits().
	Kernel kernel.Config
	// Model streams the LLM requests (required).
	Model ports.Model
	// Tools runs the tool calls (required; delegations never reach it).
	Tools ports.Tools
	// Observer, when set, is called on the kernel's goroutine after every
	// Step, with the effects already executed. It must not block for long:
	// the kernel waits for it (so does every stream, by back-pressure).
	Observer func(ports.Step)
	// WriteAhead, when set, is called on the kernel's goroutine after
	// every Step and before any of its effects is executed: a durable host
	// persists the event there (adapters/wal), so nothing the event caused
	// happens in the world before the event is on disk (docs/durable.md).
	// If it returns an error, the step's effects are never executed and
	// the driver stops at once: every op's context is cancelled, no input
	// is accepted (ErrStopped), and Run returns the error wrapped with
	// ErrWriteAhead after waiting at most the kernel's Grace for the op
	// goroutines (those still running are then listed by Abandoned). The
	// log's last record is then the step before, and a recovery from it
	// resolves what was in flight.
	WriteAhead func(ports.Step) error
	// Policy, when set, is asked about every call waiting for approval
	// (kernel.Config.Ask names its tool; docs/semantics.md, "Approvals"),
	// re-asks after a recovery included, on the kernel's goroutine after
	// the Observer; what it decides is stepped as the driver's next input
	// (logged like any decision). Calls it leaves undecided wait for
	// Decide.
	Policy Policy
}

// eventBuffer bounds the world events queued for the kernel's goroutine;
// beyond it, streams and tools wait (back-pressure).
const eventBuffer = 256

// Driver runs one agent tree live. Create it with New, run it with Run (in
// its own goroutine), feed user input with Submit, Say, Interject and Cancel
// from any goroutine, and end it with Shutdown or by ending Run's context.
//
// An input (Submit, Say, Interject, Cancel, Inspect, Shutdown) is handed to
// Run's goroutine and returns once the kernel has stepped it, with the
// kernel's verdict: it waits while Run has not started (or is busy), for as
// long as its ctx allows (it then returns ctx's error, the input not sent),
// and returns ErrStopped at once after Run has returned.
type Driver struct {
	cfg     Config
	k       *kernel.Kernel
	inputs  chan input
	events  chan kernel.Event
	quit    chan struct{} // closed when the loop has ended: senders give up
	done    chan struct{} // closed when Run has returned
	started atomic.Bool

	// Owned by the loop goroutine.
	start    time.Time
	now      time.Duration
	base     context.Context // parent of every op context
	ops      map[kernel.OpID]context.CancelFunc
	timers   timers
	stopping bool  // the kernel has stepped EvShutdown
	failed   error // WriteAhead failed: the loop ends at once
	// recover: the kernel was rebuilt from a log (Resume); Run steps
	// EvRecover first, its clock resuming at the kernel's last event.
	recover bool
	// decided: the decisions Config.Policy made, stepped before the
	// loop reads anything else.
	decided []kernel.Event

	mu    sync.Mutex
	procs map[kernel.OpID]*opProc // op goroutines that have not returned
}

// New builds the kernel and the driver; nothing runs until Run.
func New(cfg Config) (*Driver, error) {
	if cfg.Model == nil {
		return nil, errors.New("live: Config.Model is required")
	}
	if cfg.Tools == nil {
		return nil, errors.New("live: Config.Tools is required")
	}
	k, err := kernel.New(cfg.Kernel)
	if err != nil {
		return nil, err
	}
	return build(cfg, k), nil
}

// Resume returns a driver for a kernel rebuilt by replaying the events a
// crashed process logged (adapters/wal.Rebuild). Run first steps
// kernel.Recover, which resolves every op that process had in flight, and
// its clock resumes at the kernel's last event time (k.Now()): the time the
// process was down does not count against any deadline, and the deadlines
// the kernel arms again keep their old values (docs/durable.md, "Remaining
// time"). cfg.Kernel is ignored: k's configuration is the one its log
// recorded.
func Resume(cfg Config, k *kernel.Kernel) (*Driver, error) {
	if cfg.Model == nil {
		return nil, errors.New("live: Config.Model is required")
	}
	if cfg.Tools == nil {
		return nil, errors.New("live: Config.Tools is required")
	}
	if k == nil {
		return nil, errors.New("live: Resume needs a kernel")
	}
	cfg.Kernel = k.Config()
	d := build(cfg, k)
	d.recover = true
	return d, nil
}

func build(cfg Config, k *kernel.Kernel) *Driver {
	return &Driver{
		cfg:    cfg,
		k:      k,
		inputs: make(chan input),
		events: make(chan kernel.Event, eventBuffer),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
		ops:    make(map[kernel.OpID]context.CancelFunc),
		timers: newTimers(),
		procs:  make(map[kernel.OpID]*opProc),
	}
}

// Kernel returns the kernel for reading before Run is called (e.g. the
// root's starting history) or after it has returned; while Run runs only
// its goroutine may touch the kernel (use Inspect). Calling Kernel
// concurrently with the start of Run is a race.
func (d *Driver) Kernel() *kernel.Kernel {
	select {
	case <-d.done:
		return d.k
	default:
	}
	if !d.started.Load() {
		return d.k
	}
	panic("live: Driver.Kernel called while Run is running; use Inspect")
}

// Done is closed when Run has returned.
func (d *Driver) Done() <-chan struct{} { return d.done }

// Run owns the kernel until a shutdown — ctx is done or Shutdown was
// called — and then shuts the tree down gracefully: the kernel steps
// EvShutdown (the root's turn aborts with reason shutdown, every working
// descendant with parent_cancelled, every op is cancelled), and Run keeps stepping until the kernel is quiescent (every
// op acknowledged its cancel, or was abandoned after the grace period). It
// then waits for every op goroutine the kernel has not abandoned (each has
// already delivered its last event) and returns nil; abandoned ones may
// still run (see Abandoned and the package doc). A second call returns an
// error.
func (d *Driver) Run(ctx context.Context) error {
	if !d.started.CompareAndSwap(false, true) {
		return errors.New("live: Run called twice")
	}
	defer close(d.done)
	// A resumed kernel's clock goes on from its last logged event.
	d.now = d.k.Now()
	d.start = time.Now().Add(-d.now)
	base, cancelAll := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelAll()
	d.base = base
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()

	if d.recover {
		d.step(kernel.Recover(d.clock()))
	}
	ctxDone := ctx.Done()
	for d.stepDecided(); d.failed == nil && (!d.stopping || !d.k.Quiescent()); d.stepDecided() {
		var timerC <-chan time.Time
		if at, ok := d.timers.next(); ok {
			timer.Reset(max(0, at-time.Since(d.start)))
			timerC = timer.C
		}
		select {
		case in := <-d.inputs:
			d.onInput(in)
		case ev := <-d.events:
			d.onWorld(ev)
		case <-timerC:
			d.fireDue()
		case <-ctxDone:
			ctxDone = nil
			d.shutdown()
		}
	}
	close(d.quit)
	if d.failed != nil {
		cancelAll()
		d.waitOwnedFor(d.k.Config().Grace)
		return fmt.Errorf("live: %w: %w", ErrWriteAhead, d.failed)
	}
	d.waitOwned()
	return nil
}

// shutdown steps EvShutdown once; from then on the loop accepts no input
// but Inspect and ends when the kernel is quiescent.
func (d *Driver) shutdown() {
	if d.stopping {
		return
	}
	d.stopping = true
	d.step(kernel.Shutdown(d.clock()))
}

// clock is the event clock: time since Run started, never decreasing.
func (d *Driver) clock() time.Duration {
	if t := time.Since(d.start); t > d.now {
		d.now = t
	}
	return d.now
}

// step feeds one event, executes its effects in order, and shows the step
// to the observer. It returns the refusals (EffError) among the effects.
func (d *Driver) step(ev kernel.Event) []error {
	target := d.k.Target(ev)
	var before fsm.State
	if target != kernel.NoAgent {
		before = d.k.Agent(target).State()
	}
	effects := d.k.Step(ev)
	if d.cfg.WriteAhead != nil && d.failed == nil {
		if err := d.cfg.WriteAhead(ports.Step{Kernel: d.k, Event: ev, Target: target, Before: before, Effects: effects}); err != nil {
			d.failed = err
		}
	}
	if d.failed != nil {
		return nil // nothing this event caused may happen: it is not logged
	}
	var refused []error
	for i := range effects {
		if e := &effects[i]; e.Kind == kernel.EffError {
			err := e.Err
			if err == nil { // a kernel always sets it; keep the text if not
				err = errors.New(e.Detail)
			}
			refused = append(refused, err)
		}
		d.execute(&effects[i])
	}
	if d.cfg.Observer != nil {
		d.cfg.Observer(ports.Step{Kernel: d.k, Event: ev, Target: target, Before: before, Effects: effects})
	}
	d.askPolicy(effects)
	if refused == nil {
		if err := staleDecision(ev, effects); err != nil {
			refused = append(refused, err)
		}
	}
	return refused
}

func (d *Driver) execute(e *kernel.Effect) {
	switch e.Kind {
	case kernel.EffStartLLM:
		d.startStream(e)
	case kernel.EffStartTool:
		d.startTool(e)
	case kernel.EffCancelLLM, kernel.EffCancelTool:
		// The op's goroutine answers with its acknowledgement when it has
		// stopped; the cancel func stays until that terminal event arrives
		// or the kernel abandons the op.
		if cancel, ok := d.ops[e.Op]; ok {
			cancel()
		}
	case kernel.EffSetTimer:
		d.timers.set(e.Op, e.At)
	case kernel.EffStopTimer:
		d.timers.stop(e.Op)
	case kernel.EffEmit:
		if e.Life.Kind == kernel.LifeOpEnded && e.Life.End == kernel.OpAbandoned {
			d.abandon(e.Life.Op, e.Life.At)
		}
	}
}

func (d *Driver) path(id kernel.AgentID) string { return d.k.Agent(id).Path() }

// onWorld steps an event from a stream or tool goroutine. A terminal event
// (stream end or error, tool result) is the last its goroutine sends, so the
// op's context is released here.
func (d *Driver) onWorld(ev kernel.Event) {
	switch ev.Kind {
	case kernel.EvLLMEnd, kernel.EvLLMError, kernel.EvToolResult:
		if cancel, ok := d.ops[ev.Op]; ok {
			cancel()
			delete(d.ops, ev.Op)
		}
	}
	ev.At = d.clock()
	d.step(ev)
}

// fireDue fires every live timer that is due, in (time, op) order; timers a
// fired Step stops or sets are honoured within the same pass.
func (d *Driver) fireDue() {
	now := d.clock()
	for d.failed == nil {
		op, ok := d.timers.popDue(now)
		if !ok {
			return
		}
		d.step(kernel.TimerFired(now, op))
	}
}

// Inputs.

type inputKind uint8

const (
	inSubmit inputKind = iota + 1
	inInterject
	inSay
	inCancel
	inInspect
	inShutdown
	inCompact
	inDecide
)

type input struct {
	kind    inputKind
	text    string
	agent   kernel.AgentID
	turn    uint64
	callID  string // a decision's
	digest  string
	verdict kernel.Verdict
	inspect func(*kernel.Kernel)
	reply   chan error // buffered: the loop never blocks on it
}

func (d *Driver) onInput(in input) {
	switch {
	case in.kind == inInspect:
		in.inspect(d.k)
		in.reply <- nil
		return
	case in.kind == inShutdown:
		d.shutdown()
		in.reply <- nil
		return
	case d.stopping && in.kind != inDecide:
		// The kernel would refuse a turn now (kernel.ErrShutdown), and a
		// cancel has nothing left to do: the shutdown cancelled everything.
		if in.kind == inCancel {
			in.reply <- ErrStopped
		} else {
			in.reply <- fmt.Errorf("%w: %w", ErrStopped, kernel.ErrShutdown)
		}
		return
	}
	var ev kernel.Event
	now := d.clock()
	switch in.kind {
	case inSubmit:
		ev = kernel.Submit(now, in.text)
	case inInterject:
		ev = kernel.Interject(now, in.text)
	case inSay:
		// Decided here, on the kernel's goroutine, so the choice cannot race
		// the end of a turn: Idle starts a turn, anything else interjects.
		if d.k.Agent(kernel.Root).State() == fsm.Idle {
			ev = kernel.Submit(now, in.text)
		} else {
			ev = kernel.Interject(now, in.text)
		}
	case inCancel:
		ev = kernel.CancelTurn(now, in.agent, in.turn)
	case inCompact:
		ev = kernel.Compact(now, in.text)
	case inDecide:
		// Accepted in every state: after a shutdown it is stale, as the
		// shutdown withdrew every wait (docs/semantics.md, "Inputs").
		ev = kernel.Decide(now, in.agent, in.callID, in.digest, in.verdict, in.text)
	}
	in.reply <- d.outcome(ev, d.step(ev))
}

// outcome is what the caller of an input is told once the kernel stepped
// ev: nil, the kernel's refusals (ErrRejected), a stale decision's
// kernel.ErrDecisionStale (it changed nothing, and nothing was wrong with
// it), or ErrStopped when the step stopped the driver.
func (d *Driver) outcome(ev kernel.Event, refused []error) error {
	switch {
	case d.failed != nil:
		return ErrStopped
	case len(refused) == 1 && errors.Is(refused[0], kernel.ErrDecisionStale):
		return refused[0]
	case len(refused) > 0:
		return fmt.Errorf("%s: %w: %w", ev.Kind, ErrRejected, refusals(refused))
	}
	return nil
}

// refusals are the kernel's refusals of one input, as one error: its text
// joins theirs with "; " (one line, as the CLI prints it), and errors.Is and
// errors.As see each of them.
type refusals []error

func (r refusals) Error() string {
	var b strings.Builder
	for i, err := range r {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func (r refusals) Unwrap() []error { return r }

func (d *Driver) do(ctx context.Context, in input) error {
	in.reply = make(chan error, 1)
	select {
	case d.inputs <- in:
	case <-ctx.Done():
		return ctx.Err()
	case <-d.quit:
		return ErrStopped
	}
	return <-in.reply // the loop replies before it reads anything else
}

// Submit starts a turn with text (the root must be Idle; an Interrupted root
// queues it for when the tree has settled).
func (d *Driver) Submit(ctx context.Context, text string) error {
	return d.do(ctx, input{kind: inSubmit, text: text})
}

// Interject sends text typed while the root works (F8).
func (d *Driver) Interject(ctx context.Context, text string) error {
	return d.do(ctx, input{kind: inInterject, text: text})
}

// Say is what a REPL sends for a typed line: a submit when the root is Idle,
// an interjection otherwise, decided on the kernel's goroutine.
func (d *Driver) Say(ctx context.Context, text string) error {
	return d.do(ctx, input{kind: inSay, text: text})
}

// Cancel cancels agent's turn; turn binds it to one turn (0: the current
// one), so a late Ctrl-C cannot cancel the next turn (F14). It returns once
// the kernel has cancelled every stream and tool of the turn (a cancel of
// a turn that already ended is ignored: nil); the turn itself ends —
// LifeTurnEnded, interrupted with reason user_cancel, through the Observer —
// when they have acknowledged or been abandoned, at most Grace later.
func (d *Driver) Cancel(ctx context.Context, agent kernel.AgentID, turn uint64) error {
	return d.do(ctx, input{kind: inCancel, agent: agent, turn: turn})
}

// Compact asks for the root's history to be compacted now, with focus (may
// be empty) for the summary (chat's /compact; docs/semantics.md,
// "Compaction"). The kernel refuses it while the root works
// (kernel.ErrNotIdle); with nothing to compact it is a recorded no-op. The
// compaction runs as a turn of its own, whose end the Observer sees.
func (d *Driver) Compact(ctx context.Context, focus string) error {
	return d.do(ctx, input{kind: inCompact, text: focus})
}

// Inspect runs fn on the kernel's goroutine (read-only access to the tree),
// also while the tree shuts down. A nil fn is an error.
func (d *Driver) Inspect(ctx context.Context, fn func(*kernel.Kernel)) error {
	if fn == nil {
		return errors.New("live: Inspect needs a function")
	}
	return d.do(ctx, input{kind: inInspect, inspect: fn})
}

// Shutdown shuts the tree down the way ending Run's context does — the
// root's running turn ends interrupted with reason shutdown (every working
// descendant with parent_cancelled), input queued for a next turn is
// discarded, Run returns once the kernel is quiescent
// (docs/semantics.md, "Inputs") — but is an input: it
// returns as soon as the kernel has stepped EvShutdown, so the caller keeps
// its own loop (signals, rendering) running while the tree settles, and
// watches the turn end through the Observer or Run's return through Done.
// This is what a host does on SIGTERM; Cancel is the user's interrupt
// (reason user_cancel) and leaves the driver running. Shutdown is
// idempotent: it returns nil when a shutdown has already begun or Run has
// returned.
func (d *Driver) Shutdown(ctx context.Context) error {
	if err := d.do(ctx, input{kind: inShutdown}); !errors.Is(err, ErrStopped) {
		return err
	}
	return nil
}
