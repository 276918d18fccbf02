package kernel

import (
	"fmt"
	"strconv"
	"time"

	"github.com/escapement/escapement/fsm"
)

// onCancel: the user cancels an agent's turn.
func (k *Kernel) onCancel(ev Event) {
	a := k.agentAt(ev.Agent)
	if a == nil {
		k.reject(NoAgent, fmt.Errorf("cancel: agent %d: %w", ev.Agent, ErrUnknownAgent))
		return
	}
	if ev.Turn != 0 && ev.Turn != a.turn {
		// Bound to a turn that has ended: a no-op (F14).
		k.emit(Lifecycle{Kind: LifeIgnored, Agent: a.id, Text: "cancel for turn " + strconv.FormatUint(ev.Turn, 10) + ", which has ended"})
		return
	}
	switch a.state {
	case fsm.Idle, fsm.Interrupted:
		// Declared no-ops (Idle: ignore; Interrupted: coalesced); firing
		// keeps every input on a declared edge. This is the whole of the
		// cancel debounce (F8, I11): the first cancel acts at once, and
		// every repeat of the same turn finds it Interrupted (or, once
		// settled, Idle), so no timing window is needed. A cancel of a
		// newer turn finds that turn running and acts.
		from := a.state
		if !k.fire(a, fsm.Cancel) {
			return
		}
		if from == fsm.Idle {
			k.emit(Lifecycle{Kind: LifeIgnored, Agent: a.id, Text: "cancel with no turn running"})
		} else {
			k.emit(Lifecycle{Kind: LifeIgnored, Agent: a.id, Text: "already interrupted"})
		}
	default:
		k.abortSubtree(a, fsm.Cancel, ReasonUserCancel)
	}
}

// onShutdown aborts the root's running turn with reason shutdown — its
// working descendants with parent_cancelled, as under any aborted ancestor
// — and discards the inputs queued for a next turn; no turn may start
// afterwards. Interjections queued into the running turn are the turn's:
// the abort writes them before its marker (docs/semantics.md, "Inputs").
func (k *Kernel) onShutdown() {
	k.shutdown = true
	a := k.root()
	if n := len(a.nextTurn); n > 0 {
		a.nextTurn = nil
		k.emit(Lifecycle{Kind: LifeIgnored, Agent: a.id, Text: strconv.Itoa(n) + " queued input(s) discarded by shutdown"})
	}
	switch a.state {
	case fsm.Idle, fsm.Interrupted:
		return
	}
	k.abortSubtree(a, fsm.Cancel, ReasonShutdown)
}

// timeout aborts a's turn because one of its deadlines fired. since is when
// the wait or silence that justifies it began (I5).
func (k *Kernel) timeout(a *agent, reason Reason, watched OpID, since time.Duration) {
	k.emit(Lifecycle{Kind: LifeTimedOut, Agent: a.id, Op: watched, Reason: reason, Since: since})
	k.abortSubtree(a, fsm.Timeout, reason)
}

// abortSubtree aborts target with (trigger, reason) and every live descendant
// with ReasonParentCancelled, in one Step (F2). Three passes over the subtree:
//
//  1. pre-order: each agent enters Interrupted; its stream or tools get their
//     one cancel (I2) and a grace timer; partial text is kept (F7);
//  2. children before parents: every open call gets its result (synthetic for
//     tools, the child's typed outcome for delegations) (F5, F11, F13), queued
//     interjections are kept (F8), and one marker is appended (F6);
//  3. children before parents: whatever has nothing left in flight settles.
//
// Agents already Interrupted (an earlier cancel of a child) keep their own
// reason and grace; their subtrees are already aborting.
func (k *Kernel) abortSubtree(target *agent, trigger fsm.Trigger, reason Reason) {
	order := k.order[:0]
	stack := append(k.stack[:0], target.id)
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		x := k.agents[id]
		switch x.state {
		case fsm.Idle:
			continue // finished: its children finished before it
		case fsm.Interrupted:
			if x != target {
				continue
			}
		}
		order = append(order, id)
		for j := len(x.turnKids) - 1; j >= 0; j-- {
			stack = append(stack, x.turnKids[j])
		}
	}
	k.stack = stack

	for _, id := range order {
		x := k.agents[id]
		t, r := fsm.Cancel, ReasonParentCancelled
		if x == target {
			t, r = trigger, reason
		}
		k.abortOne(x, t, r)
	}
	for j := len(order) - 1; j >= 0; j-- {
		k.closeAborted(k.agents[order[j]])
	}
	for j := len(order) - 1; j >= 0; j-- {
		k.settleUp(k.agents[order[j]])
	}
	k.order = order[:0]
}

// abortOne is pass 1 for one agent.
func (k *Kernel) abortOne(x *agent, t fsm.Trigger, r Reason) {
	from := x.state
	if !k.fire(x, t) {
		return
	}
	// Only the abort's own cut is the turn's partial: text an earlier
	// interjection cut is already in history and is not reported again.
	x.abort, x.cut = r, ""
	k.emit(Lifecycle{Kind: LifeInterrupted, Agent: x.id, Reason: r})
	k.stopTimer(x.turnTimer)
	k.stopTimer(x.restartTimer)
	x.turnTimer, x.restartTimer = 0, 0
	switch from {
	case fsm.Streaming:
		if x.req != 0 {
			x.cut = k.cutRequest(x)
		} else if x.waitingReq {
			k.unqueueRequest(x)
		}
	case fsm.Tooling, fsm.Delegating:
		for i := range x.open {
			oc := &x.open[i]
			if oc.closed || oc.op == 0 {
				continue
			}
			k.out = append(k.out, Effect{Kind: EffCancelTool, Agent: x.id, Op: oc.op})
			k.graceOp(x, oc.op)
		}
	}
}

