package kernel

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/escapement/escapement/fsm"
)

// A tool call that needs a person's decision waits for it before it starts
// (docs/semantics.md, "Approvals"). Which calls ask is a pure function of
// Config.Ask and of the grants earlier decisions made, so a replay asks
// exactly the calls the run asked. The wait is part of Tooling (or
// Delegating), like a wait for a slot: the machine gains no state.

// approvalPolicy is which calls ask: Config.Ask, less what the session's
// grants cover. The grants are kept sorted, so a state encodes them in one
// order whatever order they were made in.
type approvalPolicy struct {
	all        bool
	tools      map[string]bool
	grantTools []string
	grantArgs  []grantedArgs
}

// grantedArgs is one "approve for this session, only these arguments".
type grantedArgs struct{ tool, args string }

func compareGrants(x, y grantedArgs) int {
	return cmp.Or(cmp.Compare(x.tool, y.tool), cmp.Compare(x.args, y.args))
}

func newApprovalPolicy(ask []string, grants []Grant) approvalPolicy {
	var p approvalPolicy
	for _, g := range grants {
		p.grant(ToolCall{Name: g.Tool, Arguments: g.Args}, g.Exact)
	}
	for _, name := range ask {
		if name == "*" {
			p.all = true
			continue
		}
		if p.tools == nil {
			p.tools = make(map[string]bool, len(ask))
		}
		p.tools[name] = true
	}
	return p
}

// validateAsk checks Config.Ask: names, or "*"; never the delegate tool,
// which runs nothing in the world and never asks.
func validateAsk(ask []string, delegate string) error {
	if delegate == "" {
		delegate = DefaultDelegateTool
	}
	for i, name := range ask {
		switch name {
		case "":
			return fmt.Errorf("ask: entry %d is empty (name a tool, or * for every tool)", i+1)
		case delegate:
			return fmt.Errorf("ask: %s is the delegate tool, which never asks for approval (its child's tool calls do)", name)
		}
	}
	return nil
}

// validateGrants checks Config.Grants: each names a tool, never the
// delegate tool (which never asks), and only an exact grant has arguments.
func validateGrants(grants []Grant, delegate string) error {
	if delegate == "" {
		delegate = DefaultDelegateTool
	}
	for i, g := range grants {
		switch {
		case g.Tool == "":
			return fmt.Errorf("grants: entry %d names no tool", i+1)
		case g.Tool == delegate:
			return fmt.Errorf("grants: %s is the delegate tool, which never asks for approval", g.Tool)
		case g.Args != "" && !g.Exact:
			return fmt.Errorf("grants: entry %d (%s) has arguments but is not exact (a grant for any arguments has none)", i+1, g.Tool)
		}
	}
	return nil
}

// covers reports whether a session grant covers call c.
func (p *approvalPolicy) covers(c ToolCall) bool {
	if _, ok := slices.BinarySearch(p.grantTools, c.Name); ok {
		return true
	}
	_, ok := slices.BinarySearchFunc(p.grantArgs, grantedArgs{c.Name, c.Arguments}, compareGrants)
	return ok
}

// grant records a session grant for the tool of call c: any arguments, or
// (args) only c's.
func (p *approvalPolicy) grant(c ToolCall, args bool) {
	if args {
		g := grantedArgs{c.Name, c.Arguments}
		if i, found := slices.BinarySearchFunc(p.grantArgs, g, compareGrants); !found {
			p.grantArgs = slices.Insert(p.grantArgs, i, g)
		}
		return
	}
	if i, found := slices.BinarySearch(p.grantTools, c.Name); !found {
		p.grantTools = slices.Insert(p.grantTools, i, c.Name)
	}
}

// asks reports whether call c must wait for a decision before it starts.
func (k *Kernel) asks(c ToolCall) bool {
	p := &k.approvals
	if c.Name == k.cfg.DelegateTool || (!p.all && !p.tools[c.Name]) {
		return false
	}
	return !p.covers(c)
}

