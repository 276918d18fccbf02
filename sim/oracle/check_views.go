package oracle

import (
	"slices"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// viewChecker holds I23: what the kernel reports of an agent to the
// drivers that read it — how its last turn ended (outcome, reason,
// summary), the children it spawned, its current turn's requests, deadline
// and abort reason, the ops it has in flight and the children still
// running — is what the oracle observed from the events and effects; a
// child that finished (its turn and its ops ended) before this step is
// freed, and its view says so and nothing else; and so is what it reports
// of the tree: whether it is quiescent, and which agent a path or name
// finds (a freed one: none).
type viewChecker struct {
	judge
	quiet bool // the model's quiescence at the last step
}

func (c *viewChecker) step(s *stepObs) {
	for _, id := range s.dirty {
		c.agent(c.m.agents[id])
	}
	if c.m.quiet != c.quiet {
		c.quiet = c.m.quiet
		if q := c.m.c.Quiescent(); q != c.m.quiet {
			c.violate(ViewsTellTruth, kernel.NoAgent, "the tree reports quiescent=%v; the oracle saw %v", q, c.m.quiet)
		}
	}
}

func (c *viewChecker) agent(a *agentObs) {
	switch {
	case a.freed && !a.viewFreed:
		c.violate(ViewsTellTruth, a.id, "is still held: it finished (its turn and its ops ended) before this step, so it should be freed")
	case !a.freed && a.viewFreed:
		c.violate(ViewsTellTruth, a.id, "reports itself freed, but it has not finished before this step")
	case !a.freed:
		c.held(a)
	}
}

// held: the view of an agent the core holds says what the oracle saw of
// it (the first difference is told).
func (c *viewChecker) held(a *agentObs) {
	v := &a.view
	out, reason, summary := kernel.OutcomeNone, kernel.ReasonNone, ""
	if a.endedTurn > 0 && a.endedTurn == a.startedTurn {
		out, reason, summary = a.end.outcome, a.end.reason, a.end.text
	}
	live := 0
	for _, k := range a.kids {
		if ch := c.m.agents[k]; ch.endedTurn == 0 {
			live++
		}
	}
	switch {
	case v.Outcome != out || v.Reason != reason || v.Summary != summary:
		c.violate(ViewsTellTruth, a.id, "reports its last turn %s (%q) with %q; it ended %s (%q) with %q", v.Outcome, v.Reason, v.Summary, out, reason, summary)
	case !slices.Equal(v.Children, a.kids):
		c.violate(ViewsTellTruth, a.id, "reports children %v; it spawned %v", v.Children, a.kids)
	case v.Requests != a.t.requests:
		c.violate(ViewsTellTruth, a.id, "reports %d requests this turn; it made %d", v.Requests, a.t.requests)
	case v.Deadline != a.deadline:
		c.violate(ViewsTellTruth, a.id, "reports its turn's deadline at %v; it is %v", v.Deadline, a.deadline)
	case v.InFlight != a.liveOps:
		c.violate(ViewsTellTruth, a.id, "reports %d op(s) in flight; %d are", v.InFlight, a.liveOps)
	case v.LiveChildren != live:
		c.violate(ViewsTellTruth, a.id, "reports %d live child(ren); %d run", v.LiveChildren, live)
	case v.Abort != a.t.abortReason && a.state == fsm.Idle: // judged once the turn ended, beside its outcome
		c.violate(ViewsTellTruth, a.id, "reports abort reason %q; its turn was aborted with %q", v.Abort, a.t.abortReason)
	}
}

func (c *viewChecker) finish() {
	for _, a := range c.m.agents {
		if a == nil {
			continue
		}
		for _, name := range []string{a.path, a.name} {
			id, ok := c.m.c.Find(name)
			switch {
			case a.freed && (ok || id != kernel.NoAgent):
				c.violate(ViewsTellTruth, a.id, "Find(%q) = %d, %v; the agent was freed", name, id, ok)
			case !a.freed && (!ok || id != a.id):
				c.violate(ViewsTellTruth, a.id, "Find(%q) = %d, %v", name, id, ok)
			}
		}
	}
	if name := c.unknownName(); name != "" {
		if id, ok := c.m.c.Find(name); ok || id != kernel.NoAgent {
			c.violate(ViewsTellTruth, kernel.NoAgent, "Find(%q), a name no agent has, = %d, %v", name, id, ok)
		}
	}
	if q := c.m.c.Quiescent(); q != c.m.quiet {
		c.violate(ViewsTellTruth, kernel.NoAgent, "at the end the tree reports quiescent=%v; the oracle saw %v", q, c.m.quiet)
	}
}

// unknownName is a path below the root that no agent's path or name is
// ("" when the tree is empty).
func (c *viewChecker) unknownName() string {
	taken := make(map[string]bool)
	root := ""
	for _, a := range c.m.agents {
		if a == nil {
			continue
		}
		if a.id == kernel.Root {
			root = a.path
		}
		taken[a.path], taken[a.name] = true, true
	}
	if root == "" {
		return ""
	}
	name := root + "/nobody"
	for taken[name] {
		name += "_"
	}
	return name
}
