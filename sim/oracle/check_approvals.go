package oracle

import (
	"slices"
	"time"

	"github.com/escapement/escapement/kernel"
)

// approvalChecker holds I27–I31, a person's decision as a kernel wait
// (docs/semantics.md, "Approvals"): a call of a tool that asks starts only
// after an approval naming its agent, call and digest, or under a session
// grant (I27); every request ends exactly once, on time, and is asked
// again only by a recovery (I28); expiry and withdrawal never authorize
// (I29); a decision changes only the call it names (I30); a withdrawal
// never reads as a denial (I31). It reads the model's waits
// (oracle_approvals.go); a run whose configuration asks about no tool
// gives it only decisions to judge.
type approvalChecker struct {
	judge
	// late are the waits already reported open past their bound.
	late []*waitObs
}

func (c *approvalChecker) step(s *stepObs) {
	if s.final {
		return
	}
	p := &c.m.ap
	if s.is(kernel.EvDecision) {
		c.decision(s)
	}
	if !p.on {
		return
	}
	for i := range p.st.requested {
		c.requested(s, &p.st.requested[i])
	}
	if s.is(kernel.EvRecover) {
		c.reasked(s)
	}
	for i := range p.st.resolved {
		c.resolved(s, &p.st.resolved[i])
	}
	for i := range s.effs {
		if e := &s.effs[i]; e.Kind == kernel.EffStartTool {
			c.started(e)
		}
	}
	for _, r := range s.callFins {
		c.result(r.l)
	}
	for i := range s.msgs {
		if o := &s.msgs[i]; o.m.Role == kernel.RoleTool && o.m.Synthetic && o.f != nil && o.f.parsed {
			c.content(o)
		}
	}
}

// elapse: no wait is open past the earlier of its expiry and its turn
// deadline (I28).
func (c *approvalChecker) elapse() {
	p := &c.m.ap
	if p.open == 0 {
		return
	}
	for _, w := range p.order {
		if w.end != kernel.ApprovalNone || slices.Contains(c.late, w) {
			continue
		}
		if bound := c.bound(w); c.m.now > bound {
			c.late = append(c.late, w)
			c.violate(ApprovalEndsOnce, w.agent, "call %s still waits for approval at %v, past %v (asked at %v)", w.call, c.m.now, bound, w.asked)
		}
	}
}

// bound is when w must have ended: its expiry, or its turn deadline when
// that comes first.
func (c *approvalChecker) bound(w *waitObs) time.Duration {
	b := w.asked + c.m.lim.ApprovalTimeout
	if w.deadline > 0 && w.deadline < b {
		b = w.deadline
	}
	return b
}

// finish: every wait ended (I28), unless a run limit stopped the run.
func (c *approvalChecker) finish() {
	if c.m.stopped {
		return
	}
	for _, w := range c.m.ap.order {
		if w.end == kernel.ApprovalNone && !slices.Contains(c.late, w) {
			c.violate(ApprovalEndsOnce, w.agent, "call %s's wait for approval never ended", w.call)
		}
	}
}

// requested: a request shows a call its agent's last message holds, with
// its arguments' digest (I27); it is made once, and again only by a
// recovery while it still waits, and it says when it ends by itself (I28).
func (c *approvalChecker) requested(s *stepObs, r *approvalRec) {
	l, w := &r.l, r.w
	if !r.fresh {
		switch {
		case !s.is(kernel.EvRecover):
			c.violate(ApprovalEndsOnce, l.Agent, "call %s asked for approval again outside a recovery", l.CallID)
		case !r.wasOpen:
			c.violate(ApprovalEndsOnce, l.Agent, "call %s asked for approval again after its wait ended %s", l.CallID, w.end)
		}
		return
	}
	if l.Digest != kernel.Digest(l.Text) {
		c.violate(ApprovedBeforeStart, l.Agent, "the request of call %s shows digest %s; its arguments' is %s", l.CallID, l.Digest, kernel.Digest(l.Text))
	}
	a := c.m.agents[l.Agent]
	if !slices.ContainsFunc(a.lastCalls, func(t kernel.ToolCall) bool {
		return t.ID == l.CallID && t.Name == l.Name && t.Arguments == l.Text
	}) {
		c.violate(ApprovedBeforeStart, l.Agent, "the request of call %s shows %s(%s), which is no call of its agent's last message", l.CallID, l.Name, l.Text)
	}
	if want := c.bound(w) - w.asked; l.Delay != want {
		c.violate(ApprovalEndsOnce, l.Agent, "the request of call %s says it ends within %v; it ends within %v (approval_timeout, or its turn deadline)", l.CallID, l.Delay, want)
	}
}

