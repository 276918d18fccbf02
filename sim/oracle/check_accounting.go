package oracle

import (
	"fmt"
	"slices"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
)

// accountingChecker holds I9 (F10) and I21. Every op started ends exactly
// once, and says truthfully what ended it: completed or failed by its own
// answer, cancelled by the answer to its cancel, abandoned when its grace
// ran out, lost when the host crashed (every op in flight then, resolved by
// the recovery) — in the step that ended it (an op's answer ends it at
// once). No
// timer is stopped that was not set, none survives the run, and the
// lifecycle log replays to a subscriber that joins late exactly as it was
// emitted.
type accountingChecker struct{ judge }

func (c *accountingChecker) step(s *stepObs) {
	if s.final {
		return
	}
	answered := false
	for i := range s.effs {
		e, n := &s.effs[i], &s.notes[i]
		switch e.Kind {
		case kernel.EffStartLLM, kernel.EffStartTool:
			if n.bad {
				c.violate(OpsAccounted, e.Agent, "op %d started twice", e.Op)
			}
		case kernel.EffStopTimer:
			if n.bad {
				c.violate(OpsAccounted, e.Agent, "stop of timer %d, which is not set", e.Op)
			}
		case kernel.EffEmit:
			if e.Life.Kind == kernel.LifeOpEnded && c.opEnded(s, &e.Life, n) {
				answered = true
			}
		}
	}
	if s.stale == notStale {
		c.late(s)
	}
	if s.answer && !answered {
		c.violate(OpEndsTruthful, s.op.agent, "op %d got its answer (%s) and did not end", s.op.id, s.ev.Kind)
	}
	if s.is(kernel.EvRecover) {
		c.recovered(s)
	}
}

// opEnded judges an op's end: an op started and not ended before, ended
// as the step says it must. It reports the end of the op the step
// answered.
func (c *accountingChecker) opEnded(s *stepObs, l *kernel.Lifecycle, n *note) bool {
	switch {
	case n.op == nil:
		c.violate(OpsAccounted, l.Agent, "op %d ended but was never started", l.Op)
		return false
	case n.bad:
		c.violate(OpsAccounted, l.Agent, "op %d ended twice", l.Op)
		return false
	}
	if want, why := c.expectedEnd(s, n.op); want == kernel.OpEndNone {
		c.violate(OpEndsTruthful, l.Agent, "op %d ended %s in a step that neither answered it nor ran out a grace (%s)", l.Op, l.End, s.ev.Kind)
	} else if l.End != want {
		c.violate(OpEndsTruthful, l.Agent, "op %d ended %s, but %s: %s", l.Op, l.End, why, want)
	}
	return n.op == s.op && s.answer
}

// late: the answer to a cancel ends its op quietly — a request's end or
// failure, a tool's cancelled status — but a tool that answers a cancel
// with a real result ran on regardless (F3): that result is dropped, and
// one late record says so. No other step of a live op leaves a late record
// (a stale event's is I8's).
func (c *accountingChecker) late(s *stepObs) {
	want := 0
	if op := s.op; op != nil && s.answer && op.cancels > 0 && op.tool && op.result != kernel.ToolCancelled {
		want = 1
	}
	n := 0
	for i := range s.effs {
		if l := &s.effs[i].Life; s.effs[i].Kind == kernel.EffEmit && l.Kind == kernel.LifeLate {
			if want == 0 || l.Op != s.op.id {
				c.violate(OpEndsTruthful, l.Agent, "%s left a late record for op %d (%q); only a cancelled tool's real result is dropped late", s.ev.Kind, l.Op, l.Text)
				return
			}
			n++
		}
	}
	if n != want {
		c.violate(OpEndsTruthful, s.op.agent, "the result tool %d sent after its cancel left %d late record(s), want 1", s.op.id, n)
	}
}

// recovered: a recovery announces itself (announced) and resolves every
// op in flight at the crash (s.lost).
func (c *accountingChecker) recovered(s *stepObs) {
	c.announced(s)
	for _, op := range s.lost {
		if op.end != kernel.OpLost {
			c.violate(OpEndsTruthful, op.agent, "op %d was in flight at the crash and the recovery did not resolve it", op.id)
		}
	}
}

// announced: a recovery announces itself first, with the number of ops it
// resolves (every one in flight at the crash).
func (c *accountingChecker) announced(s *stepObs) {
	for i := range s.effs {
		if e := &s.effs[i]; e.Kind == kernel.EffEmit {
			if e.Life.Kind != kernel.LifeRecovered || e.Life.N != len(s.lost) {
				c.violate(OpEndsTruthful, kernel.Root, "a recovery of %d op(s) begins with %s", len(s.lost), e.Life.Describe())
			}
			return
		}
	}
	c.violate(OpEndsTruthful, kernel.Root, "a recovery of %d op(s) says nothing", len(s.lost))
}

