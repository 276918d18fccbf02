package live

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// ErrStopped is returned by inputs sent after the driver has stopped (or
// while it is shutting down: a shutdown accepts no new input).
var ErrStopped = errors.New("live driver stopped")

// ErrRejected wraps the kernel's refusal of an input (an EffError), e.g. a
// submit while the root is working.
var ErrRejected = errors.New("kernel rejected the input")

// Config configures a Driver.
type Config struct {
	// Kernel configures the agent tree.
	Kernel kernel.Config
	// Model streams the LLM requests (required).
	Model Model
	// Tools runs the tool calls (required; delegations never reach it).
	Tools Tools
	// Observer, when set, is called on the kernel's goroutine after every
	// Step, with the effects already executed. It must not block for long:
	// the kernel waits for it (so does every stream, by back-pressure).
	Observer func(Step)
}

// eventBuffer bounds the world events queued for the kernel's goroutine;
// beyond it, streams and tools wait (back-pressure).
const eventBuffer = 256

// Step is what the observer sees of one kernel Step: the event as fed (At
// stamped), the agent it targeted and that agent's state before, and the
// effects. Kernel and Effects are valid only during the call: the effects
// slice is reused by the next Step, and the kernel must only be read (the
// observer runs on its owning goroutine, so reading is race-free).
type Step struct {
	Kernel  *kernel.Kernel
	Event   kernel.Event
	Target  kernel.AgentID
	Before  fsm.State
	Effects []kernel.Effect
}

// Driver runs one agent tree live. Create it with New, run it with Run (in
// its own goroutine), and feed user input with Submit, Say, Interject and
// Cancel from any goroutine.
type Driver struct {
	cfg     Config
	k       *kernel.Kernel
	inputs  chan input
	events  chan kernel.Event
	quit    chan struct{} // closed when the loop has ended: senders give up
	done    chan struct{} // closed when Run has returned
	started atomic.Bool

	// Owned by the loop goroutine.
	start  time.Time
	now    time.Duration
	base   context.Context // parent of every op context
	ops    map[kernel.OpID]context.CancelFunc
	timers timerHeap
	live   map[kernel.OpID]time.Duration // timers not stopped or fired
	wg     sync.WaitGroup
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
	return &Driver{
		cfg:    cfg,
		k:      k,
		inputs: make(chan input),
		events: make(chan kernel.Event, eventBuffer),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
		ops:    make(map[kernel.OpID]context.CancelFunc),
		live:   make(map[kernel.OpID]time.Duration),
	}, nil
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

// Run owns the kernel until ctx is done, then shuts the tree down
// gracefully: it feeds EvShutdown (every turn aborts with reason shutdown,
// every op is cancelled), keeps stepping until the kernel is quiescent
// (acknowledgements, or abandonment after the grace period), cancels every
// op context still open, and waits for every goroutine it started. It
// returns nil after a shutdown, or an error if called twice.
func (d *Driver) Run(ctx context.Context) error {
	if !d.started.CompareAndSwap(false, true) {
		return errors.New("live: Run called twice")
	}
	defer close(d.done)
	d.start = time.Now()
	base, cancelAll := context.WithCancel(context.WithoutCancel(ctx))
	d.base = base
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()

	ctxDone, inputs := ctx.Done(), d.inputs
	stopping := false
	for !stopping || !d.k.Quiescent() {
		var timerC <-chan time.Time
		if at, ok := d.timers.next(d.live); ok {
			timer.Reset(max(0, at-time.Since(d.start)))
			timerC = timer.C
		}
		select {
		case in := <-inputs:
			d.onInput(in)
		case ev := <-d.events:
			d.onWorld(ev)
		case <-timerC:
			d.fireDue()
		case <-ctxDone:
			// No new input during a shutdown: the kernel would refuse it.
			stopping, ctxDone, inputs = true, nil, nil
			d.step(kernel.Shutdown(d.clock()))
		}
	}
	close(d.quit)
	// Quiescent: what is still running was abandoned (and already
	// cancelled); cancel the rest defensively and wait for all of it.
	cancelAll()
	d.wg.Wait()
	return nil
}

// clock is the event clock: time since Run started, never decreasing.
func (d *Driver) clock() time.Duration {
	if t := time.Since(d.start); t > d.now {
		d.now = t
	}
	return d.now
}

// step feeds one event, executes its effects in order, and shows the step
// to the observer. It returns the details of any EffError.
func (d *Driver) step(ev kernel.Event) []string {
	target := d.k.Target(ev)
	var before fsm.State
	if target != kernel.NoAgent {
		before = d.k.Agent(target).State()
	}
	effects := d.k.Step(ev)
	var refused []string
	for i := range effects {
		if effects[i].Kind == kernel.EffError {
			refused = append(refused, effects[i].Detail)
		}
		d.execute(&effects[i])
	}
	if d.cfg.Observer != nil {
		d.cfg.Observer(Step{Kernel: d.k, Event: ev, Target: target, Before: before, Effects: effects})
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
		// stopped; the cancel func stays until that terminal event arrives.
		if cancel, ok := d.ops[e.Op]; ok {
			cancel()
		}
	case kernel.EffSetTimer:
		d.live[e.Op] = e.At
		heap.Push(&d.timers, timerEntry{at: e.At, op: e.Op})
	case kernel.EffStopTimer:
		delete(d.live, e.Op) // lazily dropped from the heap
	}
}

func (d *Driver) path(id kernel.AgentID) string { return d.k.Agent(id).Path() }

// spawn runs one op in a goroutine the driver owns: its context is
// registered under op (so the kernel's cancel effect reaches it), Run waits
// for it, and the terminal event run returns is sent to the loop.
func (d *Driver) spawn(op kernel.OpID, run func(ctx context.Context) kernel.Event) {
	ctx, cancel := context.WithCancel(d.base)
	d.ops[op] = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.send(run(ctx))
	}()
}

