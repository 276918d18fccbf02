package host

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/temporal/protocol"
)

// tree is one run of the workflow: the kernel and the Temporal objects
// that stand for its effects. Only the workflow's main coroutine steps the
// kernel; update handlers queue their input (inbox) and wait for its
// answer, the query handler only reads.
type tree struct {
	ctx  workflow.Context
	in   protocol.Tree
	opts protocol.Options
	k    *kernel.Kernel // nil until the toolbox is known
	// tools are the worker's tools' names (the toolbox's), for the
	// lifecycle query's clients.
	tools []string

	start time.Time     // workflow time of the run's first task: kernel time 0
	now   time.Duration // the last event's kernel time (never decreases)

	ops    map[kernel.OpID]*opRun // live requests and tool calls
	timers map[kernel.OpID]*timer // live timers
	due    []kernel.OpID          // timers set at or before now: fire in the next drain

	inbox    []*input // inputs from update handlers, in arrival order
	chunks   workflow.ReceiveChannel
	shutdown workflow.ReceiveChannel

	stopping bool   // the kernel has stepped EvShutdown for this run
	closing  string // protocol.Closing*: the run takes no more input
	// hardStop: the history reached StopAt*: the running turn was shut
	// down so that the run can continue as new.
	hardStop bool

	// The span export (SpanExporter; spans nil: none): the derivation,
	// fed every step; whether the batches carry content; the spans the
	// task ended, not yet scheduled for export; the exports scheduled;
	// the conversation the spans are in (the workflow's id, which every
	// run of the chain shares).
	spans   *spans.Deriver
	content bool
	pending []protocol.EndedSpan
	exports []workflow.Future
	conv    string
}

// Tree is the workflow: one execution runs one agent tree with the
// kernel, turning its effects into activities and timers and the world's
// answers into events (docs/durable.md, "On Temporal").
// It runs until the tree is shut down (ShutdownSignal), and continues as
// new, carrying the root's transcript, when its history grows long.
func Tree(ctx workflow.Context, in protocol.Tree) (protocol.Result, error) {
	t := &tree{
		ctx:      ctx,
		in:       in,
		opts:     in.Options.WithDefaults(),
		start:    workflow.Now(ctx),
		ops:      make(map[kernel.OpID]*opRun),
		timers:   make(map[kernel.OpID]*timer),
		chunks:   workflow.GetSignalChannel(ctx, protocol.ChunksSignal),
		shutdown: workflow.GetSignalChannel(ctx, protocol.ShutdownSignal),
		conv:     workflow.GetInfo(ctx).WorkflowExecution.ID,
	}
	if err := t.handle(); err != nil {
		return protocol.Result{}, err
	}
	if err := t.build(); err != nil {
		return protocol.Result{}, err
	}
	for {
		t.drain()
		t.flushSpans()
		if done, res, err := t.end(); done {
			return res, err
		}
		if err := workflow.Await(ctx, t.ready); err != nil {
			return protocol.Result{}, err
		}
	}
}

// build asks a worker which tools are idempotent and builds the kernel.
// Inputs that arrive meanwhile wait in the inbox.
func (t *tree) build() error {
	actx := workflow.WithActivityOptions(t.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 10 * time.Second},
	})
	var box protocol.Toolbox
	if err := workflow.ExecuteActivity(actx, protocol.ToolboxActivity).Get(t.ctx, &box); err != nil {
		return fmt.Errorf("toolbox: %w", err)
	}
	history, err := t.in.History.Messages()
	if err != nil {
		return temporal.NewNonRetryableApplicationError("the carried history", "bad_input", err)
	}
	k, err := kernel.New(kernel.Config{
		Limits:     t.in.Limits,
		System:     t.in.System,
		History:    history,
		Turns:      t.in.Turns,
		Idempotent: box.Idempotent,
		Ask:        t.in.Ask,
	})
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), "bad_input", err)
	}
	t.k, t.tools = k, box.Tools
	t.deriveSpans(box.Spans)
	return nil
}

// clock is the kernel time of the events stepped now: workflow time since
// the run began (so the time workers were down counts, unlike a resumed
// WAL's clock), never earlier than the last event's.
func (t *tree) clock() time.Duration {
	if d := workflow.Now(t.ctx).Sub(t.start); d > t.now {
		t.now = d
	}
	return t.now
}

// ready reports whether anything waits to be stepped: the condition the
// main loop sleeps on.
func (t *tree) ready() bool {
	if len(t.inbox) > 0 || len(t.due) > 0 || t.chunks.Len() > 0 || t.shutdown.Len() > 0 {
		return true
	}
	for _, a := range t.ops {
		if a.future.IsReady() {
			return true
		}
	}
	for _, tm := range t.timers {
		if tm.future.IsReady() {
			return true
		}
	}
	return false
}

// drain steps everything that is ready, in a fixed order — user input
// (updates, then a shutdown), then stream chunks, then finished
// activities in op order, then fired timers in op order — until nothing
// is left. What arrives within one workflow task is stepped in that
// order, whatever order the service recorded it in (docs/durable.md,
// "One instant, one order" on Temporal): deterministic on replay, and the
// same rule as the simulator's (inputs before the world's events at one
// instant; an answer before a deadline).
func (t *tree) drain() {
	for progress := true; progress; {
		progress = false
		for len(t.inbox) > 0 {
			in := t.inbox[0]
			t.inbox = t.inbox[1:]
			t.onInput(in)
			progress = true
		}
		for t.shutdown.ReceiveAsync(nil) {
			t.stop(false)
			progress = true
		}
		var batch protocol.Chunks
		for t.chunks.ReceiveAsync(&batch) {
			t.onChunks(batch)
			batch = protocol.Chunks{}
			progress = true
		}
		if t.finished() {
			progress = true
		}
		if t.fireTimers() {
			progress = true
		}
		if !t.hardStop && t.turnTooLong() {
			t.hardStop = true
			t.stop(true)
			progress = true
		}
	}
}

