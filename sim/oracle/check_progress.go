package oracle

import (
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// progressChecker holds I22: an agent never waits for nothing. In the step
// the last of its calls gets its result it sends its next request (or ends
// its turn on its budget); a delegation's call gets its result in the step
// its child's turn ends, unless an abort closed it before; and an
// interrupted agent with nothing in flight and no child running settles in
// that step (docs/semantics.md, "Turns"). Without it a loop that forgets
// to go on stays correct until its turn deadline ends it as a timeout.
type progressChecker struct{ judge }

func (c *progressChecker) step(s *stepObs) {
	if s.final {
		return
	}
	for _, id := range s.dirty {
		c.agent(c.m.agents[id])
	}
	// An op's end names its agent only as progress: an Interrupted agent
	// whose last op ended here is judged too.
	for i := range s.effs {
		if n := &s.notes[i]; s.effs[i].Kind == kernel.EffEmit && s.effs[i].Life.Kind == kernel.LifeOpEnded && n.op != nil && !n.bad {
			if a := c.m.agents[n.op.agent]; a.state == fsm.Interrupted && c.m.mark[a.id] != s.n {
				c.unsettled(a)
			}
		}
	}
	for _, e := range s.turnEnds {
		if a := e.a; !e.second && a.via.id != "" && c.m.calls[a.via] == nil {
			c.violate(NoWaitingForNothing, a.via.agent, "%s ended its turn, and call %s it was spawned for has no result", a.path, a.via.id)
		}
	}
}

// agent: an agent the step named does not wait for calls that all have
// their results, nor stay Interrupted with nothing left.
func (c *progressChecker) agent(a *agentObs) {
	switch a.state {
	case fsm.Tooling, fsm.Delegating:
		if len(a.lastCalls) > 0 && c.allAnswered(a) {
			c.violate(NoWaitingForNothing, a.id, "every call of its last message has its result, and it is still %s", a.state)
		}
	case fsm.Interrupted:
		c.unsettled(a)
	}
}

// unsettled: an Interrupted agent with nothing in flight and no child
// running settles in the step that left it so.
func (c *progressChecker) unsettled(a *agentObs) {
	if a.liveOps == 0 && !c.childRunning(a) {
		c.violate(NoWaitingForNothing, a.id, "nothing of its turn is in flight and no child runs, and it is still Interrupted")
	}
}

func (c *progressChecker) allAnswered(a *agentObs) bool {
	for _, call := range a.lastCalls {
		if c.m.calls[callKey{a.id, call.ID}] == nil {
			return false
		}
	}
	return true
}

// childRunning reports whether a child a spawned still runs its turn.
func (c *progressChecker) childRunning(a *agentObs) bool {
	for _, x := range c.m.agents {
		if x != nil && x.via.agent == a.id && x.via.id != "" && x.startedTurn > x.endedTurn {
			return true
		}
	}
	return false
}