// reasked: a recovery asks again every wait the crashed host held (I28:
// a request is never lost).
func (c *approvalChecker) reasked(s *stepObs) {
	for _, w := range c.m.ap.order {
		if w.end != kernel.ApprovalNone {
			continue
		}
		if !slices.ContainsFunc(c.m.ap.st.requested, func(r approvalRec) bool { return r.w == w }) {
			c.violate(ApprovalEndsOnce, w.agent, "the recovery did not ask again for call %s, which waits for approval", w.call)
		}
	}
}

// resolved judges a wait's end: once (I28), approved only by a decision
// naming it or a grant made in its step (I27, I29), expired exactly at its
// expiry (I28), denied only by a decision naming it (I30), withdrawn only
// by its turn's abort and with its reason (I28, I31).
func (c *approvalChecker) resolved(s *stepObs, r *approvalRec) {
	l, w := &r.l, r.w
	switch {
	case w == nil:
		c.violate(ApprovalEndsOnce, l.Agent, "call %s's wait ended %s, but it never asked", l.CallID, l.Approval)
		return
	case !r.wasOpen:
		c.violate(ApprovalEndsOnce, l.Agent, "call %s's wait ended %s after it had ended %s", l.CallID, l.Approval, w.end)
		return
	}
	if l.Since != w.asked {
		c.violate(ApprovalEndsOnce, l.Agent, "call %s's wait ended %s since %v; it was asked at %v", l.CallID, l.Approval, l.Since, w.asked)
	}
	switch l.Approval {
	case kernel.ApprovalApproved:
		c.approved(s, w)
	case kernel.ApprovalDenied:
		if !s.is(kernel.EvDecision) || !c.names(s, w) || s.ev.Verdict != kernel.VerdictDeny {
			c.violate(DecisionsBind, l.Agent, "call %s was denied by %s, which is no denial naming it", l.CallID, s.ev.Kind)
		}
	case kernel.ApprovalExpired:
		c.expired(s, w)
	case kernel.ApprovalWithdrawn:
		if a := c.m.agents[w.agent]; !slices.Contains(s.entered, w.agent) && !a.t.interrupted {
			c.violate(ApprovalEndsOnce, l.Agent, "call %s's wait was withdrawn by %s, which did not abort its turn", l.CallID, s.ev.Kind)
		}
	default:
		c.violate(ApprovalEndsOnce, l.Agent, "call %s's wait ended %s, which is no end", l.CallID, l.Approval)
	}
	c.resolvedReason(s, l)
}

// approved: a wait ends approved only in a decision's step (I29), by an
// approval naming its agent, call and digest or a grant made in that step
// that covers it (I27).
func (c *approvalChecker) approved(s *stepObs, w *waitObs) {
	if !s.is(kernel.EvDecision) {
		c.violate(EndsNeverAuthorize, w.agent, "call %s's wait ended approved by %s, which is no decision", w.call, s.ev.Kind)
		return
	}
	if c.names(s, w) && s.ev.Verdict >= kernel.VerdictApprove && s.ev.Verdict <= kernel.VerdictApproveTool && s.ev.Digest == kernel.Digest(w.args) {
		return
	}
	if !c.grantedNow(w) {
		c.violate(ApprovedBeforeStart, w.agent, "call %s was approved by a decision for agent %d's call %s (%s, digest %q), which neither names it with its digest %s nor grants a covering approval", w.call, s.ev.Agent, s.ev.CallID, s.ev.Verdict, s.ev.Digest, kernel.Digest(w.args))
	}
}

// grantedNow reports whether a grant made in this step covers w.
func (c *approvalChecker) grantedNow(w *waitObs) bool {
	for _, g := range c.m.ap.st.granted {
		if g.Name == w.tool && (g.Digest == "" || g.Text == w.args) {
			return true
		}
	}
	return false
}

// expired: a wait expires only when its expiry timer fires, exactly at its
// asking + approval_timeout, and only when that is before its turn
// deadline (I28); expiry is no approval (I29: the call must not start).
func (c *approvalChecker) expired(s *stepObs, w *waitObs) {
	due := w.asked + c.m.lim.ApprovalTimeout
	switch {
	case !s.timerSet || s.timer.kind != kernel.TimerApproval:
		c.violate(ApprovalEndsOnce, w.agent, "call %s's wait expired in a %s step, not by its expiry", w.call, s.ev.Kind)
	case c.m.now != due:
		c.violate(ApprovalEndsOnce, w.agent, "call %s's wait expired at %v; its expiry is at %v", w.call, c.m.now, due)
	case w.deadline > 0 && due >= w.deadline:
		c.violate(ApprovalEndsOnce, w.agent, "call %s's wait expired at %v, at or after its turn deadline %v, which withdraws it", w.call, due, w.deadline)
	}
}

