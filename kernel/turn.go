package kernel

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/textcut"
)

func (k *Kernel) root() *agent { return k.agents[Root] }

// onSubmit: the user submits text to the root.
func (k *Kernel) onSubmit(ev Event) {
	a := k.root()
	switch {
	case ev.Text == "":
		k.reject(a.id, fmt.Errorf("submit: %w", ErrEmptyText))
		return
	case k.shutdown:
		k.reject(a.id, fmt.Errorf("submit: %w", ErrShutdown))
		return
	}
	if a.state == fsm.Idle {
		k.startTurn(a, fsm.Submit, []input{{text: ev.Text}})
		return
	}
	// Interrupted queues it; any working state is undeclared (send an
	// interjection instead) and fire reports the error.
	if !k.fire(a, fsm.Submit) {
		return
	}
	a.nextTurn = append(a.nextTurn, input{text: ev.Text})
	k.emit(Lifecycle{Kind: LifeInterjected, Agent: a.id, Text: ev.Text, Queued: true})
}

// onInterject: the user types while the root works (F8).
func (k *Kernel) onInterject(ev Event) {
	a := k.root()
	switch {
	case ev.Text == "":
		k.reject(a.id, fmt.Errorf("interject: %w", ErrEmptyText))
		return
	case k.shutdown:
		k.reject(a.id, fmt.Errorf("interject: %w", ErrShutdown))
		return
	}
	from := a.state
	if from == fsm.Idle {
		// The turn it was typed into has ended: it starts the next one, so
		// the text is never lost.
		k.startTurn(a, fsm.Interject, []input{{text: ev.Text, interjection: true}})
		return
	}
	if !k.fire(a, fsm.Interject) {
		return
	}
	switch from {
	case fsm.Streaming:
		if a.ctx.compaction != nil {
			k.interjectCompacting(a, ev.Text)
			return
		}
		if a.waitingReq {
			// Nothing was sent: the text joins the request that waits for
			// a slot (docs/semantics.md, "Budgets and caps").
			a.history = append(a.history, Message{Role: RoleUser, Content: ev.Text, Interjection: true})
			k.emit(Lifecycle{Kind: LifeInterjected, Agent: a.id, Text: ev.Text})
			return
		}
		// Cut the stream, keep its partial text, then the user's text.
		if a.req != 0 {
			k.cutRequest(a)
		}
		a.history = append(a.history, Message{Role: RoleUser, Content: ev.Text, Interjection: true})
		k.emit(Lifecycle{Kind: LifeInterjected, Agent: a.id, Text: ev.Text})
		if a.restartTimer != 0 {
			return // inside the debounce window: the pending restart carries it
		}
		if k.cfg.Debounce > 0 {
			a.restartTimer = k.setTimer(a, TimerRestart, k.now+k.cfg.Debounce, 0)
			return
		}
		k.restart(a)
	case fsm.Tooling, fsm.Delegating:
		a.queued = append(a.queued, ev.Text)
		k.emit(Lifecycle{Kind: LifeInterjected, Agent: a.id, Text: ev.Text, Queued: true})
	case fsm.Interrupted:
		a.nextTurn = append(a.nextTurn, input{text: ev.Text, interjection: true})
		k.emit(Lifecycle{Kind: LifeInterjected, Agent: a.id, Text: ev.Text, Queued: true})
	}
}

// startTurn moves an Idle agent into Streaming with trigger t and sends the
// turn's first request.
func (k *Kernel) startTurn(a *agent, t fsm.Trigger, inputs []input) {
	if k.beginTurn(a, t, inputs) {
		k.startRequest(a)
	}
}

// beginTurn moves an Idle agent into Streaming with trigger t, appends the
// inputs (none for a compaction turn) and arms the turn's deadline; false
// when the FSM refused.
func (k *Kernel) beginTurn(a *agent, t fsm.Trigger, inputs []input) bool {
	if a.state != fsm.Idle {
		panic(fmt.Sprintf("kernel: startTurn for agent %s in state %s", a.path, a.state))
	}
	a.turn++
	if !k.fire(a, t) {
		a.turn--
		return false
	}
	a.ctx.newTurn()
	a.outcome, a.reason, a.summary = OutcomeNone, ReasonNone, ""
	a.requests, a.delegated = 0, 0
	a.turnKids = a.turnKids[:0]
	a.abort, a.failDetail = ReasonNone, ""
	a.open, a.pending, a.queued = nil, 0, nil
	for _, in := range inputs {
		a.history = append(a.history, Message{Role: RoleUser, Content: in.text, Interjection: in.interjection})
	}
	a.turnStart = k.now
	a.deadline = k.now + k.cfg.TurnTimeout
	inherited := false
	if a.parent != NoAgent {
		if pd := k.agents[a.parent].deadline; pd <= a.deadline {
			// Child ≤ parent's remaining time. The parent's own timer fires
			// first (it was set first) and aborts this child with it, so a
			// second timer at the same instant would only race it.
			a.deadline, inherited = pd, true
		}
	}
	if !inherited {
		a.turnTimer = k.setTimer(a, TimerTurn, a.deadline, 0)
	}
	text := ""
	if len(inputs) > 0 {
		text = inputs[0].text
	}
	k.emit(Lifecycle{Kind: LifeTurnStarted, Agent: a.id, Text: text})
	return true
}

