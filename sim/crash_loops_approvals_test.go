package sim

import (
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// The broken recoveries of approvals (docs/durable.md, "Approvals across a
// crash"): a restart that decides what a person was asked, one that runs a
// call a person denied, one that forgets what it had asked.

// The worlds they are caught in: a crash while a call waits for approval,
// and one after a call was denied, while its turn streams on.
const (
	crashMidApproval = "name: crash-mid-approval\nagents:\n  main:\n    - calls: [{tool: shell, args: {n: 1}, id: c1}]\n    - {text: done}\n" +
		"tools:\n  shell: {duration: 1s, result: ran, approval: required}\ninputs:\n  - {at: 0s, submit: go}\n"
	crashAfterDenial = "name: crash-after-denial\nagents:\n  main:\n    - calls: [{tool: shell, args: {n: 1}, id: c1}]\n    - {text: not run then so be it, rate: 2}\n" +
		"tools:\n  shell: {duration: 1s, result: ran, approval: required}\ninputs:\n  - {at: 0s, submit: go}\n  - {at: 500ms, deny: c1}\n"
)

func approvalCrashLoops() []CrashLoop {
	return []CrashLoop{
		{crashMidApproval, time.Second, nil, "decides on restart: the recovery approves every request it asks again (a resumed graph treats the pending interrupt as answered)", oracle.EndsNeverAuthorize,
			func(*scenario.Scenario) CoreFactory { return broken(approvingOnRecovery) }},
		{crashAfterDenial, time.Second, nil, "runs a denied call after a crash: the recovery starts every tool call of the message that did not run", oracle.EndsNeverAuthorize,
			func(*scenario.Scenario) CoreFactory { return broken(rerunningDenied) }},
		{crashMidApproval, time.Second, nil, "forgets what it asked: the recovery does not ask again for a call that waits", oracle.ApprovalEndsOnce,
			func(*scenario.Scenario) CoreFactory {
				return dropping(func(ev kernel.Event, e kernel.Effect) bool {
					return ev.Kind == kernel.EvRecover && e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeApprovalRequested
				})
			}},
	}
}

// approvingOnRecovery: each request the recovery asks again is approved in
// the recovery's step.
func approvingOnRecovery(b *brokenCore) {
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		out := b.inner(ev)
		if ev.Kind != kernel.EvRecover {
			return out
		}
		for _, r := range requests(out) {
			out = append(out, b.inner(kernel.Approve(ev.At, r.agent, r.call, r.digest))...)
		}
		return out
	}
}

// rerunningDenied: the recovery starts the tool of every call a person
// denied.
func rerunningDenied(b *brokenCore) {
	var calls []kernel.Effect // the start each asking call would have had
	denied := map[askKey]bool{}
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		out := b.inner(ev)
		for _, e := range out {
			switch l := e.Life; {
			case e.Kind != kernel.EffEmit:
			case l.Kind == kernel.LifeApprovalRequested:
				calls = append(calls, kernel.Effect{Kind: kernel.EffStartTool, Agent: l.Agent, Call: kernel.ToolCall{ID: l.CallID, Name: l.Name, Arguments: l.Text}})
			case l.Kind == kernel.LifeApprovalResolved && l.Approval == kernel.ApprovalDenied:
				denied[askKey{l.Agent, l.CallID}] = true
			}
		}
		if ev.Kind == kernel.EvRecover {
			for _, c := range calls {
				if denied[askKey{c.Agent, c.Call.ID}] {
					c.Op = b.fakeOp()
					out = append(out, c)
				}
			}
		}
		return out
	}
}
