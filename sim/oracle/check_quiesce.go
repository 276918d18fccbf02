package oracle

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// quiesceChecker holds I3 (F3) and liveness. Every interrupt is an
// obligation: by its time + grace the interrupted subtree has left the turn
// it was in and every op in flight in it has ended, whatever the tools do.
// And once the user and the world's faults are done, the tree is idle
// within 2×grace + turn_timeout + debounce, and at the end of the run.
type quiesceChecker struct {
	judge
	deadlines []quiesceDeadline
	// lastActivity is the latest user input or fault (scheduled or
	// injected); liveChecked is set once the liveness bound was judged.
	lastActivity time.Duration
	liveChecked  bool
}

// quiesceDeadline is one interrupt's obligation: by `by`, every agent of the
// subtree has left the turn it was in, and every op in flight then has
// ended. (A new turn started afterwards by a queued user input is fine.)
type quiesceDeadline struct {
	by     time.Duration
	agents []agentTurn
	ops    []*opObs
}

type agentTurn struct {
	id   kernel.AgentID
	turn uint64
}

func (c *quiesceChecker) elapse() {
	kept := c.deadlines[:0]
	for _, d := range c.deadlines {
		if c.m.now > d.by {
			c.quiet(d)
			continue
		}
		kept = append(kept, d)
	}
	c.deadlines = kept
	c.liveness()
}

func (c *quiesceChecker) step(s *stepObs) {
	for _, id := range s.entered {
		if p := c.m.agent(id).parent; p != kernel.NoAgent && slices.Contains(s.entered, p) {
			continue // aborted with its parent: the parent's subtree covers it
		}
		d := quiesceDeadline{by: c.m.now + c.m.lim.Grace}
		for _, x := range c.m.agents {
			if x != nil && c.m.descends(x.id, id) && c.m.c.AgentState(x.id) != fsm.Idle {
				d.agents = append(d.agents, agentTurn{x.id, x.turn})
			}
		}
		for _, op := range c.m.live {
			if c.m.descends(op.agent, id) {
				d.ops = append(d.ops, op)
			}
		}
		c.deadlines = append(c.deadlines, d)
	}
}

// quiet verifies one obligation.
func (c *quiesceChecker) quiet(d quiesceDeadline) {
	for _, at := range d.agents {
		if s := c.m.c.AgentState(at.id); s != fsm.Idle && c.m.agent(at.id).turn == at.turn {
			c.violate(QuiescentByGrace, at.id, "turn %d still %s at interrupt time + grace (%v)", at.turn, s, d.by)
			return
		}
	}
	for _, op := range d.ops {
		if !op.ended {
			c.violate(QuiescentByGrace, op.agent, "op %d, in flight at the interrupt, still not ended at interrupt time + grace (%v)", op.id, d.by)
			return
		}
	}
}

// activity notes a user input or fault at t: the liveness bound runs from
// the last one.
func (c *quiesceChecker) activity(t time.Duration) {
	if t > c.lastActivity {
		c.lastActivity = t
		c.liveChecked = false
	}
}

// bound is how long after the last input or fault the tree may still be
// busy: the pending abort's grace, a whole new turn (an input queued while
// the tree settled starts one), its grace, and a debounce window.
// Everything that waits has a deadline, so this is finite.
func (c *quiesceChecker) bound() time.Duration {
	return c.lastActivity + 2*c.m.lim.Grace + c.m.lim.TurnTimeout + c.m.lim.Debounce
}

// liveness: once time passes the bound with nothing more from the user or
// the world's faults, every agent is Idle with nothing in flight; otherwise
// it names the stuck agents.
func (c *quiesceChecker) liveness() {
	if c.liveChecked || c.m.now <= c.bound() || c.m.quiet {
		return
	}
	c.liveChecked = true
	var stuck []string
	for _, a := range c.m.agents {
		if a == nil {
			continue
		}
		if s := c.m.c.AgentState(a.id); s != fsm.Idle || a.liveOps > 0 {
			stuck = append(stuck, fmt.Sprintf("%s=%s(%d ops)", a.path, s, a.liveOps))
		}
	}
	if len(stuck) == 0 && len(c.m.timers) > 0 {
		stuck = append(stuck, fmt.Sprintf("%d timer(s) still set", len(c.m.timers)))
	}
	if len(stuck) > 0 {
		c.violate(Liveness, kernel.NoAgent, "not idle %v after the last input or fault (bound %v): %s", c.m.now-c.lastActivity, c.bound()-c.lastActivity, strings.Join(stuck, ", "))
	}
}

// timeLimit reports a run stopped at its virtual time limit with work still
// pending at `at`.
func (c *quiesceChecker) timeLimit(at, limit time.Duration) {
	c.m.now = at
	c.violate(Liveness, kernel.NoAgent, "virtual time limit %v reached with work pending", limit)
}

func (c *quiesceChecker) finish() {
	for _, d := range c.deadlines {
		c.quiet(d)
	}
	for _, a := range c.m.agents {
		if a == nil {
			continue
		}
		if s := c.m.c.AgentState(a.id); s != fsm.Idle {
			c.violate(Liveness, a.id, "run ended with the agent %s", s)
		}
	}
}