// sendRequest sends the agent's history as the next LLM request (a slot is
// free: startRequest).
func (k *Kernel) sendRequest(a *agent) {
	if a.state != fsm.Streaming || a.req != 0 {
		panic(fmt.Sprintf("kernel: startRequest for %s in %s with request %d live", a.path, a.state, a.req))
	}
	if a.ctx.compaction != nil {
		k.sendCompaction(a) // a compaction waited for this slot
		return
	}
	if k.compactFirst(a) {
		return // a compaction runs first, or the history cannot fit
	}
	a.requests++
	n := len(a.history)
	id := k.openRequest(a, op{kind: opLLM, agent: a.id, turn: a.turn, sent: n}, a.history[:n:n])
	k.emit(Lifecycle{Kind: LifeRequestStarted, Agent: a.id, Op: id, N: a.requests})
}

// openRequest starts request o of a sending msgs — the turn's next request
// or a compaction's summarising one (o.compact) — and arms its first-token
// watchdog. Either carries a's profile, so the host sends it to that
// profile's model (docs/semantics.md, "Profiles").
func (k *Kernel) openRequest(a *agent, o op, msgs []Message) OpID {
	id := k.newOp(o)
	a.req = id
	a.inflight++
	a.ctx.usage.started()
	a.reqStart, a.gotChunk, a.lastChunkNo = k.now, false, 0
	a.text = a.text[:0]
	a.clearDrafts()
	a.msgBytes = 0
	k.out = append(k.out, Effect{Kind: EffStartLLM, Agent: a.id, Op: id, Messages: msgs, Compact: o.compact, Profile: a.profileName})
	a.watchAt = k.now + k.cfg.FirstTokenTimeout
	k.setOpTimer(id, k.setTimer(a, TimerWatchdog, a.watchAt, id))
	return id
}

func (k *Kernel) setOpTimer(id, timer OpID) {
	o := k.ops[id]
	o.timer = timer
	k.ops[id] = o
}

// onDelta: one streamed chunk.
func (k *Kernel) onDelta(ev Event) {
	o, ok := k.gate(ev, opLLM)
	if !ok {
		return
	}
	a := k.agents[o.agent]
	if o.cancelling {
		k.emit(Lifecycle{Kind: LifeLate, Agent: a.id, Op: ev.Op, Text: "chunk after cancel dropped"})
		return
	}
	if ev.Call != nil && ev.Call.Index < 0 {
		k.reject(a.id, fmt.Errorf("tool-call fragment index %d is negative", ev.Call.Index))
		return
	}
	if ev.Chunk != 0 {
		if ev.Chunk <= a.lastChunkNo {
			k.emit(Lifecycle{Kind: LifeStale, Agent: a.id, Op: ev.Op, Text: "duplicate chunk " + strconv.FormatUint(uint64(ev.Chunk), 10)})
			return
		}
		a.lastChunkNo = ev.Chunk
	}
	if ev.Text == "" && ev.Call != nil && ev.Call.ID == "" && ev.Call.Name == "" && ev.Call.Args == "" {
		// A fragment that adds nothing is no progress (docs/semantics.md,
		// "Deadlines"): a server streaming only these is silent.
		k.emit(Lifecycle{Kind: LifeStale, Agent: a.id, Op: ev.Op, Text: "call fragment adds nothing"})
		return
	}
	cost := a.messageCost(ev)
	if a.msgBytes+cost > k.cfg.MaxMessageBytes {
		k.overflow(a, ev)
		return
	}
	a.msgBytes += cost
	if !k.fire(a, fsm.Delta) {
		return
	}
	a.gotChunk = true
	a.lastChunkAt = k.now
	if stall := k.now + k.cfg.StallTimeout; stall < a.watchAt {
		// Only on the first chunk, when the stall window is shorter than what
		// is left of the first-token window: re-arm so a stall is caught on
		// time. Later chunks move the deadline forward, which the watchdog
		// handles lazily when it fires (no timer churn per token).
		k.rearmWatchdog(a, stall)
	}
	if ev.Call != nil {
		d := a.draft(ev.Call.Index)
		if ev.Call.ID != "" {
			d.id = ev.Call.ID
		}
		if ev.Call.Name != "" {
			d.name = ev.Call.Name
		}
		d.args = append(d.args, ev.Call.Args...)
	}
	if ev.Text != "" {
		a.text = append(a.text, ev.Text...)
		if a.ctx.compaction == nil { // a summary is published whole, when it applies
			k.emit(Lifecycle{Kind: LifeDelta, Agent: a.id, Op: ev.Op, Text: ev.Text})
		}
	}
}

