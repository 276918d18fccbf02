package host

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/protocol"
)

// opRun is one request or tool call the kernel started, running as an
// activity.
type opRun struct {
	tool   bool // a tool call; else a model request
	future workflow.Future
	cancel workflow.CancelFunc
	// cancelling: the kernel cancelled the op; the activity was asked to
	// stop (it learns so through its next heartbeat), and whatever it
	// still streams is dropped — only its end is stepped, as the
	// cancel's acknowledgement.
	cancelling bool
	// A stream's progress: the number of the next item to feed (items
	// are numbered from 1), chunk numbers used, text bytes fed.
	next  uint32
	chunk uint32
	text  int
}

// timer is one kernel timer running as a workflow timer.
type timer struct {
	at     time.Duration
	future workflow.Future
	cancel workflow.CancelFunc
}

// execute carries out one effect (kernel.Effect's ordering contract: in
// the order Step returned them).
func (t *tree) execute(e *kernel.Effect) {
	switch e.Kind {
	case kernel.EffStartLLM:
		t.startStream(e)
	case kernel.EffStartTool:
		t.startTool(e)
	case kernel.EffCancelLLM, kernel.EffCancelTool:
		if a, ok := t.ops[e.Op]; ok && !a.cancelling {
			a.cancelling = true
			a.cancel()
		}
	case kernel.EffSetTimer:
		t.setTimer(e.Op, e.At)
	case kernel.EffStopTimer:
		if tm, ok := t.timers[e.Op]; ok {
			tm.cancel()
			delete(t.timers, e.Op)
		}
		t.due = slices.DeleteFunc(t.due, func(id kernel.OpID) bool { return id == e.Op })
	case kernel.EffEmit:
		// An op the kernel ended without its activity's answer (it was
		// abandoned after its grace, or lost) is forgotten: asked to stop,
		// if it was not yet, and never waited for again.
		if e.Life.Kind == kernel.LifeOpEnded {
			if a, ok := t.ops[e.Life.Op]; ok {
				if !a.cancelling {
					a.cancel()
				}
				delete(t.ops, e.Life.Op)
			}
		}
	}
}

// activityOptions are the options every op's activity shares: its id
// names the op; one attempt (the kernel decides what runs again); a
// heartbeat timeout that detects a lost worker; the workflow waits for
// the activity to acknowledge a cancel (WAIT_CANCELLATION_COMPLETED),
// raced by the kernel's own grace timer; and a start-to-close bound past
// every deadline the kernel itself could set for it.
func (t *tree) activityOptions(op kernel.OpID, bound time.Duration) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		ActivityID:          "op-" + strconv.FormatUint(uint64(op), 10),
		StartToCloseTimeout: bound + 2*t.in.Limits.Grace + time.Minute,
		HeartbeatTimeout:    t.opts.HeartbeatTimeout,
		WaitForCancellation: true,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	}
}

func (t *tree) heartbeatEvery() time.Duration {
	return protocol.HeartbeatEvery(t.in.Limits.Grace, t.opts.HeartbeatTimeout)
}

func (t *tree) startStream(e *kernel.Effect) {
	msgs, err := protocol.Pack(e.Messages)
	if err != nil { // a history the kernel holds always encodes
		panic(fmt.Sprintf("host: packing the request's history: %v", err))
	}
	req := protocol.StreamRequest{
		Op: e.Op, Agent: e.Agent, Path: t.k.AgentPath(e.Agent), Messages: msgs, Compaction: e.Compact,
		ChunkEvery: t.opts.ChunkEvery, HeartbeatEvery: t.heartbeatEvery(),
	}
	ctx, cancel := workflow.WithCancel(workflow.WithActivityOptions(t.ctx, t.activityOptions(e.Op, t.in.Limits.TurnTimeout)))
	t.ops[e.Op] = &opRun{future: workflow.ExecuteActivity(ctx, protocol.StreamActivity, req), cancel: cancel, next: 1}
}

func (t *tree) startTool(e *kernel.Effect) {
	req := protocol.ToolRequest{
		Op: e.Op, Agent: e.Agent, Path: t.k.AgentPath(e.Agent), Call: e.Call,
		HeartbeatEvery: t.heartbeatEvery(),
	}
	opts := t.activityOptions(e.Op, t.in.Limits.ToolTimeout)
	if slices.Contains(t.k.Config().Idempotent, e.Call.Name) {
		// An idempotent tool may run again: a lost worker's attempt is
		// retried on another worker, within the kernel's tool deadline.
		opts.RetryPolicy = &temporal.RetryPolicy{MaximumAttempts: 3}
	}
	ctx, cancel := workflow.WithCancel(workflow.WithActivityOptions(t.ctx, opts))
	t.ops[e.Op] = &opRun{tool: true, future: workflow.ExecuteActivity(ctx, protocol.ToolActivity, req), cancel: cancel}
}

// setTimer arms timer op at kernel time at. A timer already armed at that
// time (a recovery arms every surviving timer again) is left as it is; one
// due now fires in the next drain, without a workflow timer.
func (t *tree) setTimer(op kernel.OpID, at time.Duration) {
	if tm, ok := t.timers[op]; ok {
		if tm.at == at {
			return
		}
		tm.cancel()
		delete(t.timers, op)
	}
	d := at - t.now
	if d <= 0 {
		if !slices.Contains(t.due, op) {
			t.due = append(t.due, op)
		}
		return
	}
	ctx, cancel := workflow.WithCancel(t.ctx)
	t.timers[op] = &timer{at: at, future: workflow.NewTimer(ctx, d), cancel: cancel}
}