// closeAborted is pass 2 for one agent.
func (k *Kernel) closeAborted(x *agent) {
	if x.state != fsm.Interrupted {
		return
	}
	for i := range x.open {
		oc := &x.open[i]
		if oc.closed {
			continue
		}
		if oc.child != NoAgent {
			c := k.agents[oc.child]
			out := OutcomeOf(c.abort)
			k.closeCall(x, i, noTrigger, CallChild, c.abort, childContentAborted(c, out), c.id, out, true)
			continue
		}
		status := CallCancelled
		if x.abort.IsTimeout() {
			status = CallTimedOut
		}
		content := abortedToolContent(status, x.abort)
		if k.withdrawApproval(x, i) {
			content = withdrawnContent(status, x.abort)
		}
		k.closeCall(x, i, noTrigger, status, x.abort, content, NoAgent, OutcomeNone, true)
	}
	k.flushQueued(x)
	if !x.ctx.compactTurn { // a compaction turn leaves the history as it was
		k.appendMarker(x, OutcomeOf(x.abort), x.abort)
	}
}

// settleUp settles a (Interrupted → Idle) if nothing of it is in flight, then
// each ancestor that was only waiting for it.
func (k *Kernel) settleUp(a *agent) {
	for a != nil {
		if a.state != fsm.Interrupted || a.inflight > 0 || a.liveChildren > 0 {
			return
		}
		if !k.fire(a, fsm.Settled) {
			return
		}
		a = k.finishTurn(a, OutcomeOf(a.abort), a.abort, a.cut)
	}
}

// appendMarker adds the one marker of an aborted turn (F6), typed by outcome
// and reason (F13), so the next request shows the model what happened.
func (k *Kernel) appendMarker(a *agent, outcome Outcome, reason Reason) {
	partial := false
	if n := len(a.history); n > 0 && a.history[n-1].Partial {
		partial = true
	}
	a.history = append(a.history, Message{Role: RoleUser, Content: markerContent(outcome, reason, partial), Marker: true})
}

// onTimer: a timer fired.
func (k *Kernel) onTimer(ev Event) {
	t, ok := k.gate(ev, opTimer)
	if !ok {
		return
	}
	delete(k.ops, ev.Op) // it fired: it is over either way
	a := k.agents[t.agent]
	switch t.tkind {
	case TimerWatchdog:
		k.onWatchdog(a, ev.Op, t.target)
	case TimerTool:
		k.onToolDeadline(a, ev.Op, t.target)
	case TimerGrace:
		k.onGrace(a, ev.Op, t.target)
	case TimerTurn:
		a.turnTimer = 0
		k.timeout(a, ReasonTurnTimeout, 0, a.turnStart)
	case TimerRestart:
		a.restartTimer = 0
		k.restart(a)
	case TimerApproval:
		k.onApprovalTimer(a, ev.Op)
	default:
		panic(fmt.Sprintf("kernel: timer %d of unknown kind %d", ev.Op, t.tkind))
	}
}

// onWatchdog checks a request's silence. It fires only on the silence of the
// stream it watches (F4): first token, then stall.
func (k *Kernel) onWatchdog(a *agent, timer, reqID OpID) {
	r := k.ops[reqID]
	r.timer = 0
	k.ops[reqID] = r
	if a.req != reqID {
		panic(fmt.Sprintf("kernel: watchdog %d for request %d, but %s runs %d", timer, reqID, a.path, a.req))
	}
	if !a.gotChunk {
		if deadline := a.reqStart + k.cfg.FirstTokenTimeout; k.now < deadline {
			k.rearmWatchdog(a, deadline)
			return
		}
		k.timeout(a, ReasonFirstTokenTimeout, reqID, a.reqStart)
		return
	}
	if deadline := a.lastChunkAt + k.cfg.StallTimeout; k.now < deadline {
		k.rearmWatchdog(a, deadline)
		return
	}
	k.timeout(a, ReasonStallTimeout, reqID, a.lastChunkAt)
}

// onToolDeadline: a tool ran past ToolTimeout. Its call gets a timed_out
// result and the agent goes on; the tool gets a cancel and a grace period.
func (k *Kernel) onToolDeadline(a *agent, timer, toolID OpID) {
	o := k.ops[toolID]
	o.timer = 0
	k.ops[toolID] = o
	k.emit(Lifecycle{Kind: LifeTimedOut, Agent: a.id, Op: toolID, Reason: ReasonToolTimeout, Since: o.start})
	k.out = append(k.out, Effect{Kind: EffCancelTool, Agent: a.id, Op: toolID})
	k.graceOp(a, toolID)
	k.closeCall(a, int(o.call), fsm.ToolResult, CallTimedOut, ReasonToolTimeout, abortedToolContent(CallTimedOut, ReasonToolTimeout), NoAgent, OutcomeNone, true)
	if a.pending == 0 {
		k.resume(a)
	}
}

// onGrace: a cancelled op did not stop in time; it is abandoned and anything
// it sends later is dropped (F3).
func (k *Kernel) onGrace(a *agent, timer, id OpID) {
	o := k.ops[id]
	o.timer = 0
	k.endOp(a, id, o, OpAbandoned)
	k.startWaiting(a) // a timed-out tool's slot is free once abandoned
	k.settleUp(a)
}