// callOverhead is what each streamed call counts against MaxMessageBytes
// beside its id, name and arguments (about its JSON framing), so a stream
// of empty fragments for ever new indices cannot grow the drafts unbounded.
const callOverhead = 16

// messageCost is what a chunk adds to the streamed message, as counted
// against Limits.MaxMessageBytes: its text, or its call fragment's id,
// name and arguments (plus callOverhead for a call not seen before).
func (a *agent) messageCost(ev Event) int {
	if ev.Call == nil {
		return len(ev.Text)
	}
	n := len(ev.Call.ID) + len(ev.Call.Name) + len(ev.Call.Args)
	if _, seen := a.draftAt[ev.Call.Index]; !seen {
		n += callOverhead
	}
	return n
}

// overflow handles the chunk that would take the streamed message past
// Limits.MaxMessageBytes: the text that still fits is kept (cut at a rune
// boundary) and the stream is cut like an abort with reason output_limit
// (docs/semantics.md, "Budgets and caps"), so what the model sent within
// the cap stays as partial text and no half-streamed call runs (F12).
func (k *Kernel) overflow(a *agent, ev Event) {
	if ev.Call == nil {
		if fit := textcut.Prefix(ev.Text, k.cfg.MaxMessageBytes-a.msgBytes); fit != "" && a.ctx.compaction == nil {
			a.msgBytes += len(fit)
			a.text = append(a.text, fit...)
			k.emit(Lifecycle{Kind: LifeDelta, Agent: a.id, Op: ev.Op, Text: fit})
		}
	}
	a.failDetail = "the assistant message went past max_message_bytes (" + strconv.Itoa(k.cfg.MaxMessageBytes) + " bytes); the stream was cut"
	k.abortSubtree(a, fsm.OutputLimit, ReasonOutputLimit)
}

// draft returns the draft of the call streamed at index, creating it when
// this is its first fragment.
func (a *agent) draft(index int) *callDraft {
	if i, ok := a.draftAt[index]; ok {
		return &a.drafts[i]
	}
	if a.draftAt == nil {
		a.draftAt = make(map[int]int)
	}
	a.draftAt[index] = len(a.drafts)
	a.drafts = append(a.drafts, callDraft{index: index})
	return &a.drafts[len(a.drafts)-1]
}

// clearDrafts forgets the streamed calls (reusing their memory).
func (a *agent) clearDrafts() {
	a.drafts = a.drafts[:0]
	clear(a.draftAt)
}

func (k *Kernel) rearmWatchdog(a *agent, at time.Duration) {
	o := k.ops[a.req]
	k.stopTimer(o.timer)
	a.watchAt = at
	o.timer = k.setTimer(a, TimerWatchdog, at, a.req)
	k.ops[a.req] = o
}

