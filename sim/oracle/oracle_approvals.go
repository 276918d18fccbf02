package oracle

import (
	"slices"
	"time"

	"github.com/escapement/escapement/kernel"
)

// The model's part for approvals (docs/semantics.md, "Approvals"): which
// tools ask, every wait a request opened and how it ended, the session's
// grants, and what a decision found before the core stepped it. Like the
// rest of the model it judges nothing; check_approvals.go does.

// approvalModel is what the model observed of approvals.
type approvalModel struct {
	// on: the configuration asks about some tool (else nothing here runs).
	on      bool
	all     bool
	ask     []string
	waits   map[callKey]*waitObs
	open    int          // waits not ended
	grantsT []string     // tools granted with any arguments
	grantsA [][2]string  // (tool, args) granted
	order   []*waitObs   // every wait, in asking order
	st      approvalStep // this step's facts
}

// waitObs is one call's wait for a decision.
type waitObs struct {
	agent    kernel.AgentID
	call     string
	tool     string
	args     string
	digest   string // as the request said
	asked    time.Duration
	deadline time.Duration // its agent's turn deadline when it asked
	delay    time.Duration // as the request said
	asks     int           // requests for it (a recovery asks again)
	end      kernel.ApprovalEnd
	reason   kernel.Reason
	note     string
	endStep  uint32
	endedAt  time.Duration
	resolved int // resolutions recorded
}

// approvalStep is what one step did to approvals.
type approvalStep struct {
	// dec is what the step's decision found before the core stepped it.
	dec decisionObs
	// requested, resolved and granted are the step's records, in order.
	requested []approvalRec
	resolved  []approvalRec
	granted   []kernel.Lifecycle
}

// approvalRec is one request or resolution record and the wait it names
// (wasOpen: the wait was open before the record; fresh: a request that
// opened a new wait).
type approvalRec struct {
	l       kernel.Lifecycle
	w       *waitObs
	wasOpen bool
	fresh   bool
}

// decisionObs is a decision as read before the step.
type decisionObs struct {
	is bool
	// agentOK: the agent is one the tree gave; freed: the core no longer
	// holds it; w: the wait of the call it names (nil: it never asked);
	// open: that wait had not ended.
	agentOK bool
	freed   bool
	w       *waitObs
	open    bool
}

func newApprovalModel(ask []string) approvalModel {
	return approvalModel{on: len(ask) > 0, all: slices.Contains(ask, "*"), ask: ask} // waits: made by the first request
}

// asks reports whether calls of tool need approval (before grants).
func (p *approvalModel) asks(tool, delegate string) bool {
	return tool != delegate && (p.all || slices.Contains(p.ask, tool))
}

// covered reports whether a session grant covers a call of tool with args.
func (p *approvalModel) covered(tool, args string) bool {
	return slices.Contains(p.grantsT, tool) || slices.Contains(p.grantsA, [2]string{tool, args})
}

// pending reports whether agent's call id waits for a decision.
func (p *approvalModel) pending(agent kernel.AgentID, id string) bool {
	if !p.on || p.open == 0 {
		return false
	}
	w := p.waits[callKey{agent, id}]
	return w != nil && w.end == kernel.ApprovalNone
}

// beginDecision reads a decision before the core steps it: what it
// names, and — a decision for a wait that ended, or an agent the tree
// freed — that it is stale (docs/semantics.md, "Approvals", Binding).
func (m *model) beginDecision(ev *kernel.Event) {
	s := &m.s
	s.input = true
	d := &m.ap.st.dec
	*d = decisionObs{is: true}
	a := m.agent(ev.Agent)
	d.agentOK = ev.Agent >= 0 && int(ev.Agent) < m.c.NumAgents()
	d.freed = a != nil && a.freed
	d.w = m.ap.waits[callKey{ev.Agent, ev.CallID}]
	d.open = d.w != nil && d.w.end == kernel.ApprovalNone
	switch {
	case !d.agentOK || ev.Verdict == kernel.VerdictNone || ev.Verdict > kernel.VerdictDeny:
	case d.freed:
		s.stale, s.staleWhy = staleDecision, "decision for a call of a freed agent"
	case d.w != nil && !d.open:
		s.stale, s.staleWhy = staleDecision, "decision for a wait that ended ("+d.w.end.String()+")"
	}
}

