package host

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/protocol"
)

// Stream is StreamActivity: it streams one model request through the
// worker's model adapter and sends what arrives to its workflow in
// batches (ChunksSignal, at most one per ChunkEvery), so the kernel sees
// the stream as chunk events and its first-token and stall watchdogs stay
// its own timers. It heartbeats every HeartbeatEvery, carrying the text
// no acknowledged batch holds yet (protocol.Progress), and returns the
// items no batch was acknowledged for with how the stream ended.
//
// A cancel reaches it through a heartbeat's answer: the model's context
// ends, and it returns a cancelled failure, which the workflow steps as
// the cancel's acknowledgement.
func (a *Activities) Stream(ctx context.Context, req protocol.StreamRequest) (protocol.StreamResult, error) {
	msgs, err := req.Messages.Messages()
	if err != nil {
		return protocol.StreamResult{Failure: kernel.FailureBadResponse, Detail: err.Error()}, nil
	}
	info := activity.GetInfo(ctx)
	b := &batcher{op: req.Op, wake: make(chan struct{}, 1)}
	send := func(ctx context.Context, c protocol.Chunks) error {
		return activity.GetClient(ctx).SignalWorkflow(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, protocol.ChunksSignal, c)
	}
	modelCtx, stopModel := context.WithCancel(ctx)
	defer stopModel()
	var wg sync.WaitGroup
	stopLoops := make(chan struct{})
	wg.Add(2)
	go func() { // owned: joined below
		defer wg.Done()
		every(stopLoops, req.HeartbeatEvery, func() { activity.RecordHeartbeat(ctx, b.progress()) })
	}()
	go func() { // owned: joined below
		defer wg.Done()
		b.sendLoop(ctx, stopLoops, req.ChunkEvery, send)
	}()
	watch := watchWorkerStop(ctx, stopModel)
	err = a.stream(modelCtx, ports.Request{Op: req.Op, Agent: req.Agent, Path: req.Path, Messages: msgs, Compaction: req.Compaction}, b)
	close(stopLoops)
	wg.Wait()
	switch {
	case watch.close():
		return protocol.StreamResult{}, errWorkerLost()
	case ctx.Err() != nil:
		// The cancel's acknowledgement, as a result (a returned context
		// error would be logged as the activity's failure).
		return protocol.StreamResult{Failure: kernel.FailureCancelled, Detail: "cancelled"}, nil
	}
	res := b.rest()
	if err != nil {
		res.Failure, res.Detail = ports.FailureOf(err, b.chunks()), err.Error()
	}
	return res, nil
}

// stream runs the model, turning a panic into a bad-response failure (as
// the live driver does: a broken adapter fails its request, not the
// worker).
func (a *Activities) stream(ctx context.Context, req ports.Request, sink ports.Sink) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = ports.Fail(kernel.FailureBadResponse, fmt.Errorf("model panicked: %v", v))
		}
	}()
	return a.Model.Stream(ctx, req, sink)
}

// every calls fn every d (250ms when not positive) until stop is closed.
func every(stop <-chan struct{}, d time.Duration, fn func()) {
	if d <= 0 {
		d = 250 * time.Millisecond
	}
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			fn()
		}
	}
}

// batcher gathers one stream's items (it is the model's ports.Sink) and
// numbers them from 1. A batch goes out as soon as an item arrives, unless
// one went out less than ChunkEvery ago: then when ChunkEvery has passed
// (a throttle on the leading edge: the first token, and the first chunk
// after a silence, reach the kernel at once, and a fast stream costs at
// most one signal per ChunkEvery). Items sent in a batch are frozen: a batch whose
// signal failed is sent again from the first unacknowledged item with the
// same numbers, so the workflow can drop what it already has; only items
// not yet sent are merged (consecutive text, consecutive fragments of one
// call, progress into anything), which keeps batches and the kernel's
// chunk events few.
type batcher struct {
	op kernel.OpID

	wake chan struct{} // an item was added (buffered: one pending wake-up)

	mu        sync.Mutex
	items     []protocol.Item
	sent      int // items[:sent] were in a batch (frozen)
	acked     int // items[:acked] are known delivered
	text      int // bytes of text in items[:acked]
	usage     *kernel.Usage
	reasoning *kernel.Reasoning
}

func (b *batcher) add(it protocol.Item) {
	defer b.poke()
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.merge(it) {
		b.items = append(b.items, it)
	}
}

