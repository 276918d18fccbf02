package sim

import (
	"slices"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// callChecker holds I14 (F12), I15 and I19: what a model asks for is run
// only within its budgets and caps (docs/semantics.md, "Budgets and caps").
// A tool starts only as a whole call its agent's last finished stream
// delivered, once (I14). A message past max_message_bytes is cut in the
// step that took it past (with reason output_limit); no call beyond
// max_calls of its message runs; no agent runs more than max_parallel_tools
// tools at once, and none leaves a call waiting while a slot is free or
// starts one ahead of an earlier waiting call (I15). No agent makes more
// than max_requests requests in a turn (I19).
type callChecker struct{ judge }

func (c *callChecker) step(s *step) {
	lim := c.m.lim
	for i := range s.effs {
		e, n := &s.effs[i], &s.notes[i]
		switch e.Kind {
		case kernel.EffStartLLM:
			if n.count > lim.MaxRequests {
				c.violate(RequestBudget, e.Agent, "request %d is request %d of its turn (max_requests %d)", e.Op, n.count, lim.MaxRequests)
			}
		case kernel.EffStartTool:
			c.toolStart(e, n)
		}
	}
	if op := s.capCut; op != nil {
		if a := c.m.agents[op.agent]; op.cancels == 0 || a.t.abortReason != kernel.ReasonOutputLimit {
			c.violate(CapsHold, op.agent, "a chunk took the message past max_message_bytes (%d) and the stream was not cut with reason output_limit", lim.MaxMessageBytes)
		}
	}
	for _, id := range s.dirty {
		if a := c.m.agents[id]; a.state == fsm.Tooling || a.state == fsm.Delegating {
			c.waiting(a)
		}
	}
}

// toolStart: a tool starts as a whole call its stream delivered, within
// its message's first max_calls calls and its agent's max_parallel_tools.
func (c *callChecker) toolStart(e *kernel.Effect, n *note) {
	lim := c.m.lim
	if n.liveTools > lim.MaxParallelTools {
		c.violate(CapsHold, e.Agent, "%d tools of one agent run at once (max_parallel_tools %d)", n.liveTools, lim.MaxParallelTools)
	}
	if req := n.req; req == nil || req.agent != e.Agent || !req.endedOK {
		c.violate(FinishedCallsOnly, e.Agent, "tool call %s started outside the end of its own finished stream", e.Call.ID)
		return
	}
	if i := callIndex(n.a, e.Call.ID); i >= lim.MaxCalls {
		c.violate(CapsHold, e.Agent, "tool call %s is call %d of its message and started (max_calls %d)", e.Call.ID, i+1, lim.MaxCalls)
	} else if i > 0 {
		if w := c.firstWaiting(n.a, i); w >= 0 {
			c.violate(CapsHold, e.Agent, "tool call %s started ahead of call %s, which waits", e.Call.ID, n.a.lastCalls[w].ID)
		}
	}
	if n.frag == nil {
		c.violate(FinishedCallsOnly, e.Agent, "tool call %s %s(%s) is not a call its stream delivered (or it started twice)", e.Call.ID, e.Call.Name, e.Call.Arguments)
	}
}

// firstWaiting is the index of the first call of a's last message, below
// limit, that has neither started, nor a result, nor a child (-1: none).
func (c *callChecker) firstWaiting(a *agentObs, limit int) int {
	for j, call := range a.lastCalls[:min(limit, len(a.lastCalls))] {
		if slices.Contains(a.started, call.ID) || c.m.calls[callKey{a.id, call.ID}] != nil {
			continue
		}
		if _, child := a.delegated[call.ID]; child {
			continue
		}
		return j
	}
	return -1
}

// waiting: an agent with a free tool slot leaves no call waiting.
func (c *callChecker) waiting(a *agentObs) {
	if a.liveTools >= c.m.lim.MaxParallelTools {
		return
	}
	if w := c.firstWaiting(a, c.m.lim.MaxCalls); w >= 0 {
		c.violate(CapsHold, a.id, "call %s waits while %d of %d tool slots are taken", a.lastCalls[w].ID, a.liveTools, c.m.lim.MaxParallelTools)
	}
}
