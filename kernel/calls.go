package kernel

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/textcut"
)

// dispatchCall starts call i of the last assistant message: a delegation
// spawns a child, a tool starts, and a malformed call is answered at once.
func (k *Kernel) dispatchCall(a *agent, i int) {
	c := a.open[i].call
	if c.Name == "" { // streamed without a name (history shows NamelessCall)
		k.closeCall(a, i, fsm.ToolResult, CallMalformed, ReasonMalformed, toolErrorContent(CallMalformed, ReasonMalformed, "tool call has no name"), NoAgent, OutcomeNone, true)
		return
	}
	if c.Name == k.cfg.DelegateTool {
		k.delegate(a, i)
		return
	}
	if !json.Valid([]byte(c.Arguments)) {
		k.closeCall(a, i, fsm.ToolResult, CallMalformed, ReasonMalformed, toolErrorContent(CallMalformed, ReasonMalformed, "arguments are not valid JSON: "+textcut.Clip(c.Arguments, 200)), NoAgent, OutcomeNone, true)
		return
	}
	if a.runningTools >= k.cfg.MaxParallelTools {
		a.open[i].waiting = true // startWaiting runs it when a slot frees
		return
	}
	k.startTool(a, i)
}

// startTool starts call i as a tool op with its own deadline.
func (k *Kernel) startTool(a *agent, i int) {
	c := a.open[i].call
	id := k.newOp(op{kind: opTool, agent: a.id, call: int32(i)})
	a.open[i].op = id
	a.inflight++
	a.runningTools++
	k.out = append(k.out, Effect{Kind: EffStartTool, Agent: a.id, Op: id, Call: c})
	k.setOpTimer(id, k.setTimer(a, TimerTool, k.now+k.cfg.ToolTimeout, id))
	k.emit(Lifecycle{Kind: LifeToolStarted, Agent: a.id, Op: id, CallID: c.ID, Name: c.Name})
}

// startWaiting starts a's waiting tool calls, in call order, while it has
// free slots (Limits.MaxParallelTools). Only an agent still waiting for
// its calls starts them: an aborted agent closes them unstarted.
func (k *Kernel) startWaiting(a *agent) {
	if a.state != fsm.Tooling && a.state != fsm.Delegating {
		return
	}
	for a.nextWaiting < len(a.open) && a.runningTools < k.cfg.MaxParallelTools {
		i := a.nextWaiting
		a.nextWaiting++
		if oc := &a.open[i]; oc.waiting && !oc.closed {
			oc.waiting = false
			k.startTool(a, i)
		}
	}
}

// NamelessCall is the name a tool call streamed without one is given in
// history (it is answered as malformed, never run).
const NamelessCall = "missing_name"

// delegateArgs is the delegate tool's argument object.
type delegateArgs struct {
	Task string `json:"task"`
	Name string `json:"name"`
}

// delegate spawns a child for call i, or refuses it with a typed error result
// when a limit would be exceeded (never a crash).
func (k *Kernel) delegate(a *agent, i int) {
	c := a.open[i].call
	var args delegateArgs
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || strings.TrimSpace(args.Task) == "" {
		detail := "delegate needs {\"task\": string, \"name\"?: string}"
		if err != nil {
			detail += ": " + err.Error()
		}
		k.closeCall(a, i, fsm.ToolResult, CallMalformed, ReasonMalformed, toolErrorContent(CallMalformed, ReasonMalformed, detail), NoAgent, OutcomeNone, true)
		return
	}
	switch {
	case a.depth+1 > k.cfg.MaxDepth:
		k.closeCall(a, i, fsm.ToolResult, CallRefused, ReasonMaxDepth, refusalContent(ReasonMaxDepth, k.cfg.MaxDepth), NoAgent, OutcomeNone, true)
		return
	case a.delegated >= k.cfg.MaxChildren:
		k.closeCall(a, i, fsm.ToolResult, CallRefused, ReasonMaxChildren, refusalContent(ReasonMaxChildren, k.cfg.MaxChildren), NoAgent, OutcomeNone, true)
		return
	case k.held >= k.cfg.MaxAgents:
		k.closeCall(a, i, fsm.ToolResult, CallRefused, ReasonMaxAgents, refusalContent(ReasonMaxAgents, k.cfg.MaxAgents), NoAgent, OutcomeNone, true)
		return
	}
	// A parent spawns only on StreamDelegations, which the FSM declares only
	// from Streaming, so a child can never start under an Interrupted parent
	// (F14); assert it rather than trust it.
	if a.state != fsm.Delegating {
		panic(fmt.Sprintf("kernel: %s delegating in state %s", a.path, a.state))
	}
	a.delegated++
	child := k.newAgent(a, sanitizeName(args.Name))
	child.parentCall = int32(i)
	a.open[i].child = child.id
	a.liveChildren++
	if k.cfg.ChildSystem != "" {
		child.history = append(child.history, Message{Role: RoleSystem, Content: k.cfg.ChildSystem})
	}
	k.emit(Lifecycle{Kind: LifeDelegated, Agent: a.id, Child: child.id, CallID: c.ID, Name: child.name, Text: args.Task})
	k.startTurn(child, fsm.Submit, []input{{text: args.Task}})
}

// closeCall gives call i its one result (I13) as a tool message. trigger is
// fired first (ToolResult or ChildOutcome); pass noTrigger when the close is
// part of an abort whose trigger the caller already fired.
func (k *Kernel) closeCall(a *agent, i int, trigger fsm.Trigger, status CallStatus, reason Reason, content string, child AgentID, outcome Outcome, synthetic bool) {
	oc := &a.open[i]
	if oc.closed {
		panic(fmt.Sprintf("kernel: call %s of %s closed twice", oc.call.ID, a.path))
	}
	if trigger != noTrigger && !k.fire(a, trigger) {
		return
	}
	oc.closed = true
	a.pending--
	a.history = append(a.history, Message{Role: RoleTool, ToolCallID: oc.call.ID, Content: content, Synthetic: synthetic})
	k.emit(Lifecycle{Kind: LifeCallFinished, Agent: a.id, Op: oc.op, CallID: oc.call.ID, Name: oc.call.Name, Status: status, Reason: reason, Child: child, Outcome: outcome})
}

// noTrigger tells closeCall the FSM was already fired by the caller.
const noTrigger = fsm.Trigger(255)

// onToolResult: a tool op answered.
func (k *Kernel) onToolResult(ev Event) {
	a, o := k.opEnded(ev, opTool)
	if a == nil {
		return
	}
	i := int(o.call)
	status, reason, content := CallOK, ReasonNone, ev.Text
	switch ev.Status {
	case ToolError:
		status, reason = CallError, ReasonToolError
	case ToolCancelled:
		// Cancelled without our asking (e.g. the process was killed): an error
		// for the model, not a user cancel (F13).
		status, reason = CallError, ReasonToolError
		if content == "" {
			content = "tool stopped before finishing"
		}
	}
	k.closeCall(a, i, fsm.ToolResult, status, reason, content, NoAgent, OutcomeNone, false)
	k.startWaiting(a)
	if a.pending == 0 {
		k.resume(a)
	}
}
