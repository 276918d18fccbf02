package oracle

import (
	"strconv"

	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// contentChecker holds I17 and I20: what the transcripts and the lifecycle
// say about a turn's end is what happened. A marker's outcome and reason are
// its turn's, and its partial attribute says whether the abort or failure
// cut streamed text off (the partial message right above it). A turn's end
// carries the text its agent produced — the final answer, or the text its
// abort or failure cut — and a delegation's result hands the parent exactly
// that, under the child's name (docs/semantics.md, "Results").
type contentChecker struct{ judge }

func (c *contentChecker) step(s *stepObs) {
	// (A chunk past the cap that the stream went on after is I15's.)
	if s.op != nil && s.is(kernel.EvLLMDelta) && (s.capCut == nil || s.op.cancels > 0) {
		c.published(s)
	}
	if s.op != nil && s.is(kernel.EvLLMRetry) {
		c.retried(s)
	}
	for i := range s.turnEnds {
		e := &s.turnEnds[i]
		if e.second {
			continue
		}
		c.endText(e)
		c.marker(e)
		for _, f := range e.owed {
			c.childResult(f, e.a, e.a.end)
		}
	}
	for i := range s.callFins {
		if r := &s.callFins[i]; r.childEnded && r.f.n == 1 {
			c.childResult(r.f, r.child, r.childEnd)
		}
	}
}

// published: streamed text reaches subscribers as it arrives — each live
// chunk's text (what fit, at the cap) in one delta record; a call fragment
// in none.
func (c *contentChecker) published(s *stepObs) {
	n := 0
	for i := range s.effs {
		if l := &s.effs[i].Life; s.effs[i].Kind == kernel.EffEmit && l.Kind == kernel.LifeDelta {
			if l.Op != s.op.id || l.Text != s.delta {
				c.violate(ResultsCarryText, s.op.agent, "a chunk of request %d bringing %q is published as %q (op %d)", s.op.id, textcut.Clip(s.delta, 40), textcut.Clip(l.Text, 40), l.Op)
				return
			}
			n++
		}
	}
	if want := min(len(s.delta), 1); n != want {
		c.violate(ResultsCarryText, s.op.agent, "a chunk of request %d bringing %q left %d delta record(s), want %d", s.op.id, textcut.Clip(s.delta, 40), n, want)
	}
}

// retried: an adapter's retry of a live request is published once, as a
// retry record saying which attempt it is, how long it waits and why.
func (c *contentChecker) retried(s *stepObs) {
	n := 0
	for i := range s.effs {
		if l := &s.effs[i].Life; s.effs[i].Kind == kernel.EffEmit && l.Kind == kernel.LifeRetry {
			if l.Op != s.op.id || l.N != s.ev.Attempt || l.Delay != s.ev.Delay || l.Text != s.ev.Text {
				c.violate(ResultsCarryText, s.op.agent, "retry %d of request %d (wait %v) is published as retry %d of op %d (wait %v, %q)", s.ev.Attempt, s.op.id, s.ev.Delay, l.N, l.Op, l.Delay, textcut.Clip(l.Text, 40))
				return
			}
			n++
		}
	}
	if n != 1 {
		c.violate(ResultsCarryText, s.op.agent, "retry %d of request %d left %d retry record(s), want 1", s.ev.Attempt, s.op.id, n)
	}
}

// produced is the text a's turn produced: the text of its final stream
// when it completed, else what its abort or failure cut off.
func (c *contentChecker) produced(l *kernel.Lifecycle, f *turnFacts) string {
	if l.Outcome == kernel.OutcomeCompleted {
		if op := c.m.ops.get(f.lastReq); op != nil {
			return string(op.text)
		}
		return ""
	}
	return f.cut
}

func (c *contentChecker) endText(e *turnEndObs) {
	if want := c.produced(e.l, &e.facts); e.l.Text != want {
		c.violate(ResultsCarryText, e.a.id, "turn %d ended %s with text %q, but it produced %q",
			e.l.Turn, e.l.Outcome, textcut.Clip(e.l.Text, 60), textcut.Clip(want, 60))
	}
	// The detail says why a turn failed, and only a failed one has one.
	if (e.l.Detail != "") != (e.l.Outcome == kernel.OutcomeFailed) {
		c.violate(ResultsCarryText, e.a.id, "turn %d ended %s with detail %q", e.l.Turn, e.l.Outcome, textcut.Clip(e.l.Detail, 60))
	}
	// A stream failure's detail names its kind and the adapter's message.
	if e.l.Reason == kernel.ReasonLLMError && e.facts.llmFailed && e.l.Detail != e.facts.failDetail {
		c.violate(ResultsCarryText, e.a.id, "turn %d failed with detail %q; its stream failed with %q", e.l.Turn, textcut.Clip(e.l.Detail, 60), textcut.Clip(e.facts.failDetail, 60))
	}
}

// marker judges the one marker of an aborted turn (I13 counts them).
func (c *contentChecker) marker(e *turnEndObs) {
	l, a := e.l, e.a
	if l.Outcome == kernel.OutcomeCompleted || a.markerTurn != l.Turn || a.markers != 1 {
		return
	}
	mk := a.marker
	// The partial message right above the marker is the text the turn's
	// end cut off — its abort's, its failure's, or a crash's whose restart
	// the budget refused.
	partial := strconv.FormatBool(mk.above)
	if e.facts.cut != "" && !mk.above {
		c.violate(MarkersTell, a.id, "the marker of turn %d does not follow the text its abort cut off, %q", l.Turn, textcut.Clip(e.facts.cut, 60))
		return
	}
	switch {
	case !mk.ok:
		c.violate(MarkersTell, a.id, "the marker of turn %d is not `%soutcome=\"…\" reason=\"…\" partial=\"…\">`", l.Turn, kernel.MarkerPrefix)
	case mk.outcome != l.Outcome.String() || mk.reason != l.Reason.String():
		c.violate(MarkersTell, a.id, "the marker of turn %d says %s (%q), but the turn ended %s (%q)", l.Turn, mk.outcome, mk.reason, l.Outcome, l.Reason)
	case mk.partial != partial:
		c.violate(MarkersTell, a.id, "the marker of turn %d says partial=%q, but the message above it is %s", l.Turn, mk.partial, map[bool]string{true: "cut-off text", false: "no cut-off text"}[mk.above])
	}
}

// childResult compares a delegation's structured result with the end of the
// child's turn.
func (c *contentChecker) childResult(f *callObs, child *agentObs, end turnEnd) {
	if !f.read || !f.parsed {
		return // a result never read, or not structured: I13's to judge
	}
	r := &f.content
	summary, partial := "", end.text
	if end.outcome == kernel.OutcomeCompleted {
		summary, partial = end.text, ""
	}
	switch {
	case r.Agent != child.name:
		c.violate(ResultsCarryText, f.l.Agent, "call %s names agent %q, but it was %q", f.l.CallID, r.Agent, child.name)
	case r.Summary != summary || r.Partial != partial:
		c.violate(ResultsCarryText, f.l.Agent, "call %s hands the parent summary %q and partial %q, but %s ended %s with %q",
			f.l.CallID, textcut.Clip(r.Summary, 40), textcut.Clip(r.Partial, 40), child.path, end.outcome, textcut.Clip(end.text, 40))
	case r.Error != end.detail:
		c.violate(ResultsCarryText, f.l.Agent, "call %s reports error %q, but %s ended with %q", f.l.CallID, textcut.Clip(r.Error, 60), child.path, textcut.Clip(end.detail, 60))
	}
}