// approvalBook is one agent's record of its approval waits: the calls of
// its last message waiting for a decision, in call order, and how every
// earlier wait ended (so a late decision is told stale, not refused). It
// grows with the calls that asked, which the history holds anyway.
type approvalBook struct {
	waiting []approvalWait
	ended   []endedWait
}

// approvalWait is one call waiting for a decision.
type approvalWait struct {
	call    int32 // its index in the agent's open calls
	digest  string
	askedAt time.Duration
	timer   OpID // its expiry timer; 0 when the turn deadline comes first
}

// endedWait is how the wait of call callID ended.
type endedWait struct {
	callID string
	end    ApprovalEnd
}

// waitOf is the index in b.waiting of call i's wait, or -1.
func (b *approvalBook) waitOf(i int) int {
	return slices.IndexFunc(b.waiting, func(w approvalWait) bool { return int(w.call) == i })
}

// endOf is how the wait of call id ended, if it asked and its wait ended.
func (b *approvalBook) endOf(id string) (ApprovalEnd, bool) {
	for i := len(b.ended) - 1; i >= 0; i-- {
		if b.ended[i].callID == id {
			return b.ended[i].end, true
		}
	}
	return ApprovalNone, false
}

// askApproval makes call i of a's last message wait for a decision, with an
// expiry timer when approval_timeout ends the wait before the turn deadline
// does (the clamp of docs/semantics.md, "Approvals": a wait never outlives
// its turn, and gets no timer that its turn deadline would only race).
func (k *Kernel) askApproval(a *agent, i int) {
	w := approvalWait{call: int32(i), digest: Digest(a.open[i].call.Arguments), askedAt: k.now}
	if k.cfg.ApprovalTimeout < a.deadline-k.now {
		w.timer = k.setTimer(a, TimerApproval, k.now+k.cfg.ApprovalTimeout, 0)
	}
	a.approval.waiting = append(a.approval.waiting, w)
	k.emitRequested(a, w)
}

// emitRequested announces a wait: when asked, and again by a recovery.
func (k *Kernel) emitRequested(a *agent, w approvalWait) {
	c := a.open[w.call].call
	k.emit(Lifecycle{Kind: LifeApprovalRequested, Agent: a.id, CallID: c.ID, Name: c.Name, Text: c.Arguments, Digest: w.digest, Delay: k.waitEnd(a, w) - k.now})
}

// waitEnd is when w ends by itself: its expiry, or the turn deadline.
func (k *Kernel) waitEnd(a *agent, w approvalWait) time.Duration {
	if w.timer != 0 {
		return k.ops[w.timer].at
	}
	return a.deadline
}

// endWait ends wait j of a with end, recording it, and returns its call.
func (k *Kernel) endWait(a *agent, j int, end ApprovalEnd, reason Reason, note string) int {
	w := a.approval.waiting[j]
	a.approval.waiting = slices.Delete(a.approval.waiting, j, j+1)
	k.stopTimer(w.timer)
	c := a.open[w.call].call
	a.approval.ended = append(a.approval.ended, endedWait{callID: c.ID, end: end})
	k.emit(Lifecycle{Kind: LifeApprovalResolved, Agent: a.id, CallID: c.ID, Name: c.Name, Approval: end, Reason: reason, Text: note, Since: w.askedAt, Digest: w.digest})
	return int(w.call)
}