// approvalLife reads an approval record.
func (m *model) approvalLife(l *kernel.Lifecycle, n *note) {
	p := &m.ap
	k := callKey{l.Agent, l.CallID}
	w := p.waits[k]
	switch l.Kind {
	case kernel.LifeApprovalRequested:
		r := approvalRec{l: *l, w: w, wasOpen: w != nil && w.end == kernel.ApprovalNone}
		if w == nil {
			a := m.agents[l.Agent]
			w = &waitObs{agent: l.Agent, call: l.CallID, tool: l.Name, args: l.Text, digest: l.Digest,
				asked: m.now, deadline: a.deadline, delay: l.Delay}
			if p.waits == nil {
				p.waits = map[callKey]*waitObs{}
			}
			p.waits[k] = w
			p.order = append(p.order, w)
			p.open++
			r.w, r.fresh = w, true
		}
		w.asks++
		n.bad = !r.fresh && !r.wasOpen
		p.st.requested = append(p.st.requested, r)
	case kernel.LifeApprovalResolved:
		r := approvalRec{l: *l, w: w, wasOpen: w != nil && w.end == kernel.ApprovalNone}
		if w != nil {
			w.resolved++
			if r.wasOpen {
				p.open--
				w.end, w.reason, w.note, w.endStep, w.endedAt = l.Approval, l.Reason, l.Text, m.s.n, m.now
			}
		}
		p.st.resolved = append(p.st.resolved, r)
	case kernel.LifeApprovalGranted:
		if l.Digest == "" {
			p.grantsT = append(p.grantsT, l.Name)
		} else {
			p.grantsA = append(p.grantsA, [2]string{l.Name, l.Text})
		}
		p.st.granted = append(p.st.granted, *l)
	}
}

// resetStep forgets the last step's approval facts.
func (p *approvalModel) resetStep() {
	p.st.dec = decisionObs{}
	p.st.requested, p.st.resolved, p.st.granted = p.st.requested[:0], p.st.resolved[:0], p.st.granted[:0]
}

// notApprovedJustified reports whether a call's result denied or expired
// (docs/semantics.md, "Results") is what its wait's end says: denied by a
// decision (approval_denied), expired by its timeout (approval_timeout).
func (p *approvalModel) notApprovedJustified(l *kernel.Lifecycle) bool {
	w := p.waits[callKey{l.Agent, l.CallID}]
	if w == nil {
		return false
	}
	switch l.Status {
	case kernel.CallDenied:
		return w.end == kernel.ApprovalDenied && l.Reason == kernel.ReasonApprovalDenied
	case kernel.CallExpired:
		return w.end == kernel.ApprovalExpired && l.Reason == kernel.ReasonApprovalTimeout
	}
	return false
}

// approvedNow reports whether agent's call id ended its wait approved in
// step n.
func (p *approvalModel) approvedNow(agent kernel.AgentID, id string, n uint32) bool {
	if !p.on {
		return false
	}
	w := p.waits[callKey{agent, id}]
	return w != nil && w.end == kernel.ApprovalApproved && w.endStep == n
}

// approvals counts the approval probes a step reached.
func (p *probeSet) approvals(m *model) {
	s, st := &m.s, &m.ap.st
	for _, r := range st.resolved {
		switch r.l.Approval {
		case kernel.ApprovalApproved:
			p.hit(ProbeApprovalApproved)
		case kernel.ApprovalDenied:
			p.hit(ProbeApprovalDenied)
		case kernel.ApprovalExpired:
			p.hit(ProbeApprovalExpired)
		case kernel.ApprovalWithdrawn:
			p.hit(ProbeApprovalWithdrawn)
		}
	}
	if len(st.granted) > 0 {
		p.hit(ProbeApprovalGranted)
	}
	switch {
	case s.stale == staleDecision:
		p.hit(ProbeDecisionStale)
	case s.is(kernel.EvDecision) && s.rejected:
		p.hit(ProbeDecisionRefused)
	}
}