// names reports whether the step's decision names w's agent and call.
func (c *approvalChecker) names(s *stepObs, w *waitObs) bool {
	return s.ev.Agent == w.agent && s.ev.CallID == w.call
}

// resolvedReason: approval_resolved gives the reason the call's result
// gives — none, approval_denied with the decision's note, approval_timeout,
// or the abort's reason, never a denial's (I31).
func (c *approvalChecker) resolvedReason(s *stepObs, l *kernel.Lifecycle) {
	want := kernel.ReasonNone
	switch l.Approval {
	case kernel.ApprovalDenied:
		want = kernel.ReasonApprovalDenied
		if s.is(kernel.EvDecision) && l.Text != s.ev.Text {
			c.violate(WithdrawalNotDenial, l.Agent, "call %s was denied with note %q; its approval_resolved says %q", l.CallID, s.ev.Text, l.Text)
		}
	case kernel.ApprovalExpired:
		want = kernel.ReasonApprovalTimeout
	case kernel.ApprovalWithdrawn:
		want = c.m.agents[l.Agent].t.abortReason
	}
	if l.Reason != want {
		c.violate(WithdrawalNotDenial, l.Agent, "call %s's wait ended %s with reason %q; want %q", l.CallID, l.Approval, l.Reason, want)
	}
}

// decision: a decision is applied exactly when it names a waiting call
// with that call's digest (a denial may give none), refused when it names
// no agent, no call that ever asked or other arguments, and stale — no
// refusal, no change — after the wait ended or its agent was freed; it
// changes no other wait but those a grant it makes covers (I30).
func (c *approvalChecker) decision(s *stepObs) {
	d, ev := &c.m.ap.st.dec, &s.ev
	ended := c.endsOf(d.w)
	switch {
	case !d.agentOK || !knownVerdict(ev.Verdict):
		c.refused(s, "it names no agent the tree gave, or no verdict")
	case d.freed || (d.w != nil && !d.open):
		c.stale(s)
	case d.w == nil:
		c.refused(s, "its agent's call "+ev.CallID+" never asked")
	case !digestFits(ev, d.w):
		c.refused(s, "its digest "+ev.Digest+" is not the digest of the call's arguments, "+kernel.Digest(d.w.args))
	case s.rejected:
		c.violate(DecisionsBind, ev.Agent, "a %s of call %s with its arguments' digest was refused while the call waited", ev.Verdict, ev.CallID)
	case ended != 1:
		c.violate(DecisionsBind, ev.Agent, "a %s of call %s, which waited, ended its wait %d time(s)", ev.Verdict, ev.CallID, ended)
	case (ev.Verdict == kernel.VerdictDeny) != (d.w.end == kernel.ApprovalDenied):
		c.violate(DecisionsBind, ev.Agent, "a %s of call %s ended its wait %s", ev.Verdict, ev.CallID, d.w.end)
	}
	c.othersUnchanged(s, d.w)
}

// othersUnchanged: a decision ends no wait but the one it names (w) and
// those a grant it makes covers, which it approves (I30).
func (c *approvalChecker) othersUnchanged(s *stepObs, w *waitObs) {
	for _, r := range c.m.ap.st.resolved {
		if r.w != nil && r.w != w && !(r.l.Approval == kernel.ApprovalApproved && c.grantedNow(r.w)) {
			c.violate(DecisionsBind, r.l.Agent, "a decision for agent %d's call %s ended call %s's wait %s", s.ev.Agent, s.ev.CallID, r.l.CallID, r.l.Approval)
		}
	}
}

func knownVerdict(v kernel.Verdict) bool {
	return v >= kernel.VerdictApprove && v <= kernel.VerdictDeny
}

// endsOf counts the step's resolutions of w.
func (c *approvalChecker) endsOf(w *waitObs) int {
	n := 0
	for _, r := range c.m.ap.st.resolved {
		if w != nil && r.w == w {
			n++
		}
	}
	return n
}

// digestFits reports whether a decision's digest binds it to w's
// arguments: an approval names their digest, a denial names it or none.
func digestFits(ev *kernel.Event, w *waitObs) bool {
	if ev.Verdict == kernel.VerdictDeny && ev.Digest == "" {
		return true
	}
	return ev.Digest == kernel.Digest(w.args)
}

// refused: the step's decision must have been refused, changing no wait.
func (c *approvalChecker) refused(s *stepObs, why string) {
	if !s.rejected {
		c.violate(DecisionsBind, s.ev.Agent, "a %s of call %s was taken, but the spec refuses it: %s", s.ev.Verdict, s.ev.CallID, why)
	}
}