// finished steps the answers of the activities that have finished, in op
// order; then, if any of them lost its worker, the recovery. Answers that
// arrived go in first: a lost worker must not cost another activity's
// real result.
func (t *tree) finished() bool {
	var lost []kernel.OpID
	stepped := false
	for _, id := range slices.Sorted(maps.Keys(t.ops)) {
		a, ok := t.ops[id]
		if !ok || !a.future.IsReady() {
			continue
		}
		if isLost(a.future.Get(t.ctx, nil)) {
			lost = append(lost, id)
			continue
		}
		t.onDone(id, a)
		stepped = true
	}
	if len(lost) > 0 {
		t.lose(lost)
		stepped = true
	}
	return stepped
}

// step feeds one event and executes its effects in order, returning the
// kernel's refusals.
func (t *tree) step(ev kernel.Event) []error {
	var refused []error
	effects := t.k.Step(ev)
	t.derive(ev, effects)
	for i := range effects {
		e := &effects[i]
		if e.Kind == kernel.EffError {
			err := e.Err
			if err == nil {
				err = errors.New(e.Detail)
			}
			refused = append(refused, err)
			continue
		}
		t.execute(e)
	}
	return refused
}

// stop shuts the tree down (kernel.EvShutdown) once. A shutdown asked for
// by the user ends the workflow when the tree has settled; one forced by
// the history's size (forced) continues as new instead.
func (t *tree) stop(forced bool) {
	if forced {
		t.closing = protocol.ClosingContinue
	} else {
		t.closing = protocol.ClosingShutdown
	}
	t.refuseInbox()
	if t.stopping {
		return
	}
	t.stopping = true
	t.step(kernel.Shutdown(t.clock()))
}

// end decides whether the run ends here: after a shutdown, once the tree
// has settled; or by continuing as new, at a point where the tree is idle
// and the history has grown past the mark.
func (t *tree) end() (bool, protocol.Result, error) {
	if !t.k.Quiescent() {
		return false, protocol.Result{}, nil
	}
	switch {
	case t.closing == protocol.ClosingShutdown:
	case t.closing == protocol.ClosingContinue || t.historyLong():
		t.closing = protocol.ClosingContinue
	default:
		return false, protocol.Result{}, nil
	}
	// Let every update handler return its answer first: an update still
	// running when the run ends would be lost to its caller. One that
	// passed its validator before the run began closing queues its input
	// meanwhile: it is refused like the rest (the client sends it again).
	// The spans' last exports go first too: one not yet started when the
	// run closes would never run.
	t.refuseInbox()
	settled := func() bool { return workflow.AllHandlersFinished(t.ctx) && t.exported() }
	for !settled() {
		if err := workflow.Await(t.ctx, func() bool { return len(t.inbox) > 0 || settled() }); err != nil {
			return true, protocol.Result{}, err
		}
		t.refuseInbox()
	}
	root := t.k.Agent(kernel.Root)
	if t.closing == protocol.ClosingShutdown {
		out, reason := root.Outcome()
		return true, protocol.Result{Turns: root.Turn(), Outcome: out, Reason: reason}, nil
	}
	// A shutdown signal that came while the run was closing still ends
	// the workflow rather than its run.
	if t.shutdown.Len() > 0 {
		t.shutdown.ReceiveAsync(nil)
		out, reason := root.Outcome()
		return true, protocol.Result{Turns: root.Turn(), Outcome: out, Reason: reason}, nil
	}
	next, err := t.carry()
	if err != nil {
		return true, protocol.Result{}, err
	}
	return true, protocol.Result{}, workflow.NewContinueAsNewError(t.ctx, protocol.Workflow, next)
}

// carry is the next run's input: the root's transcript and turn count, as
// a resumed session seeds a kernel (docs/durable.md, "Continue-As-New").
func (t *tree) carry() (protocol.Tree, error) {
	root := t.k.Agent(kernel.Root)
	history, err := protocol.Pack(root.History())
	if err != nil {
		return protocol.Tree{}, err
	}
	next := t.in
	next.History, next.Turns, next.Run = history, root.Turn(), t.in.Run+1
	return next, nil
}

// historyLong reports whether the run should continue as new at its next
// idle point.
func (t *tree) historyLong() bool {
	info := workflow.GetInfo(t.ctx)
	return info.GetContinueAsNewSuggested() ||
		info.GetCurrentHistoryLength() >= t.opts.ContinueAfterEvents ||
		info.GetCurrentHistorySize() >= t.opts.ContinueAfterBytes
}

// turnTooLong reports whether a running turn has filled the history so
// far that it must be cut before the service's hard limit.
func (t *tree) turnTooLong() bool {
	if t.stopping || t.k.Agent(kernel.Root).State() == fsm.Idle {
		return false
	}
	info := workflow.GetInfo(t.ctx)
	return info.GetCurrentHistoryLength() >= t.opts.StopAtEvents ||
		info.GetCurrentHistorySize() >= t.opts.StopAtBytes
}
