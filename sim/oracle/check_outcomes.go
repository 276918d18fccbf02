package oracle

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/escapement/escapement/kernel"
)

// outcomeChecker holds I13 (F6, F13, F14): every turn ends exactly once and
// every call gets exactly one result, each typed with a reason the run
// justifies — a user cancel only where the user cancelled, a timeout only
// where its deadline fired, a refusal only where its limit was reached, a
// delegation's result only the child's real outcome — and the tool message
// the model reads says what the lifecycle event the UI reads says. An
// aborted turn leaves exactly one marker.
type outcomeChecker struct{ judge }

func (c *outcomeChecker) step(s *stepObs) {
	for i := range s.effs {
		if e := &s.effs[i]; e.Kind == kernel.EffEmit {
			c.record(&e.Life, &s.notes[i])
		}
	}
	for i := range s.turnEnds {
		c.turnEnd(&s.turnEnds[i])
	}
	for i := range s.callFins {
		c.callResult(&s.callFins[i])
	}
	for i := range s.msgs {
		if o := &s.msgs[i]; o.m.Role == kernel.RoleTool {
			c.toolContent(o)
		}
	}
	// After the step's histories were read: an aborted turn left exactly
	// one marker, the transcript's record of its typed outcome (F6).
	for i := range s.turnEnds {
		c.oneMarker(&s.turnEnds[i])
	}
}

// record judges a lifecycle record of the step: a turn started twice, a
// timeout whose reason is no timeout's.
func (c *outcomeChecker) record(l *kernel.Lifecycle, n *note) {
	switch l.Kind {
	case kernel.LifeTurnStarted:
		if n.bad {
			c.violate(TypedOutcomes, l.Agent, "turn %d started again", l.Turn)
		}
	case kernel.LifeTimedOut:
		if !l.Reason.IsTimeout() {
			c.violate(TypedOutcomes, l.Agent, "timeout with non-timeout reason %q", l.Reason)
		}
	}
}

// oneMarker: a turn that did not complete left exactly one marker.
func (c *outcomeChecker) oneMarker(e *turnEndObs) {
	if e.second || e.l.Outcome == kernel.OutcomeCompleted {
		return
	}
	if a := e.a; a.markerTurn != e.l.Turn || a.markers != 1 {
		n := 0
		if a.markerTurn == e.l.Turn {
			n = a.markers
		}
		c.violate(TypedOutcomes, a.id, "turn %d ended %s but left %d marker(s) in its history, want 1", e.l.Turn, e.l.Outcome, n)
	}
}

// turnEnd judges a turn_ended event by the facts of its turn.
func (c *outcomeChecker) turnEnd(e *turnEndObs) {
	l := e.l
	if e.second {
		c.violate(TypedOutcomes, l.Agent, "turn %d has a second terminal outcome (%s)", l.Turn, l.Outcome)
		return
	}
	for _, owed := range e.owed {
		// The parent's call was closed when an abort cut it; the child
		// settled only now. What the parent's model was told must be how
		// the child's turn really ended (F13).
		c.childOutcome(&owed.l, e.a, e.a.end)
	}
	if kernel.OutcomeOf(l.Reason) != l.Outcome {
		c.violate(TypedOutcomes, l.Agent, "outcome %s with reason %q", l.Outcome, l.Reason)
	}
	if !c.endJustified(e) {
		c.violate(TypedOutcomes, l.Agent, "turn %d ended %s with reason %q, which nothing in the run justifies", l.Turn, l.Outcome, l.Reason)
	}
}

// endJustified reports whether the facts of a turn justify the reason it
// ended with.
func (c *outcomeChecker) endJustified(e *turnEndObs) bool {
	l, f := e.l, &e.facts
	switch l.Reason {
	case kernel.ReasonNone:
		op := c.m.ops.get(f.lastReq)
		return op != nil && op.endedOK
	case kernel.ReasonUserCancel:
		return f.userCancelled
	case kernel.ReasonParentCancelled:
		return f.parentAborted
	case kernel.ReasonFirstTokenTimeout, kernel.ReasonStallTimeout, kernel.ReasonTurnTimeout:
		return f.timedOut == l.Reason
	case kernel.ReasonShutdown:
		// The shutdown aborts the root's turn; a working descendant is
		// aborted with it, reason parent_cancelled (docs/semantics.md,
		// "Outcomes and reasons").
		return c.m.shutdown && l.Agent == kernel.Root
	case kernel.ReasonLLMError:
		return f.llmFailed
	case kernel.ReasonBudget:
		return f.requests >= c.m.maxRequests(e.a)
	case kernel.ReasonOutputLimit:
		op := c.m.ops.get(f.lastReq)
		return op != nil && op.overCapped
	}
	return false
}

