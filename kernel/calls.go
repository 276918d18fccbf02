package kernel

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/textcut"
)

// callPlan is what becomes of one call of a finished message: it runs (a
// tool, or a delegation spawning a child with args), or it is answered at
// once with status and reason (malformed, or refused by a limit).
type callPlan struct {
	status  CallStatus // CallOK: it runs
	reason  Reason
	content string
	spawn   *delegateArgs // a delegation that runs
}

func (p callPlan) runs() bool { return p.status == CallOK }

// planCalls decides, in call order, what becomes of each call of a
// finished message (docs/semantics.md, "Budgets and caps"). A call that
// cannot run — malformed, or a delegation refused by max_depth,
// max_children or max_agents — is answered so and takes no slot; of the
// calls that can run, the first max_calls run and every further one is
// refused max_calls. So max_calls and max_children both count what runs:
// a slot is never spent on a call that never runs, and a delegation
// refused for max_calls spawns nothing.
func (k *Kernel) planCalls(a *agent, open []openCall) []callPlan {
	plans := make([]callPlan, len(open))
	running, spawns := 0, 0
	for i := range open {
		p := k.judgeCall(a, open[i].call, spawns)
		if p.runs() {
			if running >= k.cfg.MaxCalls {
				p = refusal(ReasonMaxCalls, k.cfg.MaxCalls)
			} else {
				running++
				if p.spawn != nil {
					spawns++
				}
			}
		}
		plans[i] = p
	}
	return plans
}

// judgeCall says whether call c can run, spawns being the delegations of
// its message before it that will spawn: a call without a name, a tool
// call whose arguments are not JSON, a delegation without a task is
// malformed; a delegation deeper than max_depth, beyond the agent's
// max_children for the turn or the tree's max_agents is refused.
func (k *Kernel) judgeCall(a *agent, c ToolCall, spawns int) callPlan {
	if c.Name == "" { // streamed without a name (history shows NamelessCall)
		return malformedCall("tool call has no name")
	}
	if c.Name != k.cfg.DelegateTool {
		if p, ok := k.judgeTool(a, c.Name); !ok { // profile.go
			return p
		}
		if !json.Valid([]byte(c.Arguments)) {
			return malformedCall("arguments are not valid JSON: " + textcut.Clip(c.Arguments, 200))
		}
		return callPlan{status: CallOK}
	}
	var args delegateArgs
	if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil || strings.TrimSpace(args.Task) == "" {
		detail := "delegate needs {\"task\": string, \"name\"?: string}"
		if len(k.cfg.Profiles) > 0 {
			detail = "delegate needs {\"task\": string, \"profile\": string, \"name\"?: string}"
		}
		if err != nil {
			detail += ": " + err.Error()
		}
		return malformedCall(detail)
	}
	profile, p, ok := k.judgeProfile(a, args.Profile) // profile.go
	if !ok {
		return p
	}
	switch {
	case a.depth+1 > a.depthCap:
		return refusal(ReasonMaxDepth, a.depthCap)
	case a.delegated+spawns >= k.maxChildren(a):
		return refusal(ReasonMaxChildren, k.maxChildren(a))
	case k.held+spawns >= k.cfg.MaxAgents: // the agents it holds at once (free.go)
		return refusal(ReasonMaxAgents, k.cfg.MaxAgents)
	}
	args.index = profile
	return callPlan{status: CallOK, spawn: &args}
}

func malformedCall(detail string) callPlan {
	return callPlan{status: CallMalformed, reason: ReasonMalformed, content: toolErrorContent(CallMalformed, ReasonMalformed, detail)}
}

func refusal(r Reason, limit int) callPlan {
	return callPlan{status: CallRefused, reason: r, content: refusalContent(r, limit)}
}

// dispatchCall carries out plan p for call i of the last assistant
// message: a delegation spawns its child, a tool that needs approval waits
// for a decision, any other starts or waits for a slot, and a call that
// cannot run is answered at once.
func (k *Kernel) dispatchCall(a *agent, i int, p callPlan) {
	switch {
	case !p.runs():
		k.closeCall(a, i, fsm.ToolResult, p.status, p.reason, p.content, NoAgent, OutcomeNone, true)
	case p.spawn != nil:
		k.spawn(a, i, *p.spawn)
	case k.asks(a.open[i].call):
		k.askApproval(a, i)
	case a.runningTools >= k.cfg.MaxParallelTools:
		a.open[i].waiting = true // startWaiting runs it when a slot frees
	default:
		k.startTool(a, i)
	}
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

// delegateArgs is the delegate tool's argument object; index is the
// profile it resolves to (noProfile: none).
type delegateArgs struct {
	Task    string `json:"task"`
	Name    string `json:"name"`
	Profile string `json:"profile"`
	index   int
}

// spawn starts the child a delegation asked for (planCalls checked its
// limits) on call i.
func (k *Kernel) spawn(a *agent, i int, args delegateArgs) {
	c := a.open[i].call
	// A parent spawns only on StreamDelegations, which the FSM declares only
	// from Streaming, so a child can never start under an Interrupted parent
	// (F14); assert it rather than trust it.
	if a.state != fsm.Delegating {
		panic(fmt.Sprintf("kernel: %s delegating in state %s", a.path, a.state))
	}
	a.delegated++
	child := k.newAgent(a, sanitizeName(args.Name), args.index)
	child.parentCall = int32(i)
	a.open[i].child = child.id
	a.liveChildren++
	system := k.cfg.ChildSystem
	if p := k.profileOf(child); p != nil {
		system = p.System
	}
	if system != "" {
		child.history = append(child.history, Message{Role: RoleSystem, Content: system})
	}
	k.emit(Lifecycle{Kind: LifeDelegated, Agent: a.id, Child: child.id, CallID: c.ID, Name: child.name, Text: args.Task, Profile: child.profileName})
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
