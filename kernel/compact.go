package kernel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/escapement/escapement/fsm"
)

// Compaction replaces the older part of an agent's history with a summary
// when the history outgrows the model's context window, atomically: the
// history is replaced in the step the summarising request's stream ends,
// and nothing else of the compaction ever reaches it (docs/semantics.md,
// "Compaction"). The kernel decides when, what is kept and what is sent;
// the summary is the model's.

// ErrNotIdle wraps the refusal of an on-demand compaction while the root
// works: a compaction the turn needs runs on its own.
var ErrNotIdle = errors.New("the root is working")

// Why a compaction ran (its compaction_started record's Name).
const (
	whyThreshold     = "threshold"      // the request's estimate passed the threshold
	whyContextLength = "context_length" // the server refused the request as too long
	whyRequested     = "requested"      // the user asked (EvCompact)
)

// contextState is an agent's token accounting and compaction.
type contextState struct {
	// usage is the running turn's total so far (docs/semantics.md, "Usage").
	usage turnUsage
	// reported is the prompt_tokens the agent's last request (not a
	// compaction) reported, and reportedAt how many history messages that
	// request sent: the estimate's base. 0: none since the last compaction.
	reported, reportedAt int
	// compacted: a compaction completed in this turn since the agent's last
	// request that ended on its own — the next request may not compact.
	compacted bool
	// compactTurn: the running turn is an on-demand compaction.
	compactTurn bool
	// compaction is the compaction running (its summarising request is
	// the agent's req, or waits for a slot: waitingReq), nil when none.
	compaction *compaction
}

// newTurn resets what belongs to one turn.
func (c *contextState) newTurn() {
	c.usage = turnUsage{}
	c.compacted, c.compactTurn = false, false
}

// compaction is one compaction: what it summarises and keeps.
type compaction struct {
	why   string
	focus string
	// first is the first summarised message (after the system prompt), cut
	// the first kept one (len(history): none kept).
	first, cut int
	// estimate is the history's estimate when it was asked for.
	estimate int
}

// messageFraming is what MessageTokens counts for a message beside its
// bytes: its role and separators on the wire.
const messageFraming = 4

// MessageTokens is the deterministic token measure of one message the
// kernel and the simulator share (docs/semantics.md, "Compaction"): 4
// tokens of framing plus a quarter, rounded up, of the bytes of its
// content, tool_call_id, calls (ids, names, arguments) and reasoning
// (text and details).
func MessageTokens(m Message) int {
	b := len(m.Content) + len(m.ToolCallID)
	for _, c := range m.ToolCalls {
		b += len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	if r := m.Reasoning; r != nil {
		b += len(r.Text) + len(r.Details)
	}
	return messageFraming + (b+3)/4
}

// EstimateTokens is the measure of a history: the sum of its messages'.
func EstimateTokens(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += MessageTokens(m)
	}
	return n
}

// estimate is the size of the request a would send now: the last
// reported prompt size plus the measure of what was added since, or the
// measure of the whole history when no report is held.
func (a *agent) estimate() int {
	if a.ctx.reported > 0 && a.ctx.reportedAt <= len(a.history) {
		return a.ctx.reported + EstimateTokens(a.history[a.ctx.reportedAt:])
	}
	return EstimateTokens(a.history)
}

// threshold is context_window × compact_percent / 100.
func (k *Kernel) threshold() int {
	return int(int64(k.cfg.ContextWindow) * int64(k.cfg.CompactPercent) / 100)
}

// compactFirst decides, before a request, whether it may go out
// (docs/semantics.md, "Compaction", "When"). It returns true when it
// started a compaction instead, or ended the turn because the history
// cannot fit.
func (k *Kernel) compactFirst(a *agent) bool {
	w := k.cfg.ContextWindow
	if w <= 0 {
		return false
	}
	e, t := a.estimate(), k.threshold()
	if e <= t {
		return false
	}
	if !a.ctx.compacted {
		if c := planCompaction(a, whyThreshold, t/2, e); c.cut > c.first {
			if k.beginCompaction(a, c, false, "") {
				k.sendCompaction(a) // the slot this request was sent in
			}
			return true
		}
	}
	if e <= w {
		return false
	}
	detail := fmt.Sprintf("the history measures about %d tokens, more than the %d-token context window, and holds nothing older to compact: "+
		"shorten the system prompt or the message, or raise context_window if the model allows more", e, w)
	if a.ctx.compacted {
		detail = fmt.Sprintf("the history still measures about %d tokens after a compaction, more than the %d-token context window: "+
			"compact on demand with a focus that keeps less, start a new session, or raise context_window if the model allows more", e, w)
	}
	k.contextExhausted(a, detail, "")
	return true
}

// planCompaction says what a compaction of a's history summarises: all
// but the system prompt and the longest tail, starting at a cut point,
// that measures at most keep (none when keep is 0).
func planCompaction(a *agent, why string, keep, estimate int) *compaction {
	h := a.history
	first := 0
	if len(h) > 0 && h[0].Role == RoleSystem {
		first = 1
	}
	cut, size := len(h), 0
	for i := len(h) - 1; i >= first; i-- {
		if size += MessageTokens(h[i]); size > keep {
			break
		}
		if cutPoint(h[i]) {
			cut = i
		}
	}
	return &compaction{why: why, first: first, cut: cut, estimate: estimate}
}