// onLLMEnd: a stream finished.
func (k *Kernel) onLLMEnd(ev Event) {
	a, _ := k.opEnded(ev, opLLM)
	if a == nil {
		return
	}
	if a.ctx.compaction != nil {
		k.completeCompaction(a, ev.Op)
		return
	}
	a.ctx.compacted = false // the request a compaction preceded has answered
	text := string(a.text)
	open := k.finishDrafts(a, ev.Op)
	if len(open) == 0 {
		if !k.fire(a, fsm.StreamText) {
			return
		}
		if text != "" {
			a.history = append(a.history, Message{Role: RoleAssistant, Content: text, Reasoning: ev.Reasoning})
		}
		k.endTurn(a, OutcomeCompleted, ReasonNone, text)
		return
	}
	plans := k.planCalls(a, open)
	trigger := fsm.StreamTools
	calls := make([]ToolCall, len(open))
	for i := range open {
		calls[i] = open[i].call
		if calls[i].Name == "" {
			// A call streamed without a name cannot run, and a transcript
			// with a nameless call is invalid (F11): history shows a
			// placeholder, and planCalls answers it as malformed — by
			// the empty name it keeps, so a real tool that happens to bear
			// the placeholder's name is unaffected.
			calls[i].Name = NamelessCall
		}
		if plans[i].spawn != nil { // only a delegation that runs spawns a child
			trigger = fsm.StreamDelegations
		}
	}
	if !k.fire(a, trigger) {
		return
	}
	a.history = append(a.history, Message{Role: RoleAssistant, Content: text, ToolCalls: calls, Reasoning: ev.Reasoning})
	a.open = open
	a.pending = len(open)
	a.nextWaiting = 0
	for i := range open {
		// The model is told which calls did not run, and why: never
		// silence (docs/semantics.md, "Budgets and caps").
		k.dispatchCall(a, i, plans[i])
	}
	if a.pending == 0 {
		k.resume(a)
	}
}

// finishDrafts turns the streamed fragments into the calls to open. Every
// draft here belongs to a finished stream (F12). Missing ids are generated;
// ids already used in this agent's history get a suffix (F11).
func (k *Kernel) finishDrafts(a *agent, req OpID) []openCall {
	if len(a.drafts) == 0 {
		return nil
	}
	// Calls run in index order, as the model numbered them (their first
	// fragments may have arrived in another order).
	slices.SortFunc(a.drafts, func(x, y callDraft) int { return cmp.Compare(x.index, y.index) })
	open := make([]openCall, 0, len(a.drafts))
	for i := range a.drafts {
		d := &a.drafts[i]
		c := ToolCall{ID: d.id, Name: d.name, Arguments: string(d.args)}
		if c.ID == "" {
			c.ID = "call_" + strconv.FormatUint(uint64(req), 10) + "_" + strconv.Itoa(d.index)
		}
		c.ID = a.claimID(c.ID)
		open = append(open, openCall{call: c, child: NoAgent})
	}
	a.clearDrafts()
	return open
}

// maxDetail bounds the failure detail a turn keeps from an error event
// (a server's message can be long).
const maxDetail = 1 << 10

// onLLMError: a request failed (or acknowledged its cancel).
func (k *Kernel) onLLMError(ev Event) {
	a, _ := k.opEnded(ev, opLLM)
	if a == nil {
		return
	}
	switch {
	case a.ctx.compaction != nil:
		k.compactionFailed(a, failureDetail(ev))
		return
	case ev.Failure == FailureContextLength:
		k.contextRefused(a, ev)
		return
	}
	if !k.fire(a, fsm.StreamFailed) {
		return
	}
	text := k.keepPartial(a)
	a.failDetail = failureDetail(ev)
	k.appendMarker(a, OutcomeFailed, ReasonLLMError)
	k.endTurn(a, OutcomeFailed, ReasonLLMError, text)
}

// failureDetail is what a turn keeps of a failed request: the failure's
// kind, then the adapter's message clipped to maxDetail.
func failureDetail(ev Event) string {
	d := ev.Failure.String()
	if ev.Text != "" {
		d += ": " + textcut.Clip(ev.Text, maxDetail)
	}
	return d
}

// onLLMRetry: informational; the adapter retries before the first token.
func (k *Kernel) onLLMRetry(ev Event) {
	o, ok := k.gate(ev, opLLM)
	if !ok {
		return
	}
	if o.cancelling {
		k.emit(Lifecycle{Kind: LifeLate, Agent: o.agent, Op: ev.Op, Text: "retry after cancel"})
		return
	}
	k.emit(Lifecycle{Kind: LifeRetry, Agent: o.agent, Op: ev.Op, N: ev.Attempt, Delay: ev.Delay, Text: ev.Text})
}

// cutRequest cancels the agent's live request, keeps what it streamed as a
// partial message, and returns that text.
func (k *Kernel) cutRequest(a *agent) string {
	id := a.req
	k.out = append(k.out, Effect{Kind: EffCancelLLM, Agent: a.id, Op: id})
	k.graceOp(a, id)
	a.req = 0
	if a.ctx.compaction != nil {
		k.dropCompaction(a) // nothing of a summary reaches the history
		return ""
	}
	return k.keepPartial(a)
}