// childOutcome compares a delegation's result with how the child's turn
// ended.
func (c *outcomeChecker) childOutcome(l *kernel.Lifecycle, child *agentObs, end turnEnd) {
	if l.Outcome != end.outcome || l.Reason != end.reason {
		c.violate(TypedOutcomes, l.Agent, "call %s told the parent its child ended %s (%q), but %s ended %s (%q)",
			l.CallID, l.Outcome, l.Reason, child.path, end.outcome, end.reason)
	}
}

// callResult judges a call_finished event against what the run shows.
func (c *outcomeChecker) callResult(r *callFinObs) {
	l := r.l
	if r.f.n > 1 {
		c.violate(TypedOutcomes, l.Agent, "call %s has %d terminal results", l.CallID, r.f.n)
		return
	}
	if l.Status == kernel.CallChild {
		c.childResult(r)
		return
	}
	if !c.justified(r) {
		c.violate(TypedOutcomes, l.Agent, "call %s ended %s with reason %q, which nothing in the run justifies", l.CallID, l.Status, l.Reason)
	}
}

// childResult judges a delegation's result: its child, spawned for the
// call, and the outcome the child's turn ended with.
func (c *outcomeChecker) childResult(r *callFinObs) {
	l := r.l
	if child, spawned := r.a.delegated[l.CallID]; !spawned || child != l.Child {
		c.violate(TypedOutcomes, l.Agent, "call %s reports the result of agent %d, which was not spawned for it", l.CallID, l.Child)
		return
	}
	if kernel.OutcomeOf(l.Reason) != l.Outcome {
		c.violate(TypedOutcomes, l.Agent, "call %s: child outcome %s with reason %q", l.CallID, l.Outcome, l.Reason)
		return
	}
	if r.childEnded {
		c.childOutcome(l, r.child, r.childEnd)
	}
}

// justified reports whether the run justifies a tool call's result: its
// status and reason are what happened to the call, its op and its turn.
func (c *outcomeChecker) justified(r *callFinObs) bool {
	l, f, op := r.l, &r.facts, r.op
	switch l.Status {
	case kernel.CallCancelled:
		return abortedBy(f, l.Reason) && !l.Reason.IsTimeout()
	case kernel.CallTimedOut:
		if l.Reason == kernel.ReasonToolTimeout {
			return op != nil && op.timedOut
		}
		return abortedBy(f, l.Reason) && l.Reason.IsTimeout()
	case kernel.CallOK:
		return l.Reason == kernel.ReasonNone && answered(op, true)
	case kernel.CallError:
		return l.Reason == kernel.ReasonToolError && answered(op, false)
	case kernel.CallRefused:
		return c.refusalJustified(r)
	case kernel.CallMalformed:
		return l.Reason == kernel.ReasonMalformed && c.m.malformedCall(r.a, c.m.ops.get(f.lastReq), callIndex(r.a, l.CallID))
	case kernel.CallLost:
		return c.lostJustified(r)
	}
	return false
}

// abortedBy reports a turn aborted for reason.
func abortedBy(f *turnFacts, reason kernel.Reason) bool {
	return f.interrupted && reason == f.abortReason
}

// answered reports a tool op that ended by its own answer, uncancelled,
// successful or not as ok says.
func answered(op *opObs, ok bool) bool {
	return op != nil && op.tool && op.terminal && op.cancels == 0 && (op.result == kernel.ToolOK) == ok
}

// lostJustified: a crash lost the tool, and it is not safe to run again.
func (c *outcomeChecker) lostJustified(r *callFinObs) bool {
	op := r.op
	return r.l.Reason == kernel.ReasonCrash && op != nil && op.tool && op.end == kernel.OpLost && !slices.Contains(c.m.idempotent, r.l.Name)
}

