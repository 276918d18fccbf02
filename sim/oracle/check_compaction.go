package oracle

import (
	"reflect"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// compactionChecker holds I32–I36 (docs/semantics.md, "Compaction", "The
// rules the simulator holds"): a compaction replaces a history atomically
// (I32), never separates a call from its result (I33), no request goes out
// past a known window (I34), at most one compaction precedes a request
// (I35), and a compaction that does not complete leaves the history
// byte-identical to the one before it, but for what the abort appends
// (I36). It reads only what is published: the start_llm effects (a
// compaction's flagged compact), the compaction_started and compacted
// records, the streams' ends and their usage, and the agents' views.
type compactionChecker struct {
	judge
	// watch is what it follows of each agent, by id.
	watch []compactWatch
}

// compactWatch is one agent's compactions as observed.
type compactWatch struct {
	// open: a compaction started in turn and has not completed, and the
	// turn has not ended; snap is the history when its request was sent,
	// op that request, why its compaction_started record's reason; ended:
	// the request ended without completing the compaction (failed, cut,
	// lost in a crash).
	open  bool
	ended bool
	// onDemand: the compaction is an on-demand compaction's turn, which
	// leaves no marker.
	onDemand bool
	turn     uint64
	op       kernel.OpID
	why      string
	snap     []kernel.Message
	// since counts the compactions completed in turn sinceTurn since the
	// agent's last request that ended on its own; refused: a request sent
	// after one was refused as too long.
	since     int
	sinceTurn uint64
	refused   bool
	// reported is the prompt_tokens the agent's last request (not a
	// compaction) reported, and reportedAt how many messages it sent: the
	// base of the estimate (0: none since the last compaction).
	reported, reportedAt int
	// sent is how many messages each live request sent.
	sent map[kernel.OpID]int
}

func newCompactionChecker(j judge) *compactionChecker { return &compactionChecker{judge: j} }

func (c *compactionChecker) of(id kernel.AgentID) *compactWatch {
	for int(id) >= len(c.watch) {
		c.watch = append(c.watch, compactWatch{})
	}
	return &c.watch[id]
}

func (c *compactionChecker) step(s *stepObs) {
	if s.final {
		return
	}
	c.streamEnd(s)
	for i := range s.effs {
		e := &s.effs[i]
		switch {
		case e.Kind == kernel.EffStartLLM && e.Compact:
			c.compactionStarted(e)
		case e.Kind == kernel.EffStartLLM:
			c.requestStarted(e)
		case e.Kind == kernel.EffEmit:
			c.record(s, &e.Life)
		}
	}
	for _, id := range s.dirty {
		if w := c.of(id); w.open {
			c.unchanged(id, w)
		}
	}
	for i := range s.effs {
		if l := &s.effs[i].Life; s.effs[i].Kind == kernel.EffEmit && l.Kind == kernel.LifeTurnEnded {
			if w := c.of(l.Agent); w.open && w.turn == l.Turn {
				w.open, w.snap = false, nil
			}
		}
	}
}

// streamEnd reads the end of a request's stream: one that ended on its
// own lets the next request compact again, and its usage is the estimate's
// base; a refusal as too long after a compaction leaves no retry.
func (c *compactionChecker) streamEnd(s *stepObs) {
	op := s.op
	if op == nil || op.tool || op.compact || !s.answer || op.cancels > 0 {
		return
	}
	w := c.of(op.agent)
	sent, ok := w.sent[op.id]
	delete(w.sent, op.id)
	switch s.ev.Kind {
	case kernel.EvLLMEnd:
		w.since = 0
		if u := s.ev.Usage; u != nil && u.PromptTokens > 0 && ok {
			w.reported, w.reportedAt = u.PromptTokens, sent
		}
	case kernel.EvLLMError:
		if s.ev.Failure == kernel.FailureContextLength && w.since > 0 && w.sinceTurn == c.m.agents[op.agent].turn {
			w.refused = true
		}
	}
}

// threshold is context_window × compact_percent / 100 (0: the window is
// unknown).
func (c *compactionChecker) threshold() int {
	return int(int64(c.m.lim.ContextWindow) * int64(c.m.lim.CompactPercent) / 100)
}

// requestStarted judges a request (not a compaction) as it goes out: its
// estimate within a known window (I34), and no retry after a refusal that
// a compaction preceded (I35).
func (c *compactionChecker) requestStarted(e *kernel.Effect) {
	w := c.of(e.Agent)
	a := c.m.agents[e.Agent]
	if w.sinceTurn != a.turn {
		w.since, w.sinceTurn, w.refused = 0, a.turn, false
	}
	if w.refused {
		c.violate(OneCompaction, e.Agent, "request %d is sent after the server refused a request a compaction preceded: the turn must end context_exhausted", e.Op)
		w.refused = false
	}
	if w.sent == nil {
		w.sent = make(map[kernel.OpID]int)
	}
	w.sent[e.Op] = len(e.Messages)
	if win := c.m.lim.ContextWindow; win > 0 {
		if est := w.estimate(e.Messages); est > win {
			c.violate(WindowHeld, e.Agent, "request %d goes out with an estimate of %d tokens, past the %d-token context_window", e.Op, est, win)
		}
	}
}

// estimate is the size of a request that sends msgs, as the spec reckons
// it: the last reported prompt plus the measure of what was added since,
// or the measure of the whole.
func (w *compactWatch) estimate(msgs []kernel.Message) int {
	if w.reported > 0 && w.reportedAt <= len(msgs) {
		return w.reported + measure(msgs[w.reportedAt:])
	}
	return measure(msgs)
}

// compactionStarted judges a compaction's request as it goes out: at most
// one per request (I35), within the threshold (I34), and — when it asks
// again after a crash — over the history as it was (I36).
func (c *compactionChecker) compactionStarted(e *kernel.Effect) {
	w := c.of(e.Agent)
	a := c.m.agents[e.Agent]
	if w.sinceTurn != a.turn {
		w.since, w.sinceTurn, w.refused = 0, a.turn, false
	}
	if w.since > 0 {
		c.violate(OneCompaction, e.Agent, "compaction request %d starts after a compaction completed, before any request ended on its own", e.Op)
	}
	if t := c.threshold(); t > 0 {
		if n := measure(e.Messages); n > t {
			c.violate(WindowHeld, e.Agent, "compaction request %d measures %d tokens, past the %d-token threshold", e.Op, n, t)
		}
	}
	h := a.view.History
	if w.open && w.turn == a.turn {
		// A recovery asks the lost compaction again: nothing of the lost
		// one may have reached the history.
		if !sameHistory(h, w.snap) {
			c.violate(AbortedCompactionHarmless, e.Agent, "the compaction asked again after a crash finds a history of %d messages, not the %d it had", len(h), len(w.snap))
		}
	} else {
		w.snap = append(w.snap[:0], h...)
		w.why = ""
	}
	w.open, w.ended, w.turn, w.op, w.onDemand = true, false, a.turn, e.Op, a.t.compactTurn
}

// record reads a compaction's records and the end of its request.
func (c *compactionChecker) record(s *stepObs, l *kernel.Lifecycle) {
	if l.Agent < 0 {
		return
	}
	w := c.of(l.Agent)
	switch l.Kind {
	case kernel.LifeCompactionStarted:
		w.why = l.Name
	case kernel.LifeCompacted:
		c.completed(l, w)
	case kernel.LifeOpEnded:
		if w.open && l.Op == w.op && s.compactedOf(c.m.agents[l.Agent]) == nil {
			w.ended = true
		}
	}
}

// completed judges the step a compaction completed in: the history is
// exactly its compacted form (I32), cut where a call keeps its result
// (I33).
func (c *compactionChecker) completed(l *kernel.Lifecycle, w *compactWatch) {
	a := c.m.agents[l.Agent]
	if !w.open || l.Op != w.op {
		c.violate(CompactionAtomic, l.Agent, "compaction of request %d completed, but no compaction of it ran", l.Op)
		return
	}
	w.open = false
	w.since++
	w.reported, w.reportedAt = 0, 0
	first := 0
	if len(w.snap) > 0 && w.snap[0].Role == kernel.RoleSystem {
		first = 1
	}
	cut := first + l.N
	if l.N < 1 || cut > len(w.snap) {
		c.violate(CompactionAtomic, l.Agent, "compaction of request %d says it summarised %d of a history of %d messages", l.Op, l.N, len(w.snap))
		return
	}
	c.cutPoint(a, w, first, cut)
	want := make([]kernel.Message, 0, len(w.snap)-l.N+1)
	want = append(want, w.snap[:first]...)
	text := ""
	if op := c.m.ops.get(l.Op); op != nil {
		text = string(op.text)
	}
	want = append(want, kernel.Message{Role: kernel.RoleUser, Content: "<conversation_summary>\n" + text + "\n</conversation_summary>", Summary: true})
	want = append(want, w.snap[cut:]...)
	h := a.view.History
	if len(h) < len(want) || !sameHistory(h[:len(want)], want) || !abortsOwn(h[len(want):]) {
		c.violate(CompactionAtomic, l.Agent, "after compaction of request %d the history (%d messages) is not the system prompt, the summary it streamed and the %d kept message(s) (then only what waited for it)",
			l.Op, len(h), len(w.snap)-cut)
	}
	w.snap = nil
}

// cutPoint judges where a compaction cut the history (I33): before a
// message that is neither a tool message, a marker nor an interjection,
// keeping the longest such tail within half the threshold (none for an
// on-demand compaction, or with the window unknown).
func (c *compactionChecker) cutPoint(a *agentObs, w *compactWatch, first, cut int) {
	if cut < len(w.snap) && !cutBefore(w.snap[cut]) {
		c.violate(NoSplitPair, a.id, "a compaction kept a tail that starts with a %s message (tool_call_id %q, marker %v, interjection %v): it is cut from the message above it",
			w.snap[cut].Role, w.snap[cut].ToolCallID, w.snap[cut].Marker, w.snap[cut].Interjection)
		return
	}
	keep := 0
	if w.why != "requested" && c.m.lim.ContextWindow > 0 {
		keep = c.threshold() / 2
	}
	if tail := measure(w.snap[cut:]); tail > keep {
		c.violate(NoSplitPair, a.id, "a compaction kept a tail of %d tokens, more than %d", tail, keep)
		return
	}
	for j := cut - 1; j > first; j-- {
		if cutBefore(w.snap[j]) && measure(w.snap[j:]) <= keep {
			c.violate(NoSplitPair, a.id, "a compaction cut before message %d, but the longer tail from message %d fits in %d tokens too", cut, j, keep)
			return
		}
	}
}

// unchanged judges the history of an agent whose compaction has not
// completed: exactly as it was while the compaction streams (I32), and
// after it ended without completing as it was plus only what the abort
// appends (I36).
func (c *compactionChecker) unchanged(id kernel.AgentID, w *compactWatch) {
	a := c.m.agents[id]
	h := a.view.History
	running := !w.ended && a.state == fsm.Streaming
	switch {
	case running && !sameHistory(h, w.snap):
		c.violate(CompactionAtomic, id, "the history changed (%d messages, %d when the compaction started) while compaction request %d streams", len(h), len(w.snap), w.op)
	case !running && (len(h) < len(w.snap) || !sameHistory(h[:len(w.snap)], w.snap) || !abortsOwnThen(h[len(w.snap):], a.turn != w.turn, w.onDemand)):
		c.violate(AbortedCompactionHarmless, id, "compaction request %d ended without completing, and the history (%d messages) is not the one before it (%d) plus what its abort appends", w.op, len(h), len(w.snap))
	default:
		return
	}
	w.open, w.snap = false, nil // one report per compaction
}

// abortsOwn reports whether msgs are only what an abort appends to a
// history: interjections and a marker.
func abortsOwn(msgs []kernel.Message) bool {
	for _, m := range msgs {
		if m.Role != kernel.RoleUser || !(m.Marker || m.Interjection) {
			return false
		}
	}
	return true
}

// abortsOwnThen is abortsOwn, but once the abort's marker is read, what
// follows may be a next turn's, when one started (in the step the aborted
// turn settled).
func abortsOwnThen(msgs []kernel.Message, next, onDemand bool) bool {
	if next && onDemand {
		return true // no marker: what follows is the next turn's
	}
	for i, m := range msgs {
		if m.Role != kernel.RoleUser || !(m.Marker || m.Interjection) {
			return false
		}
		if m.Marker && next {
			return abortsOwn(msgs[:i+1])
		}
	}
	return true
}

// cutBefore reports whether a history may be cut right before m.
func cutBefore(m kernel.Message) bool {
	return m.Role == kernel.RoleAssistant || (m.Role == kernel.RoleUser && !m.Marker && !m.Interjection)
}

// sameHistory reports whether two histories are byte-identical.
func sameHistory(x, y []kernel.Message) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !reflect.DeepEqual(x[i], y[i]) {
			return false
		}
	}
	return true
}

// measure is the spec's token measure of messages (docs/semantics.md,
// "Compaction", "The measure"), the oracle's own statement of it: per
// message 4 tokens of framing plus a quarter, rounded up, of the bytes of
// its content, tool_call_id, calls' ids, names and arguments, and
// reasoning's text and details.
func measure(msgs []kernel.Message) int {
	n := 0
	for _, m := range msgs {
		b := len(m.Content) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			b += len(tc.ID) + len(tc.Name) + len(tc.Arguments)
		}
		if r := m.Reasoning; r != nil {
			b += len(r.Text) + len(r.Details)
		}
		n += 4 + (b+3)/4
	}
	return n
}