// onDecision applies a decision to the call it names, while that call
// waits and only for the digest of its arguments (docs/semantics.md,
// "Approvals": Binding). A decision for a wait that has ended, or for a
// call of a child the tree has freed, is stale; a malformed one, one for a
// call that never asked, or one for other arguments is refused, and the
// call (if it waits) still waits.
func (k *Kernel) onDecision(ev Event) {
	a := k.agentAt(ev.Agent)
	freed := k.freedAgent(ev.Agent)
	switch {
	case a == nil && !freed:
		k.reject(NoAgent, fmt.Errorf("decision: agent %d: %w", ev.Agent, ErrUnknownAgent))
		return
	case ev.CallID == "":
		k.reject(ev.Agent, fmt.Errorf("decision: it names no call: %w", ErrNotWaiting))
		return
	case ev.Verdict == VerdictNone || int(ev.Verdict) >= len(verdictNames):
		k.reject(ev.Agent, errors.New("decision: "+ev.Verdict.String()+" is no verdict (approve, approve_args, approve_tool or deny)"))
		return
	case freed:
		// Its only turn ended, and every wait with it; what it asked went
		// with the rest of it (docs/semantics.md, "Finished agents").
		k.emit(Lifecycle{Kind: LifeStale, Agent: ev.Agent, CallID: ev.CallID, Text: "decision for call " + ev.CallID + ": its agent has finished (freed)"})
		return
	}
	j := slices.IndexFunc(a.approval.waiting, func(w approvalWait) bool { return a.open[w.call].call.ID == ev.CallID })
	if j < 0 {
		if end, ok := a.approval.endOf(ev.CallID); ok {
			k.emit(Lifecycle{Kind: LifeStale, Agent: a.id, CallID: ev.CallID, Text: "decision for call " + ev.CallID + ": its wait ended (" + end.String() + ")"})
			return
		}
		k.reject(a.id, fmt.Errorf("decision: call %s of %s: %w", ev.CallID, a.path, ErrNotWaiting))
		return
	}
	w := a.approval.waiting[j]
	if ev.Digest != w.digest && (ev.Verdict.approves() || ev.Digest != "") {
		k.reject(a.id, fmt.Errorf("decision: call %s of %s: digest %q, the arguments' is %s: %w", ev.CallID, a.path, ev.Digest, w.digest, ErrDigestMismatch))
		return
	}
	if ev.Verdict == VerdictDeny {
		k.refuseWait(a, j, ApprovalDenied, ev.Text)
		return
	}
	c := a.open[w.call].call
	k.approveWait(a, j, "")
	if ev.Verdict == VerdictApproveArgs || ev.Verdict == VerdictApproveTool {
		byArgs := ev.Verdict == VerdictApproveArgs
		k.approvals.grant(c, byArgs)
		l := Lifecycle{Kind: LifeApprovalGranted, Agent: a.id, CallID: c.ID, Name: c.Name}
		if byArgs {
			l.Text, l.Digest = c.Arguments, w.digest
		}
		k.emit(l)
		k.approveCovered()
	}
}

// approveWait ends wait j of a approved: its call starts when a slot is
// free, else it waits for one in call order. (With a slot free no call
// waits for one: every step that frees a slot starts the waiting calls.)
func (k *Kernel) approveWait(a *agent, j int, note string) {
	i := k.endWait(a, j, ApprovalApproved, ReasonNone, note)
	if a.runningTools < k.cfg.MaxParallelTools {
		k.startTool(a, i)
		return
	}
	a.open[i].waiting = true
	a.nextWaiting = min(a.nextWaiting, i)
}

// refuseWait ends wait j of a denied or expired: the call gets its result
// and never runs; the agent goes on when it was the last call.
func (k *Kernel) refuseWait(a *agent, j int, end ApprovalEnd, note string) {
	status, reason := CallDenied, ReasonApprovalDenied
	if end == ApprovalExpired {
		status, reason = CallExpired, ReasonApprovalTimeout
	}
	i := k.endWait(a, j, end, reason, note)
	k.closeCall(a, i, fsm.ToolResult, status, reason, notApprovedContent(status, reason, note), NoAgent, OutcomeNone, true)
	if a.pending == 0 {
		k.resume(a)
	}
}

// approveCovered approves every waiting call a session grant now covers,
// in agent order and call order.
func (k *Kernel) approveCovered() {
	for _, a := range k.agents {
		if a == nil {
			continue // freed: it finished, so none of its calls waits
		}
		for j := 0; j < len(a.approval.waiting); {
			if k.approvals.covers(a.open[a.approval.waiting[j].call].call) {
				k.approveWait(a, j, "covered by a session grant")
				continue // wait j is gone: the next one moved into its place
			}
			j++
		}
	}
}

