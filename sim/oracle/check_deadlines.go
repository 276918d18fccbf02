package oracle

import (
	"fmt"
	"math"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// deadlineChecker holds I5 (F4) and I16. Every deadline fires exactly when
// it is due, judged from the events the model saw (docs/semantics.md,
// "Deadlines"): a first-token timeout at start + first_token_timeout with
// no chunk; a stall timeout at last chunk + stall_timeout; a tool timeout
// at the tool's start + tool_timeout; a turn timeout at the turn's
// deadline; an abandonment at cancel + grace; an interjection's restart at
// the cut + debounce. Never before (the watched silence or wait has not
// reached its limit) and never after (time moved past the instant with the
// deadline still pending). A child's turn deadline is the earlier of its
// own and its parent's; a child never gets a turn timer that would not
// fire before its parent's (I16).
type deadlineChecker struct {
	judge
	// The root's request an interjection cut restarts at restartDue.
	restarting bool
	restartDue time.Duration
	// next: no pending deadline is due before it (a lower bound, so most
	// steps judge nothing).
	next time.Duration
	// what was reported late already
	lateOps     map[kernel.OpID]bool
	lateTurn    []uint64
	lateRestart bool
}

const never = time.Duration(math.MaxInt64)

func newDeadlineChecker(j judge) *deadlineChecker {
	return &deadlineChecker{judge: j, next: never, lateOps: map[kernel.OpID]bool{}}
}

// due is id's running turn deadline as the model computed it (0: none).
func (c *deadlineChecker) due(id kernel.AgentID) time.Duration {
	if a := c.m.agent(id); a != nil {
		return a.deadline
	}
	return 0
}

func (c *deadlineChecker) lower(d time.Duration) { c.next = min(c.next, d) }

func (c *deadlineChecker) elapse() {
	if c.m.now > c.next {
		c.scan(c.m.now, "has not fired by")
	}
}

// opDue is when op's pending deadline is due, and what it is ("" when
// none is pending).
func (c *deadlineChecker) opDue(op *opObs) (time.Duration, string) {
	lim := c.m.lim
	switch {
	case op.ended:
		return 0, ""
	case op.cancels > 0:
		return op.cancelAt + lim.Grace, "abandonment after grace"
	case op.terminal:
		return 0, ""
	case op.tool:
		return op.start + lim.ToolTimeout, "tool timeout"
	case op.gotChunk:
		return op.lastChunkAt + lim.StallTimeout, "stall timeout"
	}
	return op.start + lim.FirstTokenTimeout, "first-token timeout"
}

// scan reports every deadline due before now that has not fired, and
// computes next.
func (c *deadlineChecker) scan(now time.Duration, verb string) {
	next := never
	for _, op := range c.m.live {
		due, what := c.opDue(op)
		switch {
		case what == "":
		case now > due:
			if !c.lateOps[op.id] {
				c.lateOps[op.id] = true
				c.violate(DeadlinesOnTime, op.agent, "the %s of op %d, due at %v, %s %v", what, op.id, due, verb, c.m.now)
			}
		default:
			next = min(next, due)
		}
	}
	for len(c.lateTurn) < len(c.m.agents) {
		c.lateTurn = append(c.lateTurn, 0)
	}
	for id, a := range c.m.agents {
		if a == nil || a.deadline == 0 || !isActive(a.state) {
			continue
		}
		due := a.deadline
		if now > due {
			if c.lateTurn[id] != a.t.turn {
				c.lateTurn[id] = a.t.turn
				c.violate(DeadlinesOnTime, a.id, "turn %d, due to time out at %v, is still %s (%s %v)", a.t.turn, due, a.state, verb, c.m.now)
			}
			continue
		}
		next = min(next, due)
	}
	if c.restarting {
		if now > c.restartDue {
			if !c.lateRestart {
				c.lateRestart = true
				c.violate(DeadlinesOnTime, kernel.Root, "the request an interjection cut was due to restart at %v and %s %v", c.restartDue, verb, c.m.now)
			}
		} else {
			next = min(next, c.restartDue)
		}
	}
	c.next = next
}

func (c *deadlineChecker) step(s *stepObs) {
	if s.final {
		return
	}
	now, lim := c.m.now, c.m.lim
	if s.is(kernel.EvInterject) && !s.rejected && s.rootWas == fsm.Streaming && !c.restarting && !c.m.agents[kernel.Root].waitingReq {
		c.restarting, c.restartDue, c.lateRestart = true, now+lim.Debounce, false
		c.lower(c.restartDue)
	}
	for i := range s.effs {
		c.effect(&s.effs[i], &s.notes[i])
	}
	if op := s.op; op != nil && !op.tool && op.gotChunk {
		c.lower(op.lastChunkAt + lim.StallTimeout)
	}
	if s.is(kernel.EvLLMDelta) && s.op != nil {
		c.rearm(s)
	}
}

// effect notes the deadline an effect arms, and judges the timers and
// records it sets.
func (c *deadlineChecker) effect(e *kernel.Effect, n *note) {
	now, lim := c.m.now, c.m.lim
	switch e.Kind {
	case kernel.EffStartLLM:
		c.lower(now + lim.FirstTokenTimeout)
		if e.Agent == kernel.Root && c.restarting {
			c.restarting = false
			if now < c.restartDue {
				c.violate(DeadlinesOnTime, kernel.Root, "the request an interjection cut restarted at %v, before its debounce ended (%v)", now, c.restartDue)
			}
		}
	case kernel.EffStartTool:
		c.lower(now + lim.ToolTimeout)
	case kernel.EffCancelLLM, kernel.EffCancelTool:
		if n.count == 1 {
			c.lower(now + lim.Grace)
		}
	case kernel.EffSetTimer:
		if e.Timer == kernel.TimerTurn {
			c.childTimer(e)
		}
	case kernel.EffEmit:
		c.life(&e.Life, n)
	}
}

func (c *deadlineChecker) life(l *kernel.Lifecycle, n *note) {
	switch l.Kind {
	case kernel.LifeTimedOut:
		c.timeout(l, n.op)
	case kernel.LifeOpEnded:
		if op := n.op; l.End == kernel.OpAbandoned && op != nil && !n.bad {
			c.abandoned(op)
		}
	case kernel.LifeRequestWaiting:
		// The restart came on time and waits for a request slot
		// (docs/semantics.md, "Budgets and caps").
		if l.Agent == kernel.Root {
			c.restarted("the request an interjection cut was asked for again at %v, before its debounce ended (%v)", true)
		}
	case kernel.LifeTurnStarted:
		c.lower(c.due(l.Agent))
	case kernel.LifeTurnEnded:
		if l.Agent == kernel.Root {
			c.restarted("the turn ran out of budget at %v, before the interjection's debounce ended (%v)", l.Reason == kernel.ReasonBudget)
		}
	case kernel.LifeInterrupted:
		if l.Agent == kernel.Root {
			c.restarting = false
		}
	}
}

// restarted ends the wait for the restart of the root's request an
// interjection cut; judged (told as format with the time and the due
// time), it must not come before its debounce ended.
func (c *deadlineChecker) restarted(format string, judged bool) {
	if !c.restarting {
		return
	}
	c.restarting = false
	if now := c.m.now; judged && now < c.restartDue {
		c.violate(DeadlinesOnTime, kernel.Root, format, now, c.restartDue)
	}
}

// abandoned: an op is abandoned only once its grace after its cancel ran
// out.
func (c *deadlineChecker) abandoned(op *opObs) {
	now, grace := c.m.now, c.m.lim.Grace
	switch {
	case op.cancels == 0:
		c.violate(DeadlinesOnTime, op.agent, "op %d abandoned, but it was never cancelled", op.id)
	case now < op.cancelAt+grace:
		c.violate(DeadlinesOnTime, op.agent, "op %d abandoned %v after its cancel; grace is %v", op.id, now-op.cancelAt, grace)
	}
}

// rearm: a chunk moves its stream's deadline later, and the watchdog
// catches up lazily when it fires (docs/semantics.md, "Deadlines"); a
// chunk re-arms it only when the stall deadline comes before the one it is
// armed for (the first chunk of a stream whose stall_timeout is shorter
// than what is left of its first-token window).
func (c *deadlineChecker) rearm(s *stepObs) {
	var stopped time.Duration
	for i := range s.effs {
		e := &s.effs[i]
		switch {
		case e.Kind == kernel.EffStopTimer && e.Timer == kernel.TimerWatchdog:
			stopped = s.stoppedAt[e.Op]
		case e.Kind == kernel.EffSetTimer && e.Timer == kernel.TimerWatchdog:
			if stopped == 0 || e.At >= stopped {
				c.violate(DeadlinesOnTime, e.Agent, "a chunk re-armed the watchdog at %v, not before the %v it was armed for", e.At, stopped)
			}
		}
	}
}

// timeout: a timeout never fires before its deadline (the late side is
// scan's), and says when the silence or wait it judged began.
func (c *deadlineChecker) timeout(l *kernel.Lifecycle, op *opObs) {
	switch l.Reason {
	case kernel.ReasonFirstTokenTimeout:
		if !c.firstTokenDue(op) {
			c.violate(DeadlinesOnTime, l.Agent, "first-token timeout not justified: the request %s", c.story(op))
		}
	case kernel.ReasonStallTimeout:
		if !c.stallDue(op) {
			c.violate(DeadlinesOnTime, l.Agent, "stall timeout not justified: the request %s", c.story(op))
		}
	case kernel.ReasonToolTimeout:
		if !c.toolDue(op) {
			c.violate(DeadlinesOnTime, l.Agent, "tool timeout not justified: the tool %s", c.story(op))
		}
	case kernel.ReasonTurnTimeout:
		c.turnTimeout(l)
	}
	c.since(l, op)
}

// cancelledBefore reports an op cancelled before this step: it has no
// deadline left but its grace.
func (c *deadlineChecker) cancelledBefore(op *opObs) bool {
	return op.cancels > 0 && op.cancelAt < c.m.now
}

// firstTokenDue: the request is live, has no chunk yet and its first-token
// window has passed.
func (c *deadlineChecker) firstTokenDue(op *opObs) bool {
	return op != nil && !op.tool && !op.gotChunk && !c.cancelledBefore(op) && c.m.now >= op.start+c.m.lim.FirstTokenTimeout
}

// stallDue: the request is live, has had a chunk, and the stall window
// since its last one has passed.
func (c *deadlineChecker) stallDue(op *opObs) bool {
	return op != nil && !op.tool && op.gotChunk && !c.cancelledBefore(op) && c.m.now >= op.lastChunkAt+c.m.lim.StallTimeout
}

// toolDue: the tool is live, has not answered, and its window has passed.
func (c *deadlineChecker) toolDue(op *opObs) bool {
	return op != nil && op.tool && !op.terminal && !c.cancelledBefore(op) && c.m.now >= op.start+c.m.lim.ToolTimeout
}

// turnTimeout: a turn times out at its deadline, not before.
func (c *deadlineChecker) turnTimeout(l *kernel.Lifecycle) {
	d := c.due(l.Agent)
	if a := c.m.agent(l.Agent); d == 0 && a != nil && a.endedTurn == l.Turn && a.endedStep == c.m.s.n {
		d = a.endedDeadline // the turn settled in the step its deadline fired
	}
	if now := c.m.now; d == 0 || now < d {
		c.violate(DeadlinesOnTime, l.Agent, "turn timeout at %v; the turn's deadline is %v", now, d)
	}
}

// since: the record says when the silence or wait it judged began.
func (c *deadlineChecker) since(l *kernel.Lifecycle, op *opObs) {
	var since time.Duration
	switch {
	case l.Reason == kernel.ReasonTurnTimeout:
		since = c.m.agent(l.Agent).t.start
	case op == nil:
		return
	case l.Reason == kernel.ReasonStallTimeout:
		since = op.lastChunkAt
	default:
		since = op.start
	}
	if l.Since != since {
		c.violate(DeadlinesOnTime, l.Agent, "%s says its wait began at %v; it began at %v", l.Reason, l.Since, since)
	}
}

// childTimer: a child's turn timer fires before its parent's deadline, or
// the child has none (its ancestor's deadline cuts it).
func (c *deadlineChecker) childTimer(e *kernel.Effect) {
	a := c.m.agent(e.Agent)
	if a == nil || a.parent == kernel.NoAgent {
		return
	}
	if pd := c.due(a.parent); pd == 0 || e.At >= pd {
		c.violate(ChildDeadlineClamped, a.id, "turn timer at %v, not before its parent's deadline %v", e.At, pd)
	}
}

func (c *deadlineChecker) story(op *opObs) string {
	now := c.m.now
	switch {
	case op == nil:
		return "is unknown"
	case op.cancels > 0:
		return fmt.Sprintf("was cancelled %v ago", now-op.cancelAt)
	case op.tool:
		return fmt.Sprintf("started %v ago, result delivered=%v", now-op.start, op.terminal)
	case !op.gotChunk:
		return fmt.Sprintf("started %v ago, no chunk yet", now-op.start)
	}
	return fmt.Sprintf("started %v ago, last chunk %v ago", now-op.start, now-op.lastChunkAt)
}

func (c *deadlineChecker) finish() {
	if !c.m.stopped {
		c.scan(never, "never fired; the run ended at")
	}
}