func (d *Driver) startStream(e *kernel.Effect) {
	req := Request{Op: e.Op, Agent: e.Agent, Path: d.path(e.Agent), Messages: e.Messages}
	d.spawn(req.Op, func(ctx context.Context) kernel.Event {
		s := &streamSink{d: d, op: req.Op}
		err := d.stream(ctx, req, s)
		switch {
		case ctx.Err() != nil:
			return kernel.LLMError(0, req.Op, kernel.FailureCancelled, "cancelled")
		case err == nil:
			ev := kernel.LLMEnd(0, req.Op)
			ev.Usage = s.usage
			return ev
		default:
			return kernel.LLMError(0, req.Op, failureOf(err, s.chunk), err.Error())
		}
	})
}

// stream runs the model, turning a panic into a bad-response failure: a
// broken adapter must fail its request, not the process.
func (d *Driver) stream(ctx context.Context, req Request, s *streamSink) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = Fail(kernel.FailureBadResponse, errors.New(panicText("model", v)))
		}
	}()
	return d.cfg.Model.Stream(ctx, req, s)
}

func (d *Driver) startTool(e *kernel.Effect) {
	call := Call{Op: e.Op, Agent: e.Agent, Path: d.path(e.Agent), ToolCall: e.Call}
	d.spawn(call.Op, func(ctx context.Context) kernel.Event {
		r := d.runTool(ctx, call)
		return kernel.ToolResult(0, call.Op, r.Status, r.Content)
	})
}

// runTool runs a tool, turning a panic into an error result (never a crash).
func (d *Driver) runTool(ctx context.Context, call Call) (r ToolResult) {
	defer func() {
		if v := recover(); v != nil {
			r = ToolResult{Status: kernel.ToolError, Content: panicText("tool "+call.Name, v)}
		}
	}()
	return d.cfg.Tools.Run(ctx, call)
}

// send delivers a world event to the loop, or drops it once the loop has
// ended (nothing could use it then).
func (d *Driver) send(ev kernel.Event) {
	select {
	case d.events <- ev:
	case <-d.quit:
	}
}

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
	for {
		at, ok := d.timers.next(d.live)
		if !ok || at > now {
			return
		}
		t := heap.Pop(&d.timers).(timerEntry)
		delete(d.live, t.op)
		d.step(kernel.TimerFired(now, t.op))
	}
}

// streamSink turns one stream's output into numbered kernel events. Only the
// stream's goroutine calls it.
type streamSink struct {
	d     *Driver
	op    kernel.OpID
	chunk uint32
	usage *kernel.Usage
}

func (s *streamSink) Text(text string) {
	if text == "" {
		return
	}
	s.chunk++
	s.d.send(kernel.TextDelta(0, s.op, s.chunk, text))
}

func (s *streamSink) Call(c kernel.CallDelta) {
	s.chunk++
	s.d.send(kernel.CallFragment(0, s.op, s.chunk, c))
}

func (s *streamSink) Retry(attempt int, delay time.Duration, cause string) {
	s.d.send(kernel.LLMRetry(0, s.op, attempt, delay, cause))
}

func (s *streamSink) Usage(u kernel.Usage) { s.usage = &u }

// Inputs.

type inputKind uint8

const (
	inSubmit inputKind = iota + 1
	inInterject
	inSay
	inCancel
	inInspect
)

type input struct {
	kind    inputKind
	text    string
	agent   kernel.AgentID
	turn    uint64
	inspect func(*kernel.Kernel)
	reply   chan error // buffered: the loop never blocks on it
}

func (d *Driver) onInput(in input) {
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
	case inInspect:
		in.inspect(d.k)
		in.reply <- nil
		return
	}
	if refused := d.step(ev); len(refused) > 0 {
		in.reply <- fmt.Errorf("%s: %w: %s", ev.Kind, ErrRejected, strings.Join(refused, "; "))
		return
	}
	in.reply <- nil
}

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
// one), so a late Ctrl-C cannot cancel the next turn (F14).
func (d *Driver) Cancel(ctx context.Context, agent kernel.AgentID, turn uint64) error {
	return d.do(ctx, input{kind: inCancel, agent: agent, turn: turn})
}

// Inspect runs fn on the kernel's goroutine (read-only access to the tree).
func (d *Driver) Inspect(ctx context.Context, fn func(*kernel.Kernel)) error {
	return d.do(ctx, input{kind: inInspect, inspect: fn})
}

// timerHeap orders live timers by (deadline, op id): the kernel's op ids
// increase, so equal deadlines fire in the order they were set.
type timerEntry struct {
	at time.Duration
	op kernel.OpID
}

type timerHeap []timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].op < h[j].op
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// next drops stopped timers from the top and returns the earliest live
// deadline.
func (h *timerHeap) next(live map[kernel.OpID]time.Duration) (time.Duration, bool) {
	for h.Len() > 0 {
		top := (*h)[0]
		if at, ok := live[top.op]; ok && at == top.at {
			return top.at, true
		}
		heap.Pop(h)
	}
	return 0, false
}