// cutPoint reports whether the history may be split right before m: not
// before a tool message (a call is never separated from its result), a
// marker or an interjection (each stays with the message above it).
func cutPoint(m Message) bool {
	return m.Role == RoleAssistant || (m.Role == RoleUser && !m.Marker && !m.Interjection)
}

// startCompaction begins compaction c of a, which is Streaming with no
// request out or waiting, and asks for a request slot for its summarising
// request: a compaction's request is a request like any other, sent when a
// slot is free and waiting its turn otherwise (requests.go). fired says the
// caller already fired Compact (an on-demand compaction's Idle →
// Streaming). text is what the request the compaction follows had
// streamed (a refused request's partial text), the turn's text should the
// compaction not even be asked for.
func (k *Kernel) startCompaction(a *agent, c *compaction, fired bool, text string) {
	if k.beginCompaction(a, c, fired, text) {
		k.startRequest(a)
	}
}

// beginCompaction makes c a's compaction: false when it cannot run (the
// summarising request cannot fit, and the turn ended) or the FSM refused.
// From here until its request ends, text typed is kept for later
// (interjectCompacting), so the history stays as c planned it.
func (k *Kernel) beginCompaction(a *agent, c *compaction, fired bool, text string) bool {
	if !k.summaryFits(a, c) {
		k.contextExhausted(a, fmt.Sprintf("the system prompt leaves no room to ask for a summary within the threshold of %d tokens "+
			"(context_window %d): shorten the system prompt, or raise context_window if the model allows more", k.threshold(), k.cfg.ContextWindow), text)
		return false
	}
	if !fired && !k.fire(a, fsm.Compact) {
		return false
	}
	a.ctx.compaction = c
	return true
}

// sendCompaction sends the summarising request of a's compaction; a slot
// is free (sendRequest). The history is still the one beginCompaction
// checked, so the request fits as it did then.
func (k *Kernel) sendCompaction(a *agent) {
	c := a.ctx.compaction
	msgs, _ := k.summaryRequest(a, c)
	id := k.openRequest(a, op{kind: opLLM, agent: a.id, turn: a.turn, compact: true}, msgs)
	k.emit(Lifecycle{Kind: LifeCompactionStarted, Agent: a.id, Op: id, Name: c.why, N: c.estimate, Text: c.focus})
}

// completeCompaction applies a summary: the stream of request op, a's
// compaction, ended (docs/semantics.md, "Compaction", "The replacement").
func (k *Kernel) completeCompaction(a *agent, op OpID) {
	c := a.ctx.compaction
	summary := string(a.text)
	k.dropCompaction(a)
	if strings.TrimSpace(summary) == "" {
		k.compactionFailed(a, "the summarising request answered no text")
		return
	}
	h := a.history
	next := make([]Message, 0, c.first+1+len(h)-c.cut)
	next = append(next, h[:c.first]...)
	next = append(next, Message{Role: RoleUser, Content: summaryContent(summary), Summary: true})
	next = append(next, h[c.cut:]...)
	a.history = next
	a.ctx.reported, a.ctx.reportedAt = 0, 0
	k.emit(Lifecycle{Kind: LifeCompacted, Agent: a.id, Op: op, N: c.cut - c.first, Text: summary})
	if a.ctx.compactTurn {
		if k.fire(a, fsm.StreamText) {
			k.endTurn(a, OutcomeCompleted, ReasonNone, "")
		}
		return
	}
	a.ctx.compacted = true
	if !k.fire(a, fsm.Compacted) {
		return
	}
	k.flushQueued(a)
	if k.outOfBudget(a, false) { // a retry after the server's refusal is a new request
		return
	}
	k.startRequest(a)
}

// compactionFailed ends a's turn because its compaction failed: nothing of
// it reaches the history.
func (k *Kernel) compactionFailed(a *agent, detail string) {
	k.dropCompaction(a)
	hint := ""
	if k.cfg.ContextWindow <= 0 && strings.HasPrefix(detail, FailureContextLength.String()) {
		hint = " (set context_window to the model's window: a compaction then sends what fits)"
	}
	k.failContext(a, fsm.StreamFailed, ReasonCompactionFailed, "compaction failed: "+detail+hint, "")
}

// contextExhausted ends a's turn because its history cannot be made to fit;
// text is what the turn's last request had streamed, if anything.
func (k *Kernel) contextExhausted(a *agent, detail, text string) {
	k.failContext(a, fsm.ContextExhausted, ReasonContextExhausted, detail, text)
}