// refusalJustified: the limit a refusal names is really reached, as the
// model counts it.
func (c *outcomeChecker) refusalJustified(r *callFinObs) bool {
	l, a, f := r.l, r.a, &r.facts
	switch l.Reason {
	case kernel.ReasonMaxDepth:
		return a.depth+1 > a.depthCap
	case kernel.ReasonMaxChildren:
		return f.spawned >= c.m.maxChildren(a)
	case kernel.ReasonNotInProfile:
		return c.m.outsideProfile(a, c.m.ops.get(f.lastReq), callIndex(a, l.CallID))
	case kernel.ReasonMaxAgents:
		return c.m.held() >= c.m.maxAgents
	case kernel.ReasonMaxCalls:
		return callIndex(a, l.CallID) >= c.m.lim.MaxCalls
	}
	return false
}

// toolContent: the tool message a model reads says what the lifecycle says
// (and so what callResult justified).
func (c *outcomeChecker) toolContent(o *msgObs) {
	f := o.f
	if f == nil {
		c.violate(TypedOutcomes, o.a.id, "call %s has a result in history but no call_finished event", o.m.ToolCallID)
		return
	}
	l := &f.l
	// The kernel flags what it wrote itself: every result but a tool's own
	// answer, and a child's written by an abort before the child ended.
	toolsOwn := l.Status == kernel.CallOK || l.Status == kernel.CallError
	if own := toolsOwn || (l.Status == kernel.CallChild && !f.early); o.m.Synthetic == own {
		c.violate(TypedOutcomes, o.a.id, "the result of call %s (%s) is flagged synthetic=%v", o.m.ToolCallID, l.Status, o.m.Synthetic)
	}
	if toolsOwn {
		return // the tool's own text
	}
	if !f.parsed {
		c.violate(TypedOutcomes, o.a.id, "result of call %s is not structured content: %.80q", o.m.ToolCallID, o.m.Content)
		return
	}
	if why := canonicalResult(o.m.Content); why != "" {
		c.violate(TypedOutcomes, o.a.id, "result of call %s is not written as docs/semantics.md (\"Results\") writes it: %s: %.80q", o.m.ToolCallID, why, o.m.Content)
		return
	}
	c.structured(o, l, &f.content)
}

// structured: the structured result of a call the kernel wrote says how
// the call ended, and a refusal or a malformed call says why.
func (c *outcomeChecker) structured(o *msgObs, l *kernel.Lifecycle, r *resultContent) {
	if !resultSays(r, l) {
		c.violate(TypedOutcomes, o.a.id, "result of call %s reads %s/%s%s/%q, but the call ended %s/%s/%q",
			o.m.ToolCallID, r.Type, r.Status, r.Outcome, r.Reason, l.Status, l.Outcome, l.Reason)
		return
	}
	switch {
	case l.Status == kernel.CallRefused && r.Limit != c.limit(o.a, l.Reason):
		c.violate(TypedOutcomes, o.a.id, "refusal of call %s names limit %d; %s is %d", o.m.ToolCallID, r.Limit, l.Reason, c.limit(o.a, l.Reason))
	case (l.Status == kernel.CallMalformed || l.Reason == kernel.ReasonNotInProfile) && r.Error == "":
		c.violate(TypedOutcomes, o.a.id, "%s call %s is not told what is wrong", l.Status, o.m.ToolCallID)
	}
}

// resultSays reports whether a structured result names the type, status
// or outcome, and reason of the call's end.
func resultSays(r *resultContent, l *kernel.Lifecycle) bool {
	if l.Status == kernel.CallChild {
		return r.Type == "agent_result" && r.Outcome == l.Outcome.String() && r.Reason == l.Reason.String()
	}
	return r.Type == resultType(l.Status) && r.Status == l.Status.String() && r.Reason == l.Reason.String()
}

// resultType is the type of the structured result of a call that ended
// with status (docs/semantics.md, "Results").
func resultType(status kernel.CallStatus) string {
	switch status {
	case kernel.CallCancelled, kernel.CallTimedOut:
		return "tool_aborted"
	case kernel.CallLost:
		return "tool_lost"
	}
	return "tool_error"
}

