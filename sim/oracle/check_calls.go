package oracle

import (
	"slices"
	"strconv"
	"strings"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// callChecker holds I14 (F12), I15 and I19: what a model asks for is run
// only within its budgets and caps (docs/semantics.md, "Budgets and caps").
// A tool starts only as a whole call its agent's last finished stream
// delivered, once, and the calls a cut stream was still sending are
// dropped and recorded, in index order (I14). A message past max_message_bytes is cut in the
// step that took it past (with reason output_limit); at most max_calls
// calls of one message run, and a call is refused max_calls only when it
// could run and max_calls calls before it run; no agent runs more than
// max_parallel_tools tools at once, and none leaves a call waiting while a
// slot is free — a waiting call starts in the step a slot frees, whatever
// freed it — or starts one ahead of an earlier waiting call (I15). No agent makes more
// requests or spawns more children in a turn than its budget, none streams
// two requests at once, no child sits deeper than max_depth, the tree
// never holds more than max_agents agents nor streams more than
// max_parallel_requests requests, and no request waits while a slot is
// free or starts ahead of one that waits (I19).
type callChecker struct{ judge }

func (c *callChecker) step(s *stepObs) {
	for i := range s.effs {
		c.effect(&s.effs[i], &s.notes[i])
	}
	for _, op := range s.cutOps {
		c.dropped(s, op)
	}
	if op := s.op; op != nil && s.answer && op.endedOK && len(op.frags) > 0 {
		c.recorded(s, op)
		c.capped(op)
	}
	if op := s.capCut; op != nil {
		c.outputCut(op)
	}
	for _, id := range s.dirty {
		c.waitingIfCalling(c.m.agents[id])
	}
	// A tool op that ended frees a slot even in a step that changed
	// nothing else of its agent (a cancelled tool's acknowledgement, an
	// abandonment): its agent is judged too.
	for i := range s.effs {
		if n := &s.notes[i]; s.effs[i].Kind == kernel.EffEmit && s.effs[i].Life.Kind == kernel.LifeOpEnded && n.op != nil && n.op.tool {
			c.waitingIfCalling(c.m.agents[n.op.agent])
		}
	}
	c.waitingForSlots()
}

// effect judges what one effect starts: a request, a tool, a child.
func (c *callChecker) effect(e *kernel.Effect, n *note) {
	switch e.Kind {
	case kernel.EffStartLLM:
		if max := c.m.maxRequests(n.a); n.count > max {
			c.violate(RequestBudget, e.Agent, "request %d is request %d of its turn (max_requests %d)", e.Op, n.count, max)
		}
		c.oneStream(e)
		c.requestSlot(e, n)
	case kernel.EffStartTool:
		c.toolStart(e, n)
	case kernel.EffEmit:
		if e.Life.Kind == kernel.LifeDelegated {
			c.spawned(&e.Life, n)
		}
	}
}

// outputCut: a chunk that took a message past max_message_bytes cut its
// stream, with reason output_limit.
func (c *callChecker) outputCut(op *opObs) {
	if a := c.m.agents[op.agent]; op.cancels == 0 || a.t.abortReason != kernel.ReasonOutputLimit {
		c.violate(CapsHold, op.agent, "a chunk took the message past max_message_bytes (%d) and the stream was not cut with reason output_limit", c.m.lim.MaxMessageBytes)
	}
}

// waitingIfCalling judges the calls a waits for, while it runs tools or
// children (waiting).
func (c *callChecker) waitingIfCalling(a *agentObs) {
	if a.state == fsm.Tooling || a.state == fsm.Delegating {
		c.waiting(a)
	}
}

// requestSlot: a request starts within the tree's max_parallel_requests,
// and never ahead of a request that waits for a slot.
func (c *callChecker) requestSlot(e *kernel.Effect, n *note) {
	if max := c.m.lim.MaxParallelRequests; n.liveRequests > max {
		c.violate(RequestBudget, e.Agent, "request %d makes %d requests the tree streams at once (max_parallel_requests %d)", e.Op, n.liveRequests, max)
	}
	if w := n.firstWaiting; w != kernel.NoAgent && w != e.Agent {
		c.violate(RequestBudget, e.Agent, "request %d starts ahead of %s's, which waits for a slot", e.Op, c.m.agents[w].path)
	}
}

// waitingForSlots: once a step is done, no request waits while the tree
// has a free request slot.
func (c *callChecker) waitingForSlots() {
	if len(c.m.waiting) == 0 {
		return
	}
	if live, max := c.m.liveRequests(), c.m.lim.MaxParallelRequests; live < max {
		c.violate(RequestBudget, c.m.waiting[0], "its request waits for a slot while the tree streams %d of %d (max_parallel_requests)", live, max)
	}
}

// oneStream: an agent streams one request at a time — a request starts
// only when every earlier request of its agent has been answered or told
// to stop. Judged once the step's effects are all applied, so a restart
// that ends the old request later in the same step (a crash's recovery)
// is not blamed.
func (c *callChecker) oneStream(e *kernel.Effect) {
	for _, op := range c.m.live {
		if op.id != e.Op && !op.tool && op.agent == e.Agent && !op.terminal && op.cancels == 0 {
			c.violate(RequestBudget, e.Agent, "request %d starts while request %d of the same agent still streams (neither answered nor cancelled)", e.Op, op.id)
			return
		}
	}
}

// spawned: a delegation stays within its parent's max_children for the
// turn, max_depth (tightened by the profiles above it), and the tree's
// max_agents.
func (c *callChecker) spawned(l *kernel.Lifecycle, n *note) {
	parent := c.m.agent(l.Agent)
	if parent == nil {
		return
	}
	if max := c.m.maxChildren(parent); n.count > max {
		c.violate(RequestBudget, l.Agent, "child %d of one turn spawned (max_children %d)", n.count, max)
	}
	if ch := c.m.agent(l.Child); ch != nil && ch.depth > parent.depthCap {
		c.violate(RequestBudget, l.Child, "spawned at depth %d (max_depth %d)", ch.depth, parent.depthCap)
	}
	if k := c.m.held(); k > c.m.maxAgents {
		c.violate(RequestBudget, l.Child, "the tree holds %d agents (max_agents %d)", k, c.m.maxAgents)
	}
}

// toolStart: a tool starts as a whole call its stream delivered, within
// its message's first max_calls calls and its agent's max_parallel_tools.
func (c *callChecker) toolStart(e *kernel.Effect, n *note) {
	lim := c.m.lim
	if n.liveTools > lim.MaxParallelTools {
		c.violate(CapsHold, e.Agent, "%d tools of one agent run at once (max_parallel_tools %d)", n.liveTools, lim.MaxParallelTools)
	}
	if n.rerun != nil {
		if !slices.Contains(c.m.idempotent, e.Call.Name) {
			c.violate(FinishedCallsOnly, e.Agent, "tool call %s runs again after the crash, but %s is not idempotent", e.Call.ID, e.Call.Name)
		}
		return
	}
	if req := n.req; req == nil || req.agent != e.Agent || !req.endedOK {
		c.violate(FinishedCallsOnly, e.Agent, "tool call %s started outside the end of its own finished stream", e.Call.ID)
		return
	}
	if i := callIndex(n.a, e.Call.ID); i > 0 {
		if w := c.firstWaiting(n.a, i); w >= 0 {
			c.violate(CapsHold, e.Agent, "tool call %s started ahead of call %s, which waits", e.Call.ID, n.a.lastCalls[w].ID)
		}
	}
	if n.frag == nil {
		c.violate(FinishedCallsOnly, e.Agent, "tool call %s %s(%s) is not a call its stream delivered (or it started twice)", e.Call.ID, e.Call.Name, e.Call.Arguments)
	}
}

// recorded: the assistant message a finished stream leaves records the
// calls it delivered, in index order: each under the id the model gave it
// (made unique with a #n suffix when the history holds it already) or a
// generated one, its name (a placeholder for none) and its arguments.
func (c *callChecker) recorded(s *stepObs, op *opObs) {
	frags := slices.Clone(op.frags)
	slices.SortFunc(frags, func(x, y fragObs) int { return x.index - y.index })
	for _, o := range s.msgs {
		if o.a.id != op.agent || o.m.Role != kernel.RoleAssistant {
			continue
		}
		calls := o.m.ToolCalls
		if len(calls) != len(frags) {
			c.violate(FinishedCallsOnly, op.agent, "request %d delivered %d call(s); its message records %d", op.id, len(frags), len(calls))
			return
		}
		for k, f := range frags {
			name := f.name
			if name == "" {
				name = kernel.NamelessCall
			}
			call := calls[k]
			if call.Name != name || call.Arguments != string(f.args) || call.ID == "" ||
				(f.id != "" && call.ID != f.id && !strings.HasPrefix(call.ID, f.id+"#")) {
				c.violate(FinishedCallsOnly, op.agent, "call %d of request %d was %s %s(%s); its message records %s %s(%s)", k, op.id, f.id, name, f.args, call.ID, call.Name, call.Arguments)
				return
			}
		}
		return
	}
	c.violate(FinishedCallsOnly, op.agent, "request %d delivered %d call(s) and left no message", op.id, len(frags))
}

// dropped: the calls a cut stream was still sending are recorded as
// dropped in the step that cut it, in index order, none started.
func (c *callChecker) dropped(s *stepObs, op *opObs) {
	frags := slices.Clone(op.frags)
	slices.SortFunc(frags, func(x, y fragObs) int { return x.index - y.index })
	k := 0
	for i := range s.effs {
		l := &s.effs[i].Life
		if s.effs[i].Kind != kernel.EffEmit || l.Kind != kernel.LifeCallDropped || l.Agent != op.agent {
			continue
		}
		if k >= len(frags) || l.Name != frags[k].name || l.Text != string(frags[k].args) {
			c.violate(FinishedCallsOnly, op.agent, "dropped call %s %s(%s) is not the next call request %d was sending", l.CallID, l.Name, l.Text, op.id)
			return
		}
		k++
	}
	if k < len(frags) {
		c.violate(FinishedCallsOnly, op.agent, "request %d was cut while sending %d call(s); %d recorded as dropped", op.id, len(frags), k)
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
	if w := c.firstWaiting(a, len(a.lastCalls)); w >= 0 {
		c.violate(CapsHold, a.id, "call %s waits while %d of %d tool slots are taken", a.lastCalls[w].ID, a.liveTools, c.m.lim.MaxParallelTools)
	}
}

// capped judges max_calls at the end of the stream that delivered a
// message's calls (docs/semantics.md, "Budgets and caps"): the calls that
// run — a tool started or waiting for a slot, a child spawned — are at
// most max_calls, and a call is refused max_calls only when max_calls
// calls before it run and it could run itself: it is not malformed, nor a
// delegation that max_depth, max_children or max_agents refuse first. A
// call that never runs takes no slot.
func (c *callChecker) capped(op *opObs) {
	a, lim := c.m.agents[op.agent], c.m.lim
	spawnedHere := 0
	for _, call := range a.lastCalls {
		if _, ok := a.delegated[call.ID]; ok {
			spawnedHere++
		}
	}
	running, spawned := 0, 0
	for i, call := range a.lastCalls {
		f := c.m.calls[callKey{a.id, call.ID}]
		if runs(f) {
			if running++; running > lim.MaxCalls {
				c.violate(CapsHold, a.id, "call %s is call %d of its message to run (max_calls %d)", call.ID, running, lim.MaxCalls)
				return
			}
			if _, ok := a.delegated[call.ID]; ok {
				spawned++
			}
			continue
		}
		if f.l.Reason != kernel.ReasonMaxCalls {
			continue
		}
		if why := c.refusedWrongly(a, op, i, running, spawned-spawnedHere); why != "" {
			c.violate(CapsHold, a.id, "call %s was refused max_calls (%d), but %s", call.ID, lim.MaxCalls, why)
			return
		}
	}
}

// runs reports a call that was not refused nor malformed.
func runs(f *callObs) bool {
	return f == nil || (f.l.Status != kernel.CallMalformed && f.l.Status != kernel.CallRefused)
}

// refusedWrongly says why call i of a's last message, refused max_calls
// after running calls before it ran (and spawned children, less those
// its message spawned), should have been run or told something else first
// ("": it was refused rightly).
func (c *callChecker) refusedWrongly(a *agentObs, op *opObs, i, running, spawned int) string {
	delegation := a.lastCalls[i].Name == c.m.delegateTool
	switch {
	case running < c.m.lim.MaxCalls:
		return "only " + strconv.Itoa(running) + " call(s) before it run: a call that never ran took a slot"
	case c.m.malformedCall(a, op, i):
		return "it is malformed, which it must be told first"
	case c.m.outsideProfile(a, op, i):
		return "its agent's profile does not allow it, which it must be told first"
	case !delegation:
		return ""
	case a.depth+1 > a.depthCap:
		return "it is a delegation past max_depth, which it must be told first"
	case a.t.spawned+spawned >= c.m.maxChildren(a):
		return "it is a delegation past max_children, which it must be told first"
	case c.m.c.NumAgents()+spawned >= c.m.maxAgents:
		return "it is a delegation past max_agents, which it must be told first"
	}
	return ""
}
