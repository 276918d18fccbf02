package oracle

import (
	"slices"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// The model's reading of compactions (docs/semantics.md, "Compaction"): a
// compaction's summarising request is a stream like any other — it holds
// a request slot, it is cancelled, timed out and recovered as one — but it
// is none of its turn's max_requests, it publishes no deltas, what it
// streamed is never kept, and when it completes the agent's history is
// replaced in one step. The checkers of I32–I36 (check_compaction.go)
// judge what the model reads here.

// compactedObs is a compaction that completed in the step: its agent, the
// messages it summarised (the compacted record's N) and its request.
type compactedObs struct {
	a  *agentObs
	n  int
	op kernel.OpID
}

// startCompaction reads a compaction's summarising request started: a
// stream of its agent, not a request of its turn.
func (m *model) startCompaction(e *kernel.Effect, n *note, a *agentObs) {
	a.compactions++
	a.compactReq, a.t.compactReq = e.Op, e.Op
	// What a refused request had streamed is kept before its compaction
	// starts: it is no text a later end of the turn cuts off.
	a.t.cut = ""
	a.liveOps++
	n.a, n.count = a, a.t.requests
	n.firstWaiting = kernel.NoAgent
	if len(m.waiting) > 0 {
		n.firstWaiting = m.waiting[0]
	}
	m.unwait(a)
	n.op, n.bad = m.startOp(e, false)
	if n.op != nil {
		n.op.compact = true
	}
	m.requestStarted(a, n.op)
	n.liveRequests = m.liveRequests()
}

// compactedOf is a's compaction completed in this step, nil when none.
func (s *stepObs) compactedOf(a *agentObs) *compactedObs {
	for i := range s.compacted {
		if s.compacted[i].a == a {
			return &s.compacted[i]
		}
	}
	return nil
}

// replaced reads a history a compaction replaced in this step: the
// summarised messages are gone, the summary stands in their place and the
// kept tail follows, as read before; what follows the tail (the
// interjections the compaction held back) is read as new. Whether the new
// history is exactly the compacted form of the old is I32's to judge
// (check_compaction.go); the model only finds where to read on.
func (m *model) replaced(a *agentObs, h []kernel.Message) bool {
	c := m.s.compactedOf(a)
	if c == nil {
		return false
	}
	first := 0
	if len(h) > 0 && h[0].Role == kernel.RoleSystem {
		first = 1
	}
	next := first + 1 + a.histLen - first - c.n // system, summary, tail
	next = max(min(next, len(h)), 0)
	a.histLen = next
	if next > 0 {
		a.last, a.lastRead = h[next-1], h[next-1]
	}
	return true
}

// markerTurn is the turn a marker a's history gained in this step belongs
// to: the earliest turn of a that ended in this step, not completed, and
// after the turn of the last marker read — two turns can end in one step
// when the second starts and cannot ask even for a compaction — else a's
// current turn.
func (m *model) markerTurn(a *agentObs) uint64 {
	for i := range m.s.turnEnds {
		if e := &m.s.turnEnds[i]; e.a == a && !e.second && e.l.Outcome != kernel.OutcomeCompleted && e.l.Turn > a.markerTurn && e.l.Turn < a.turn {
			return e.l.Turn
		}
	}
	return a.turn
}

// markersOf is how many markers a's history holds for turn (of the last
// two turns that left one).
func (a *agentObs) markersOf(turn uint64) int {
	switch turn {
	case a.markerTurn:
		return a.markers
	case a.prevMarkerTurn:
		return a.prevMarkers
	}
	return 0
}

// compacting reports whether a runs a compaction: Streaming, with its
// compaction's request live or waiting for a slot.
func (m *model) compacting(a *agentObs) bool {
	if a.state != fsm.Streaming {
		return false
	}
	if a.waitingCompaction {
		return true
	}
	op := m.ops.get(a.compactReq)
	return op != nil && !op.terminal && op.cancels == 0 && !op.ended
}

// compaction sees a compaction's records: why one started, one that ended
// without completing (cancelled, abandoned, lost) or failed, and a turn
// that could not be made to fit.
func (p *probeSet) compaction(m *model, l *kernel.Lifecycle) {
	switch {
	case l.Kind == kernel.LifeCompactionStarted && l.Name == "threshold":
		p.hit(ProbeCompactionThreshold)
	case l.Kind == kernel.LifeCompactionStarted && l.Name == "context_length":
		p.hit(ProbeCompactionContextLength)
	case l.Kind == kernel.LifeOpEnded && l.End != kernel.OpCompleted && l.End != kernel.OpFailed:
		if op := m.ops.get(l.Op); op != nil && op.compact {
			p.hit(ProbeCompactionAborted)
		}
	case l.Kind == kernel.LifeTurnEnded && l.Reason == kernel.ReasonCompactionFailed:
		p.hit(ProbeCompactionFailed)
	case l.Kind == kernel.LifeTurnEnded && l.Reason == kernel.ReasonContextExhausted:
		p.hit(ProbeContextExhausted)
	}
}

// beginText reads a submission or interjection about to be stepped: what
// it cuts of the root's running stream, or that it waits for the root's
// compaction.
func (m *model) beginText(root *agentObs) {
	s := &m.s
	s.input = true
	s.rootCompacting = m.compacting(root)
	if op := m.liveRequest(root); op != nil && root.state == fsm.Streaming && !op.compact {
		s.rootCut = string(op.text)
	}
}

// overCapped reports whether request id was cut at max_message_bytes.
func (c *outcomeChecker) overCapped(id kernel.OpID) bool {
	op := c.m.ops.get(id)
	return op != nil && op.overCapped
}

// contextEndJustified reports whether a turn's facts justify a
// compaction's reasons: a compaction that failed, or a history that could
// not be made to fit — a known window, or the server's refusal (I34
// judges the estimate itself).
func (c *outcomeChecker) contextEndJustified(r kernel.Reason, f *turnFacts) bool {
	switch r {
	case kernel.ReasonCompactionFailed:
		return f.compactFailed
	case kernel.ReasonContextExhausted:
		return c.m.lim.ContextWindow > 0 || f.refused
	}
	return false
}

// completedJustified reports whether a turn that completed got there: its
// last request's stream ended on its own, or — an on-demand compaction's
// turn — its compaction's did.
func (c *outcomeChecker) completedJustified(e *turnEndObs) bool {
	id := e.facts.lastReq
	if e.facts.compactTurn {
		id = e.facts.compactReq
	}
	op := c.m.ops.get(id)
	return op != nil && op.endedOK
}

// waitsForCompactionTurn reports whether the step's text was typed while
// the root ran an on-demand compaction: it waits for that turn's end and
// starts the next turn, however the compaction ends (docs/semantics.md,
// "Compaction", "On demand").
func (m *model) waitsForCompactionTurn(s *stepObs) bool {
	return s.is(kernel.EvInterject) && s.rootCompacting && m.agents[kernel.Root].t.compactTurn
}

// heldLineStarts reports whether the step started the root's turn from a
// line typed during an on-demand compaction: that turn ended in this step
// and the next started with what waited for it (docs/semantics.md,
// "Compaction", "On demand").
func (m *model) heldLineStarts(s *stepObs) bool {
	root := m.agents[kernel.Root]
	if !slices.Contains(s.started, root) {
		return false
	}
	for i := range s.turnEnds {
		if e := &s.turnEnds[i]; e.a == root && e.facts.compactTurn {
			return true
		}
	}
	return false
}
