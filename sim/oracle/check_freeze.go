package oracle

import (
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// freezeChecker holds I1 (F1): once an agent is interrupted, nothing of its
// subtree asks the model again — nor spawns a child — until the user
// submits again. The freeze is lifted only for the root, by a new turn the
// user's input started: this step's, or one accepted while the tree
// settled (docs/semantics.md, "Inputs").
type freezeChecker struct {
	judge
	frozen []bool // by agent id
	// pending counts user inputs accepted while the root was Interrupted:
	// they start its next turn once the tree has settled.
	pending int
}

func (c *freezeChecker) isFrozen(id kernel.AgentID) bool {
	return id >= 0 && int(id) < len(c.frozen) && c.frozen[id]
}

func (c *freezeChecker) set(id kernel.AgentID, v bool) {
	for int(id) >= len(c.frozen) {
		c.frozen = append(c.frozen, false)
	}
	c.frozen[id] = v
}

func (c *freezeChecker) step(s *stepObs) {
	if s.final {
		return
	}
	user := (s.is(kernel.EvSubmit) || s.is(kernel.EvInterject)) && !s.rejected
	if user && s.rootWas == fsm.Interrupted {
		c.pending++
	}
	for i := range s.effs {
		e := &s.effs[i]
		switch {
		case e.Kind == kernel.EffStartLLM:
			if c.isFrozen(e.Agent) {
				c.violate(NoRequestAfterInterrupt, e.Agent, "LLM request %d after an interrupt of its subtree, before the user submitted again", e.Op)
			}
		case e.Kind != kernel.EffEmit:
		case e.Life.Kind == kernel.LifeTransition:
			c.transition(s, &e.Life, user)
		case e.Life.Kind == kernel.LifeDelegated:
			if l := &e.Life; c.isFrozen(l.Agent) || s.notes[i].was == fsm.Interrupted {
				c.set(l.Child, true)
				c.violate(NoRequestAfterInterrupt, l.Child, "child spawned under an interrupted parent")
			}
		}
	}
}

// transition: an interrupt freezes the agent's subtree; only the user's
// input thaws it, by starting the root's next turn.
func (c *freezeChecker) transition(s *stepObs, l *kernel.Lifecycle, user bool) {
	if l.Agent == kernel.Root && l.From == fsm.Idle && l.To == fsm.Streaming && c.isFrozen(kernel.Root) {
		if user || c.pending > 0 {
			c.set(kernel.Root, false)
			c.pending = 0
		} else {
			c.violate(NoRequestAfterInterrupt, kernel.Root, "a new turn started after an interrupt without user input (%s)", s.ev.Kind)
		}
	}
	if l.To == fsm.Interrupted {
		for _, x := range c.m.agents {
			if x != nil && c.m.descends(x.id, l.Agent) {
				c.set(x.id, true)
			}
		}
	}
}
