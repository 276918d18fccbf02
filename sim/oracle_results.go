package sim

import (
	"encoding/json"
	"strings"

	"github.com/escapement/escapement/kernel"
)

// Typed results (I13, F13): every call's one terminal result must say what
// really happened. A delegation's result carries the child's real outcome and
// reason; a cancelled or timed-out call names the abort or the watchdog that
// cut it; and the tool message the model reads says the same as the
// lifecycle event the UI reads. A loop that tells the parent "interrupted by
// the user" when its child timed out is caught here.

// checkCallResult judges a CallFinished against what the run shows.
func (o *oracle) checkCallResult(l kernel.Lifecycle, a *agentObs, f *callFinObs) {
	op := o.ops.get(l.Op)
	ok := true
	switch l.Status {
	case kernel.CallChild:
		if child, spawned := a.delegated[l.CallID]; !spawned || child != l.Child {
			o.violate("I13", l.Agent, "call %s reports the result of agent %d, which was not spawned for it", l.CallID, l.Child)
			return
		}
		if kernel.OutcomeOf(l.Reason) != l.Outcome {
			o.violate("I13", l.Agent, "call %s: child outcome %s with reason %q", l.CallID, l.Outcome, l.Reason)
			return
		}
		c := o.observe(l.Child)
		if c.startedTurn != 0 && c.endedTurn == c.startedTurn {
			o.checkChildResult(f, c)
		} else {
			c.owed = f // judged when the child's turn ends
		}
		return
	case kernel.CallCancelled:
		ok = a.interrupted && l.Reason == a.abortReason && !l.Reason.IsTimeout()
	case kernel.CallTimedOut:
		if l.Reason == kernel.ReasonToolTimeout {
			ok = op != nil && op.timedOut
		} else {
			ok = a.interrupted && l.Reason == a.abortReason && l.Reason.IsTimeout()
		}
	case kernel.CallOK:
		ok = l.Reason == kernel.ReasonNone && op != nil && op.tool && op.terminal && op.cancels == 0 && op.result == kernel.ToolOK
	case kernel.CallError:
		ok = l.Reason == kernel.ReasonToolError && op != nil && op.tool && op.terminal && op.cancels == 0 && op.result != kernel.ToolOK
	case kernel.CallRefused:
		// The limit must really be reached, as the oracle counts it.
		switch l.Reason {
		case kernel.ReasonMaxDepth:
			ok = depthOf(a.path)+1 > o.lim.MaxDepth
		case kernel.ReasonMaxChildren:
			ok = a.spawnedTurn >= o.lim.MaxChildren
		case kernel.ReasonMaxAgents:
			ok = o.c.NumAgents() >= o.maxAgents
		case kernel.ReasonMaxCalls:
			_, i, found := o.callIndex(l.Agent, l.CallID)
			ok = found && i >= o.lim.MaxCalls
		default:
			ok = false
		}
	case kernel.CallMalformed:
		ok = l.Reason == kernel.ReasonMalformed && o.malformed(l.Agent, a, l.CallID)
	default:
		ok = false
	}
	if !ok {
		o.violate("I13", l.Agent, "call %s ended %s with reason %q, which nothing in the run justifies", l.CallID, l.Status, l.Reason)
	}
}

// checkChildResult compares a delegation's result with how the child's turn
// ended.
func (o *oracle) checkChildResult(f *callFinObs, c *agentObs) {
	if f.l.Outcome != c.endOutcome || f.l.Reason != c.endReason {
		o.violate("I13", f.l.Agent, "call %s told the parent its child ended %s (%q), but %s ended %s (%q)",
			f.l.CallID, f.l.Outcome, f.l.Reason, c.path, c.endOutcome, c.endReason)
	}
}

// resultContent is the typed part of the structured content the kernel
// writes for a delegation (agent_result) or an aborted or refused call
// (tool_aborted, tool_error).
type resultContent struct {
	Type    string `json:"type"`
	Outcome string `json:"outcome"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
}

// checkToolContent: the tool message a model reads must say what the
// lifecycle says (and so what the oracle justified above).
func (o *oracle) checkToolContent(id kernel.AgentID, m kernel.Message) {
	f := o.callFin[callKey{id, m.ToolCallID}]
	if f == nil {
		o.violate("I13", id, "call %s has a result in history but no CallFinished event", m.ToolCallID)
		return
	}
	l := f.l
	if l.Status == kernel.CallOK || l.Status == kernel.CallError {
		return // the tool's own text
	}
	var r resultContent
	if err := json.Unmarshal([]byte(m.Content), &r); err != nil {
		o.violate("I13", id, "result of call %s is not structured content: %v", m.ToolCallID, err)
		return
	}
	var bad bool
	if l.Status == kernel.CallChild {
		bad = r.Type != "agent_result" || r.Outcome != l.Outcome.String() || r.Reason != l.Reason.String()
	} else {
		bad = (r.Type != "tool_aborted" && r.Type != "tool_error") || r.Status != l.Status.String() || r.Reason != l.Reason.String()
	}
	if bad {
		o.violate("I13", id, "result of call %s reads %s/%s%s/%q, but the call ended %s/%s/%q",
			m.ToolCallID, r.Type, r.Status, r.Outcome, r.Reason, l.Status, l.Outcome, l.Reason)
	}
}

// malformed reports whether the call the stream delivered really cannot run:
// it came without a name, its arguments are not JSON, or it is a delegation
// without a task.
func (o *oracle) malformed(id kernel.AgentID, a *agentObs, callID string) bool {
	c, _, found := o.callIndex(id, callID)
	if !found {
		return false
	}
	if req := o.ops.get(a.lastReq); req != nil {
		for _, f := range req.frags {
			if f.name == "" && string(f.args) == c.Arguments {
				return true // streamed without a name
			}
		}
	}
	if !json.Valid([]byte(c.Arguments)) {
		return true
	}
	if c.Name != o.delegateTool {
		return false
	}
	var args struct {
		Task string `json:"task"`
	}
	return json.Unmarshal([]byte(c.Arguments), &args) != nil || strings.TrimSpace(args.Task) == ""
}

// callIndex finds call callID in id's history: the call, and its position
// among its message's calls.
func (o *oracle) callIndex(id kernel.AgentID, callID string) (kernel.ToolCall, int, bool) {
	h := o.c.View(id).History
	for i := len(h) - 1; i >= 0; i-- {
		for j := range h[i].ToolCalls {
			if h[i].ToolCalls[j].ID == callID {
				return h[i].ToolCalls[j], j, true
			}
		}
	}
	return kernel.ToolCall{}, 0, false
}