// onApprovalTimer: a wait's approval_timeout passed without a decision.
// The timer op is already gone (onTimer).
func (k *Kernel) onApprovalTimer(a *agent, timer OpID) {
	j := slices.IndexFunc(a.approval.waiting, func(w approvalWait) bool { return w.timer == timer })
	if j < 0 {
		panic(fmt.Sprintf("kernel: approval timer %d of %s names no wait", timer, a.path))
	}
	a.approval.waiting[j].timer = 0
	k.refuseWait(a, j, ApprovalExpired, "")
}

// withdrawApproval ends call i's wait, if it waits, as withdrawn by its
// agent's abort (closeAborted writes the abort's result for it); it
// reports whether the call waited.
func (k *Kernel) withdrawApproval(a *agent, i int) bool {
	j := a.approval.waitOf(i)
	if j < 0 {
		return false
	}
	k.endWait(a, j, ApprovalWithdrawn, a.abort, "")
	return true
}

// waitingApprovals counts the calls waiting for a decision in the tree.
func (k *Kernel) waitingApprovals() int {
	n := 0
	for _, a := range k.agents {
		if a == nil {
			continue // freed: it finished, so none of its calls waits
		}
		n += len(a.approval.waiting)
	}
	return n
}

// askAgain announces every wait again after a crash (docs/semantics.md,
// "Recovery"): the old process's host may have shown the request to
// nobody, and nothing decides it but a decision. Its expiry timer is armed
// again with the other timers.
func (k *Kernel) askAgain() {
	for _, a := range k.agents {
		if a == nil {
			continue // freed: it finished, so none of its calls waits
		}
		for _, w := range a.approval.waiting {
			k.emitRequested(a, w)
		}
	}
}

// Approvals appends the calls waiting for a decision to dst, by agent id
// and then call order.
func (k *Kernel) Approvals(dst []Approval) []Approval {
	for _, a := range k.agents {
		if a == nil {
			continue // freed: it finished, so none of its calls waits
		}
		for _, w := range a.approval.waiting {
			c := a.open[w.call].call
			dst = append(dst, Approval{Agent: a.id, CallID: c.ID, Tool: c.Name, Args: c.Arguments, Digest: w.digest,
				AskedAt: w.askedAt, EndsAt: k.waitEnd(a, w), Expires: w.timer != 0})
		}
	}
	return dst
}

// Grants appends the session's grants to dst — those Config.Grants seeded
// and those decisions made since — tools granted with any arguments first
// (by name), then exact grants (by tool, then arguments). A host that
// keeps a session across processes records them (LifeApprovalGranted,
// GrantOf) and seeds the next kernel with them (docs/durable.md,
// "Approvals across a crash").
func (k *Kernel) Grants(dst []Grant) []Grant {
	for _, t := range k.approvals.grantTools {
		dst = append(dst, Grant{Tool: t})
	}
	for _, g := range k.approvals.grantArgs {
		dst = append(dst, Grant{Tool: g.tool, Args: g.args, Exact: true})
	}
	return dst
}

// approvalsText is the recovered record's phrase for n waits asked again.
func approvalsText(n int) string { return strconv.Itoa(n) + " approval request(s) asked again" }

// encode appends an agent's approval book to a state (AppendState).
func (b *approvalBook) encode(e *stateEnc) {
	e.uint(uint64(len(b.waiting)))
	for _, w := range b.waiting {
		e.int(int64(w.call))
		e.str(w.digest)
		e.dur(w.askedAt)
		e.op(w.timer)
	}
	e.uint(uint64(len(b.ended)))
	for _, x := range b.ended {
		e.call(x.callID)
		e.uint(uint64(x.end))
	}
}

// encode appends the session's grants to a state (AppendState). Config.Ask
// is configuration, the same in every state of one kernel.
func (p *approvalPolicy) encode(e *stateEnc) {
	e.uint(uint64(len(p.grantTools)))
	for _, t := range p.grantTools {
		e.str(t)
	}
	e.uint(uint64(len(p.grantArgs)))
	for _, g := range p.grantArgs {
		e.str(g.tool)
		e.str(g.args)
	}
}
