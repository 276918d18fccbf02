package oracle

import (
	"time"

	"github.com/escapement/escapement/kernel"
)

// This file is what the simulator asks of the oracle beyond the steps: the
// violations, what the oracle observed that a run's Result reports, the
// run limits, and a crash's rebuilt tree.

// Violations are the violations recorded so far, in order (at most
// maxViolations).
func (o *Oracle) Violations() []Violation { return o.out }

// SetClock moves the oracle's clock to now without a step: a violation the
// simulator reports between steps (a crash's rebuild) is located there.
func (o *Oracle) SetClock(now time.Duration) { o.m.now = now }

// Rebuilt tells the oracle that a crashed host was rebuilt: it reads t
// from now on.
func (o *Oracle) Rebuilt(t Tree) { o.m.c = t }

// TimeLimitReached: the run stops at its virtual time limit with work
// pending at at (a liveness violation). The end-of-run checks that need a
// run that ended skip what the limit cut off.
func (o *Oracle) TimeLimitReached(at, limit time.Duration) {
	o.quiesce.timeLimit(at, limit)
	o.m.stopped = true
}

// EventLimitReached: the run stops after delivering limit events (no
// invariant: a run limit), with work pending.
func (o *Oracle) EventLimitReached(limit int) {
	o.Violate(RunLimit, kernel.NoAgent, "event budget %d exhausted", limit)
	o.m.stopped = true
}

// ShutdownBegun reports that a shutdown was delivered (and no recovery
// since ended it).
func (o *Oracle) ShutdownBegun() bool { return o.m.shutdown }

// Quiet reports whether the tree is quiescent now, and since when.
func (o *Oracle) Quiet() (quiet bool, since time.Duration) { return o.m.quiet, o.m.quietAt }

// Probes counts the reachability probes hit so far.
func (o *Oracle) Probes() map[Probe]int { return o.probes.counts }

// Spent lists the turns that ran out of max_requests with a request a
// recovery asked again among them, in the order they ended.
func (o *Oracle) Spent() []SpentTurn { return o.m.spent }

// Tally maps every agent's path to its last turn's outcome and to how
// many requests its model was asked (a request a recovery restarted
// counted once), as the oracle last read them: after Finish, every agent,
// a freed one as it was last held.
func (o *Oracle) Tally() (outcomes map[string]string, requests map[string]int) {
	outcomes, requests = map[string]string{}, map[string]int{}
	for id := 0; id < o.m.c.NumAgents(); id++ {
		a := o.m.agents[id]
		outcomes[a.view.Path] = a.view.Outcome.String()
		requests[a.view.Path] = a.asked()
	}
	return outcomes, requests
}

// Asked is how many requests agent id's model was asked so far (false
// when the oracle has not seen the agent).
func (o *Oracle) Asked(id kernel.AgentID) (int, bool) {
	a := o.m.agent(id)
	if a == nil {
		return 0, false
	}
	return a.asked(), true
}

// Find resolves a scenario's agent reference (a path, an instance name or
// a script name: View.Matches) to the first agent it names: among the
// agents the tree holds, and the freed ones as the oracle last saw them.
func (o *Oracle) Find(ref string) (kernel.AgentID, bool) {
	c := o.m.c
	for id := 0; id < c.NumAgents(); id++ {
		v := c.View(kernel.AgentID(id))
		if v.Freed {
			if a := o.m.agent(kernel.AgentID(id)); a != nil {
				v = a.view
			}
		}
		if v.Matches(ref) {
			return kernel.AgentID(id), true
		}
	}
	return kernel.NoAgent, false
}