// limit is the value of the limit a refusal of a's names: the one that
// applies to a (its profile's, docs/semantics.md "Profiles"); 0 for a
// refusal that names none (not_in_profile).
func (c *outcomeChecker) limit(a *agentObs, r kernel.Reason) int {
	switch r {
	case kernel.ReasonMaxDepth:
		return a.depthCap
	case kernel.ReasonMaxChildren:
		return c.m.maxChildren(a)
	case kernel.ReasonNotInProfile:
		return 0
	case kernel.ReasonMaxAgents:
		return c.m.maxAgents
	case kernel.ReasonMaxCalls:
		return c.m.lim.MaxCalls
	}
	return -1
}

// malformedCall reports whether call i of a's last message (delivered by
// request req) really cannot run: it came without a name, its arguments
// are not JSON, or it is a delegation without a task.
func (m *model) malformedCall(a *agentObs, req *opObs, i int) bool {
	if i < 0 || i >= len(a.lastCalls) {
		return false
	}
	call := a.lastCalls[i]
	if nameless(req, call) {
		return true
	}
	if call.Name != m.delegateTool {
		// A tool outside the agent's profile is refused first, whatever
		// its arguments (docs/semantics.md, "Profiles").
		return m.mayCall(a, call.Name) && !json.Valid([]byte(call.Arguments))
	}
	var args struct {
		Task    string `json:"task"`
		Profile string `json:"profile"`
	}
	return json.Unmarshal([]byte(call.Arguments), &args) != nil || strings.TrimSpace(args.Task) == "" || m.badProfile(args.Profile)
}

// nameless reports whether call, delivered by request req, was streamed
// without a name.
func nameless(req *opObs, call kernel.ToolCall) bool {
	if req != nil {
		for _, fr := range req.frags {
			if fr.name == "" && string(fr.args) == call.Arguments {
				return true
			}
		}
	}
	return false
}

// callIndex is the position of call callID among the calls of a's last
// assistant message (-1 when it is not one of them).
func callIndex(a *agentObs, callID string) int {
	return slices.IndexFunc(a.lastCalls, func(c kernel.ToolCall) bool { return c.ID == callID })
}

func (c *outcomeChecker) finish() {
	for _, a := range c.m.agents {
		if a == nil {
			continue
		}
		if a.startedTurn != a.endedTurn {
			c.violate(TypedOutcomes, a.id, "turn %d has no terminal outcome", a.startedTurn)
		}
		for _, id := range a.calls {
			n := 0
			if f := c.m.calls[callKey{a.id, id}]; f != nil {
				n = f.n
			}
			if n != 1 {
				c.violate(TypedOutcomes, a.id, "call %s has %d terminal results", id, n)
			}
		}
	}
}

// canonicalResult says how a structured result departs from the form
// docs/semantics.md ("Results") gives it ("" when it does not): one compact
// JSON object, no field holding an empty string (a field with nothing to
// say is left out), each string escaped as Go's encoding/json escapes it
// with HTML escaping off — so the model reads every character as the agent
// produced it, not a \uXXXX escape of it.
func canonicalResult(content string) string {
	if canonicalFlat(content) {
		return ""
	}
	return canonicalResultJSON(content)
}

// canonicalResultJSON is canonicalResult through encoding/json, for any
// content.
func canonicalResultJSON(content string) string {
	dec := json.NewDecoder(strings.NewReader(content))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "not a JSON object"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	b.WriteByte('{')
	for dec.More() {
		k, err := dec.Token()
		var v any
		if err == nil {
			err = dec.Decode(&v)
		}
		if err != nil {
			return err.Error()
		}
		if v == "" {
			return "field " + k.(string) + " is empty"
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		_ = enc.Encode(k)
		b.Truncate(b.Len() - 1) // Encode ends each value with a newline
		b.WriteByte(':')
		if err := enc.Encode(v); err != nil {
			return err.Error()
		}
		b.Truncate(b.Len() - 1)
	}
	b.WriteByte('}')
	if b.String() != content {
		return "written otherwise than encoding/json writes it"
	}
	return ""
}