// failContext ends a's turn failed for reason, by trigger t: the text
// queued for the request that will not go reaches the history, then a
// marker (none in a compaction turn, which has no request of its own to
// mark).
func (k *Kernel) failContext(a *agent, t fsm.Trigger, reason Reason, detail, text string) {
	if !k.fire(a, t) {
		return
	}
	k.flushQueued(a)
	a.failDetail = detail
	if !a.ctx.compactTurn {
		k.appendMarker(a, OutcomeFailed, reason)
	}
	k.endTurn(a, OutcomeFailed, reason, text)
}

// contextRefused handles a request the server refused as too long: one
// compaction, then one more request; after a compaction, the turn ends
// (docs/semantics.md, "Compaction", "The server's refusal").
func (k *Kernel) contextRefused(a *agent, ev Event) {
	text := k.keepPartial(a)
	if !a.ctx.compacted {
		keep := 0
		if k.cfg.ContextWindow > 0 {
			keep = k.threshold() / 2
		}
		if c := planCompaction(a, whyContextLength, keep, a.estimate()); c.cut > c.first {
			k.startCompaction(a, c, false, text)
			return
		}
	}
	why := ", and there is nothing to compact"
	if a.ctx.compacted {
		why = " after a compaction"
	}
	k.contextExhausted(a, "the server refused the request as longer than the model's context window"+why+": "+failureDetail(ev)+
		" (set context_window to the model's real window, so that compactions keep the history within it, or start a new session)", text)
}

// dropCompaction forgets a's compaction and what its request streamed (the
// half-streamed calls recorded as dropped, F12).
func (k *Kernel) dropCompaction(a *agent) {
	a.ctx.compaction = nil
	a.text = a.text[:0]
	for i := range a.drafts {
		d := &a.drafts[i]
		k.emit(Lifecycle{Kind: LifeCallDropped, Agent: a.id, CallID: d.id, Name: d.name, Text: string(d.args)})
	}
	a.clearDrafts()
}

// restartCompaction asks a's compaction again after a crash lost its
// request (docs/semantics.md, "Recovery").
func (k *Kernel) restartCompaction(a *agent) {
	c := a.ctx.compaction
	k.dropCompaction(a)
	k.startCompaction(a, c, false, "")
}

// interjectCompacting keeps text typed while a compaction runs: for the
// request after it, or, in a compaction turn, for the next turn.
func (k *Kernel) interjectCompacting(a *agent, text string) {
	if a.ctx.compactTurn {
		a.nextTurn = append(a.nextTurn, input{text: text, interjection: true})
	} else {
		a.queued = append(a.queued, text)
	}
	k.emit(Lifecycle{Kind: LifeInterjected, Agent: a.id, Text: text, Queued: true})
}

// onCompact: the user asks for the root's history to be compacted now.
func (k *Kernel) onCompact(ev Event) {
	a := k.root()
	switch {
	case k.shutdown:
		k.reject(a.id, fmt.Errorf("compact: %w", ErrShutdown))
		return
	case a.state != fsm.Idle:
		k.reject(a.id, fmt.Errorf("compact: %w (%s): a compaction runs between turns", ErrNotIdle, a.state))
		return
	}
	c := planCompaction(a, whyRequested, 0, a.estimate())
	c.focus = ev.Text
	if c.cut <= c.first {
		k.emit(Lifecycle{Kind: LifeIgnored, Agent: a.id, Text: "nothing to compact"})
		return
	}
	if !k.beginTurn(a, fsm.Compact, nil) {
		return
	}
	a.ctx.compactTurn = true
	k.startCompaction(a, c, true, "")
}

// Usage is the agent's current turn's total so far, or its last turn's
// once it ended (docs/semantics.md, "Usage"); nil when the turn made no
// request.
func (v AgentView) Usage() *Usage { return v.a.ctx.usage.final() }

// Estimate is the size, in tokens, of the request the agent would send now
// (docs/semantics.md, "Compaction", "The estimate").
func (v AgentView) Estimate() int { return v.a.estimate() }

// Compacting reports whether the agent runs a compaction: its request in
// flight, or the one waiting for a request slot, is a compaction's
// summarising request.
func (v AgentView) Compacting() bool { return v.a.ctx.compaction != nil }

// CompactionTurn reports whether the agent's current (or last) turn is an
// on-demand compaction.
func (v AgentView) CompactionTurn() bool { return v.a.ctx.compactTurn }

// appendContext encodes an agent's contextState for AppendState.
func (e *stateEnc) appendContext(c *contextState) {
	e.uint(uint64(c.usage.total.PromptTokens))
	e.uint(uint64(c.usage.total.CompletionTokens))
	e.uint(uint64(c.usage.total.CachedTokens))
	e.uint(uint64(c.usage.total.ReasoningTokens))
	e.uint(uint64(c.usage.total.Requests))
	e.uint(uint64(c.usage.reported))
	e.uint(uint64(c.reported))
	e.uint(uint64(c.reportedAt))
	e.bool(c.compacted)
	e.bool(c.compactTurn)
	e.bool(c.compaction != nil)
	if x := c.compaction; x != nil {
		e.str(x.why)
		e.str(x.focus)
		e.uint(uint64(x.first))
		e.uint(uint64(x.cut))
		e.uint(uint64(x.estimate))
	}
}