// stale: a decision after its wait ended (or for a freed agent) is no
// refusal, and its one stale record names its agent and call.
func (c *approvalChecker) stale(s *stepObs) {
	if s.rejected {
		c.violate(DecisionsBind, s.ev.Agent, "a %s of call %s, whose wait had ended, was refused; it is stale", s.ev.Verdict, s.ev.CallID)
		return
	}
	for i := range s.effs {
		if l := &s.effs[i].Life; s.effs[i].Kind == kernel.EffEmit && l.Kind == kernel.LifeStale && (l.Agent != s.ev.Agent || l.CallID != s.ev.CallID) {
			c.violate(DecisionsBind, s.ev.Agent, "the stale record of a decision for call %s names agent %d's call %q", s.ev.CallID, l.Agent, l.CallID)
		}
	}
}

// started: a call of a tool that asks starts only once its wait ended
// approved (I27), never after it ended otherwise (I29); one that never
// asked only under a session grant that covers it (I27).
func (c *approvalChecker) started(e *kernel.Effect) {
	p := &c.m.ap
	if !p.asks(e.Call.Name, c.m.delegateTool) {
		return
	}
	w := p.waits[callKey{e.Agent, e.Call.ID}]
	switch {
	case w == nil:
		if !p.covered(e.Call.Name, e.Call.Arguments) {
			c.violate(ApprovedBeforeStart, e.Agent, "call %s of %s started without asking for approval, and no session grant covers it", e.Call.ID, e.Call.Name)
		}
	case w.end == kernel.ApprovalNone:
		c.violate(ApprovedBeforeStart, e.Agent, "call %s of %s started while it waits for approval", e.Call.ID, e.Call.Name)
	case w.end != kernel.ApprovalApproved:
		c.violate(EndsNeverAuthorize, e.Agent, "call %s of %s started after its wait ended %s", e.Call.ID, e.Call.Name, w.end)
	case w.args != e.Call.Arguments:
		c.violate(ApprovedBeforeStart, e.Agent, "call %s of %s started with %s; the approval was for %s", e.Call.ID, e.Call.Name, e.Call.Arguments, w.args)
	}
}

// result: the result of a call whose wait ended otherwise than approved
// is its end's: denied, expired, or its abort's — never a denial's for a
// withdrawal (I31).
func (c *approvalChecker) result(l *kernel.Lifecycle) {
	w := c.m.ap.waits[callKey{l.Agent, l.CallID}]
	if w == nil {
		if l.Status == kernel.CallDenied || l.Status == kernel.CallExpired {
			c.violate(WithdrawalNotDenial, l.Agent, "call %s ended %s, but it never asked for approval", l.CallID, l.Status)
		}
		return
	}
	var ok bool
	switch w.end {
	case kernel.ApprovalNone, kernel.ApprovalApproved:
		ok = l.Status != kernel.CallDenied && l.Status != kernel.CallExpired
	case kernel.ApprovalDenied:
		ok = l.Status == kernel.CallDenied
	case kernel.ApprovalExpired:
		ok = l.Status == kernel.CallExpired
	case kernel.ApprovalWithdrawn:
		ok = (l.Status == kernel.CallCancelled || l.Status == kernel.CallTimedOut) && l.Reason == w.reason
	}
	if !ok {
		c.violate(WithdrawalNotDenial, l.Agent, "call %s, whose wait ended %s (%s), ended %s with reason %q", l.CallID, w.end, w.reason, l.Status, l.Reason)
	}
}

// content: the tool message of a call whose wait ended otherwise than
// approved says so as docs/semantics.md ("Approvals") writes it: a
// denial's note, expired, or the abort's result marked withdrawn (I31).
func (c *approvalChecker) content(o *msgObs) {
	r := &o.f.content
	w := c.m.ap.waits[callKey{o.a.id, o.m.ToolCallID}]
	end := kernel.ApprovalNone
	if w != nil {
		end = w.end
	}
	var why string
	switch {
	case (end == kernel.ApprovalWithdrawn) != (r.Approval == kernel.ApprovalWithdrawn.String()):
		why = "marked approval " + quoted(r.Approval) + " for a wait that ended " + end.String()
	case end == kernel.ApprovalWithdrawn && r.Type != "tool_aborted":
		why = "a withdrawn call's result is of type " + r.Type
	case end == kernel.ApprovalDenied && r.Note != w.note:
		why = "its note is " + quoted(r.Note) + ", the denial's " + quoted(w.note)
	case (end == kernel.ApprovalDenied || end == kernel.ApprovalExpired) != (r.Type == "tool_not_approved"):
		why = "of type " + r.Type + " for a wait that ended " + end.String()
	}
	if why != "" {
		c.violate(WithdrawalNotDenial, o.a.id, "the result of call %s is %s: %.120q", o.m.ToolCallID, why, o.m.Content)
	}
}

func quoted(s string) string {
	if s == "" {
		return "none"
	}
	return `"` + s + `"`
}
