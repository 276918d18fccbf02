package kernel

import (
	"slices"

	"github.com/escapement/escapement/fsm"
)

// A tree streams at most Limits.MaxParallelRequests model requests at once
// (docs/semantics.md, "Budgets and caps"), as an agent runs at most
// MaxParallelTools tools: a request asked for while every slot is taken —
// or while others wait already, first come first served — waits, its agent
// Streaming with no request out, until a slot frees. A cancelled request
// holds its slot until it ends (its stream may still be winding down).
// A compaction's summarising request is a request too (compact.go). A
// waiting request is not an op: nothing runs, no deadline of its own
// runs (its turn's does), and its first-token deadline starts when it is
// sent.

// startRequest sends a's next request, or queues it for a slot.
func (k *Kernel) startRequest(a *agent) {
	if k.streaming < k.cfg.MaxParallelRequests && len(k.waiting) == 0 {
		k.sendRequest(a)
		return
	}
	if a.state != fsm.Streaming || a.req != 0 || a.waitingReq {
		panic("kernel: a request queued for " + a.path + " in state " + a.state.String() + " with one out or waiting")
	}
	a.waitingReq = true
	k.waiting = append(k.waiting, a.id)
	l := Lifecycle{Kind: LifeRequestWaiting, Agent: a.id, N: a.requests + 1}
	if a.ctx.compaction != nil {
		// A compaction's summarising request: not one of the turn's
		// numbered requests (docs/semantics.md, "Compaction").
		l.Name, l.N = "compaction", 0
	}
	k.emit(l)
}

// sendWaiting sends waiting requests, in the order they were asked for,
// while the tree has free slots. Every Step ends with it, so a slot freed
// anywhere in a step goes to the first waiting request in that step.
func (k *Kernel) sendWaiting() {
	for len(k.waiting) > 0 && k.streaming < k.cfg.MaxParallelRequests {
		a := k.agents[k.waiting[0]]
		k.waiting = k.waiting[1:]
		a.waitingReq = false
		k.sendRequest(a)
	}
	if len(k.waiting) == 0 {
		k.waiting = k.waiting[:0:0] // drop what the sliding queue left behind
	}
}

// unqueueRequest takes a's waiting request out of the queue: its turn is
// aborted, and a request never sent needs no cancel.
func (k *Kernel) unqueueRequest(a *agent) {
	if i := slices.Index(k.waiting, a.id); i >= 0 {
		k.waiting = slices.Delete(k.waiting, i, i+1) // in place: a cancel allocates nothing
	}
	a.waitingReq = false
	a.ctx.compaction = nil // a compaction never sent leaves nothing behind
}