// merge folds it into the last item when that one is not yet sent and the
// two make one (consecutive text, consecutive fragments of one call,
// progress into anything); false when it must be an item of its own.
// b.mu is held.
func (b *batcher) merge(it protocol.Item) bool {
	n := len(b.items)
	if n == b.sent || it.Retry != nil {
		return false
	}
	last := &b.items[n-1]
	switch {
	case last.Retry != nil:
		return false
	case last.Call == nil:
		return mergeAfterText(last, it)
	default:
		return mergeAfterCall(last, it)
	}
}

// mergeAfterText merges it into last, text or progress: text joins text,
// and a call's first fragment replaces progress.
func mergeAfterText(last *protocol.Item, it protocol.Item) bool {
	switch {
	case it.Call == nil:
		last.Text += it.Text
		return true
	case last.Text == "": // progress, then a fragment
		*last = it
		return true
	}
	return false
}

// mergeAfterCall merges it into last, a call's fragment: progress goes,
// and the call's next fragment (same index, no ID or name) extends its
// arguments.
func mergeAfterCall(last *protocol.Item, it protocol.Item) bool {
	switch {
	case it.Call == nil && it.Text == "": // progress after a fragment
		return true
	case it.Call != nil && it.Call.Index == last.Call.Index && it.Call.ID == "" && it.Call.Name == "":
		c := *last.Call
		c.Args += it.Call.Args
		last.Call = &c
		return true
	}
	return false
}

// Text implements ports.Sink.
func (b *batcher) Text(text string) {
	if text != "" {
		b.add(protocol.Item{Text: text})
	}
}

// Call implements ports.Sink.
func (b *batcher) Call(d kernel.CallDelta) { b.add(protocol.Item{Call: &d}) }

// Retry implements ports.Sink.
func (b *batcher) Retry(attempt int, delay time.Duration, cause string) {
	b.add(protocol.Item{Retry: &protocol.Retry{Attempt: attempt, Delay: delay, Cause: cause}})
}

// Usage implements ports.Sink.
func (b *batcher) Usage(u kernel.Usage) {
	b.mu.Lock()
	b.usage = &u
	b.mu.Unlock()
}

// Reasoning implements ports.ReasoningSink: the model's hidden reasoning,
// reported once the stream ended normally, rides on the result.
func (b *batcher) Reasoning(r kernel.Reasoning) {
	b.mu.Lock()
	b.reasoning = &r
	b.mu.Unlock()
}

// Progress implements ports.ProgressSink: output that is no part of the
// answer (a reasoning model's thinking) still feeds the watchdogs.
func (b *batcher) Progress() { b.add(protocol.Item{}) }

func (b *batcher) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// sendLoop sends batches until stop is closed (the throttle above).
func (b *batcher) sendLoop(ctx context.Context, stop <-chan struct{}, every time.Duration, send func(context.Context, protocol.Chunks) error) {
	var last time.Time
	for {
		select {
		case <-stop:
			return
		case <-b.wake:
		}
		if wait := every - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		if !b.flush(ctx, send) {
			b.poke() // not delivered: the next batch carries it again
		}
	}
}

// flush sends the items not yet acknowledged. It reports false when the
// signal failed.
func (b *batcher) flush(ctx context.Context, send func(context.Context, protocol.Chunks) error) bool {
	b.mu.Lock()
	if b.acked == len(b.items) {
		b.mu.Unlock()
		return true
	}
	b.sent = len(b.items)
	c := protocol.Chunks{Op: b.op, First: uint32(b.acked) + 1, Items: append([]protocol.Item(nil), b.items[b.acked:b.sent]...)}
	b.mu.Unlock()
	if err := send(ctx, c); err != nil {
		return false // sent again with the next batch, or carried by the result
	}
	b.mu.Lock()
	for _, it := range c.Items {
		b.text += len(it.Text)
	}
	b.acked += len(c.Items)
	b.mu.Unlock()
	return true
}

// progress is the heartbeat's detail: the text not yet acknowledged.
func (b *batcher) progress() protocol.Progress {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := protocol.Progress{Offset: b.text}
	for _, it := range b.items[b.acked:] {
		p.Text += it.Text
	}
	return p
}

// rest is the result: the items no batch was acknowledged for.
func (b *batcher) rest() protocol.StreamResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	return protocol.StreamResult{First: uint32(b.acked) + 1, Items: b.items[b.acked:], Usage: b.usage, Reasoning: b.reasoning}
}

// chunks counts the items that were chunks (not retries), for failureOf.
func (b *batcher) chunks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, it := range b.items {
		if it.Retry == nil {
			n++
		}
	}
	return n
}