// graceOp marks a cancelled op and gives it Grace to acknowledge (F3).
func (k *Kernel) graceOp(a *agent, id OpID) {
	o := k.ops[id]
	k.stopTimer(o.timer)
	o.cancelling = true
	o.timer = k.setTimer(a, TimerGrace, k.now+k.cfg.Grace, id)
	k.ops[id] = o
}

// keepPartial appends the text streamed so far as a partial assistant message
// (F7) and records every half-streamed tool call as dropped (F12).
func (k *Kernel) keepPartial(a *agent) string {
	text := string(a.text)
	a.text = a.text[:0]
	if text != "" {
		a.history = append(a.history, Message{Role: RoleAssistant, Content: text, Partial: true})
	}
	// Dropped calls are reported in index order, like the calls that run.
	slices.SortFunc(a.drafts, func(x, y callDraft) int { return cmp.Compare(x.index, y.index) })
	for i := range a.drafts {
		d := &a.drafts[i]
		k.emit(Lifecycle{Kind: LifeCallDropped, Agent: a.id, CallID: d.id, Name: d.name, Text: string(d.args)})
	}
	a.clearDrafts()
	return text
}

// resume runs when every call of the last assistant message has its result.
func (k *Kernel) resume(a *agent) {
	if k.outOfBudget(a, true) {
		return
	}
	if !k.fire(a, fsm.ResultsIn) {
		return
	}
	k.flushQueued(a)
	k.startRequest(a)
}

// restart sends the request an interjection cut, once its window closed.
func (k *Kernel) restart(a *agent) {
	if k.outOfBudget(a, false) {
		return
	}
	if !k.fire(a, fsm.Restart) {
		return
	}
	k.startRequest(a)
}

// outOfBudget ends a's turn budget_exhausted when its request budget (its
// profile's, else the tree's) is spent, and reports whether it was; flush
// first appends the interjections queued for the request that will not go.
func (k *Kernel) outOfBudget(a *agent, flush bool) bool {
	if a.requests < k.maxRequests(a) {
		return false
	}
	if !k.fire(a, fsm.BudgetExhausted) {
		return true
	}
	if flush {
		k.flushQueued(a)
	}
	k.appendMarker(a, OutcomeBudgetExhausted, ReasonBudget)
	k.endTurn(a, OutcomeBudgetExhausted, ReasonBudget, "")
	return true
}

// flushQueued appends interjections queued while tools ran (F8: each once,
// in order).
func (k *Kernel) flushQueued(a *agent) {
	for _, text := range a.queued {
		a.history = append(a.history, Message{Role: RoleUser, Content: text, Interjection: true})
	}
	a.queued = nil
}

// endTurn records the end of a turn that did not go through Interrupted.
func (k *Kernel) endTurn(a *agent, outcome Outcome, reason Reason, text string) {
	k.settleUp(k.finishTurn(a, outcome, reason, text))
}

// finishTurn records a's outcome (exactly once per turn, I13) and hands it to
// the parent. It returns the parent when the parent is Interrupted and may now
// settle: callers loop instead of recursing, so a 10,000-deep chain of
// interrupted agents settles in constant stack. (A parent that resumes may end
// its own turn on the spot — a budget — which recurses once per such level.)
func (k *Kernel) finishTurn(a *agent, outcome Outcome, reason Reason, text string) *agent {
	a.outcome, a.reason, a.summary = outcome, reason, text
	k.stopTimer(a.turnTimer)
	k.stopTimer(a.restartTimer)
	a.turnTimer, a.restartTimer = 0, 0
	a.deadline = 0
	total := a.ctx.usage.final()
	k.emit(Lifecycle{Kind: LifeTurnEnded, Agent: a.id, Outcome: outcome, Reason: reason, Text: text, Detail: a.failDetail, Usage: total})
	k.retire(a)
	if a.parent == NoAgent {
		if len(a.nextTurn) > 0 && !k.shutdown {
			next := a.nextTurn
			a.nextTurn = nil
			k.startTurn(a, fsm.Submit, next)
		}
		return nil
	}
	p := k.agents[a.parent]
	p.liveChildren--
	p.ctx.usage.child(total)
	if p.state == fsm.Interrupted {
		return p
	}
	i := a.parentCall
	if i < 0 || int(i) >= len(p.open) || p.open[i].child != a.id || p.open[i].closed {
		panic(fmt.Sprintf("kernel: child %s ended but parent %s (%s) is not waiting for it", a.path, p.path, p.state))
	}
	k.closeCall(p, int(i), fsm.ChildOutcome, CallChild, reason, childContent(a), a.id, outcome, false)
	if p.pending == 0 {
		k.resume(p)
	}
	return nil
}