// expectedEnd is how op must end in this step, and why (OpEndNone: the
// step gives it no reason to end).
func (c *accountingChecker) expectedEnd(s *stepObs, op *opObs) (kernel.OpEnd, string) {
	switch {
	case s.is(kernel.EvRecover) && slices.Contains(s.lost, op):
		return kernel.OpLost, "the host crashed while it ran"
	case s.is(kernel.EvRecover):
		return kernel.OpEndNone, ""
	case op == s.op && s.answer:
		return answerEnd(s, op)
	case s.timerSet && s.timer.kind == kernel.TimerGrace && op.cancels > 0:
		return kernel.OpAbandoned, "a grace ran out"
	}
	return kernel.OpEndNone, ""
}

// answerEnd is how the answer of the step ends op, and why.
func answerEnd(s *stepObs, op *opObs) (kernel.OpEnd, string) {
	switch {
	case op.cancels > 0:
		return kernel.OpCancelled, "its answer came after its cancel"
	case op.tool && op.result == kernel.ToolOK:
		return kernel.OpCompleted, "its tool answered ok"
	case op.tool:
		return kernel.OpFailed, "its tool answered " + op.result.String()
	case s.ev.Kind == kernel.EvLLMEnd:
		return kernel.OpCompleted, "its stream ended"
	}
	return kernel.OpFailed, "its stream failed"
}

func (c *accountingChecker) finish() {
	c.log()
	for _, op := range c.m.live {
		c.violate(OpsAccounted, op.agent, "op %d started at %v never ended", op.id, op.start)
	}
	for _, id := range keys.Sorted(c.m.timers) {
		c.violate(OpsAccounted, kernel.NoAgent, "timer %d survives the run", id)
	}
}

// log replays the lifecycle log from the oldest sequence it holds, as a
// subscriber that joined late would, and compares it with what was emitted
// (F10).
func (c *accountingChecker) log() {
	m := c.m
	if m.nEmitted == 0 {
		return
	}
	start := m.c.LogOldest()
	next := start
	// Hashes older than the ring are gone (a core keeping a longer log than
	// a simulated kernel): those events are checked for order only.
	hashedFrom := uint64(1)
	if m.nEmitted > emittedRing {
		hashedFrom = m.nEmitted - emittedRing + 1
	}
	var bad string
	err := m.c.LogRange(start, func(l kernel.Lifecycle) bool {
		switch {
		case l.Seq != next:
			bad = fmt.Sprintf("a subscriber from seq %d gets seq %d where seq %d was emitted", start, l.Seq, next)
		case l.Seq > m.nEmitted:
			bad = fmt.Sprintf("replay holds seq %d, never emitted", l.Seq)
		case l.Seq >= hashedFrom && lifeHash(l) != m.emitted[(l.Seq-1)%emittedRing]:
			bad = fmt.Sprintf("replayed seq %d (%s) differs from what was emitted", l.Seq, l.Describe())
		}
		next++
		return bad == ""
	})
	switch {
	case err != nil:
		c.violate(OpsAccounted, kernel.NoAgent, "lifecycle log: replay from seq %d: %v", start, err)
	case bad != "":
		c.violate(OpsAccounted, kernel.NoAgent, "lifecycle log: %s", bad)
	case next <= m.nEmitted:
		c.violate(OpsAccounted, kernel.NoAgent, "lifecycle log: a subscriber from seq %d misses seq %d..%d", start, next, m.nEmitted)
	}
}

// lifeHash mixes a lifecycle event's identifying fields into 64 bits. It
// only has to tell a replayed event from the one emitted with the same
// sequence number (F10): missing, reordered or substituted events change
// seq, kind, agent, op or turn; texts are represented by their length, which
// keeps this off the per-chunk hot path.
func lifeHash(l kernel.Lifecycle) uint64 {
	h := uint64(14695981039346656037)
	for _, v := range [...]uint64{
		l.Seq, uint64(l.At),
		uint64(l.Kind) | uint64(l.From)<<8 | uint64(l.To)<<16 | uint64(l.Trigger)<<24 | uint64(l.Outcome)<<32 | uint64(l.Reason)<<40 | uint64(l.End)<<48 | uint64(l.Status)<<56,
		uint64(uint32(l.Agent)) | uint64(uint32(l.Child))<<32, l.Turn, uint64(l.Op),
		uint64(len(l.Text)) | uint64(len(l.CallID))<<24 | uint64(len(l.Name))<<48,
	} {
		h ^= v
		h *= 0x9e3779b97f4a7c15
		h ^= h >> 32
	}
	return h
}