// fireTimers steps every timer that is due: those set already due, then
// fired workflow timers, in op order. A timer an earlier step stopped is
// skipped. It reports whether it stepped any.
func (t *tree) fireTimers() bool {
	fired := false
	for len(t.due) > 0 {
		op := t.due[0]
		t.due = t.due[1:]
		t.step(kernel.TimerFired(t.clock(), op))
		fired = true
	}
	for _, op := range slices.Sorted(maps.Keys(t.timers)) {
		tm, ok := t.timers[op]
		if !ok || !tm.future.IsReady() {
			continue
		}
		delete(t.timers, op)
		// Never before its deadline: a workflow timer fires on the
		// service's clock, at or after it.
		t.step(kernel.TimerFired(max(t.clock(), tm.at), op))
		t.now = max(t.now, tm.at)
		fired = true
	}
	return fired
}

// onChunks feeds a batch of a stream's items that the kernel has not
// seen. A batch for an op the kernel no longer runs, or is cancelling, is
// dropped: nothing a stream sends after its cancel reaches the model.
func (t *tree) onChunks(c protocol.Chunks) {
	a, ok := t.ops[c.Op]
	if !ok || a.tool {
		return
	}
	t.feed(c.Op, a, c.First, c.Items, func() bool { return t.ops[c.Op] == a && !a.cancelling })
}

// feed steps items numbered from first, skipping those already fed, while
// live says the stream still takes them.
func (t *tree) feed(op kernel.OpID, a *opRun, first uint32, items []protocol.Item, live func() bool) {
	for i, it := range items {
		n := first + uint32(i)
		if n < a.next {
			continue
		}
		if n > a.next || !live() { // a gap cannot happen (batches repeat what was not acknowledged); never feed past one
			return
		}
		a.next++
		now := t.clock()
		switch {
		case it.Retry != nil:
			t.step(kernel.LLMRetry(now, op, it.Retry.Attempt, it.Retry.Delay, it.Retry.Cause))
		case it.Call != nil:
			a.chunk++
			t.step(kernel.CallFragment(now, op, a.chunk, *it.Call))
		default:
			a.chunk++
			a.text += len(it.Text)
			t.step(kernel.TextDelta(now, op, a.chunk, it.Text))
		}
	}
}

// onDone steps a finished activity's answer.
func (t *tree) onDone(op kernel.OpID, a *opRun) {
	if a.tool {
		delete(t.ops, op)
		var res protocol.ToolResult
		err := a.future.Get(t.ctx, &res)
		switch {
		case err == nil:
			t.step(kernel.ToolResult(t.clock(), op, res.Status, res.Content))
		case temporal.IsCanceledError(err):
			t.step(kernel.ToolResult(t.clock(), op, kernel.ToolCancelled, "cancelled"))
		default:
			t.step(kernel.ToolResult(t.clock(), op, kernel.ToolError, "tool activity failed: "+cause(err)))
		}
		return
	}
	var res protocol.StreamResult
	err := a.future.Get(t.ctx, &res)
	if err == nil {
		// The items no signal delivered come first; the op stays in the
		// table meanwhile, so a chunk that makes the kernel cut the stream
		// (output_limit) marks it cancelling and the rest are dropped.
		t.feed(op, a, res.First, res.Items, func() bool { return t.ops[op] == a && !a.cancelling })
	}
	delete(t.ops, op)
	switch {
	case err == nil:
		now := t.clock()
		if res.Failure == kernel.FailureNone {
			ev := kernel.LLMEnd(now, op)
			ev.Usage, ev.Reasoning = res.Usage, res.Reasoning
			t.step(ev)
		} else {
			t.step(kernel.LLMError(now, op, res.Failure, res.Detail))
		}
	case temporal.IsCanceledError(err):
		t.step(kernel.LLMError(t.clock(), op, kernel.FailureCancelled, "cancelled"))
	default:
		f := kernel.FailureServer
		if a.chunk > 0 {
			f = kernel.FailureStream
		}
		t.step(kernel.LLMError(t.clock(), op, f, "stream activity failed: "+cause(err)))
	}
}

// isLost reports whether an activity's error says its worker was lost: it
// timed out (no heartbeat within the heartbeat timeout, or past its
// start-to-close bound), or its worker stopped while it ran.
func isLost(err error) bool {
	if err == nil {
		return false
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return true
	}
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == protocol.WorkerLost
}

// cause is the innermost message of an activity's error.
func cause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// lose answers lost workers the way a crashed host is answered
// (docs/durable.md, "Recovery"): every activity still in flight is
// forgotten (asked to stop, never waited for: whatever it would still say
// names an op the kernel no longer runs) and the kernel steps
// kernel.Recover, which restarts each request with its partial text kept,
// runs each idempotent tool again and answers every other tool call
// tool_lost. Before that, each lost stream's last heartbeat adds the text
// no batch delivered. Activities that did not lose their worker are
// resolved with the rest: the kernel has one recovery for the whole tree
// (docs/durable.md, "A lost worker").
func (t *tree) lose(lost []kernel.OpID) {
	for _, op := range lost {
		a := t.ops[op]
		var timeout *temporal.TimeoutError
		if a.tool || a.cancelling || !errors.As(a.future.Get(t.ctx, nil), &timeout) || !timeout.HasLastHeartbeatDetails() {
			continue
		}
		var p protocol.Progress
		if timeout.LastHeartbeatDetails(&p) == nil && p.Offset <= a.text && p.Offset+len(p.Text) > a.text {
			suffix := p.Text[a.text-p.Offset:]
			a.chunk++
			a.text += len(suffix)
			t.step(kernel.TextDelta(t.clock(), op, a.chunk, suffix))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(t.ops)) {
		if a := t.ops[id]; !a.cancelling {
			a.cancel()
		}
		delete(t.ops, id)
	}
	t.step(kernel.Recover(t.clock()))
}
