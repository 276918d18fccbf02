package kernel

import (
	"strconv"
	"strings"

	"github.com/escapement/escapement/fsm"
)

// onRecover resolves everything a crashed host had in flight
// (docs/semantics.md, "Recovery"). The kernel was rebuilt by replaying the
// events the old process logged, so it knows every op that process ran;
// none of them will ever answer. Each is resolved once, in op order (the
// map's order must not reach the effects):
//
//   - a request an agent was streaming ends lost and is restarted with the
//     same history, the text it had streamed kept as partial (as for an
//     interjection's restart; it counts against max_requests);
//   - a tool call still waiting for its result ends lost and runs again
//     when its tool is idempotent (Config.Idempotent), else it gets a
//     tool_lost result and the agent goes on — never a silent re-run;
//   - an op that was being cancelled ends lost, so an interrupted agent
//     finishes settling;
//   - a call waiting for approval is asked again, never decided by the
//     restart (an approved call waiting for a slot starts when the lost
//     ops free one: it never started);
//
// and then every timer still wanted is armed again at its deadline (the
// host's clock is expected to resume from the last logged event, so the
// time the process was down does not count against any deadline).
//
// A shutdown the crashed host had begun ends with it: its turns were
// aborted (reason shutdown) and settle here, but the new host has not been
// asked to stop, so turns may start again (a resumed chat reads input).
func (k *Kernel) onRecover() {
	k.shutdown = false
	ids := k.LiveOps(make([]OpID, 0, len(k.ops)))
	// Say what will happen first, so a subscriber reads the announcement
	// before the ends and restarts it explains. Resolving one op never
	// changes how another is resolved (no resolution cancels anything).
	var count [numRecoveries]int
	for _, id := range ids {
		count[k.recovery(k.ops[id])]++
	}
	asks := k.waitingApprovals()
	k.emit(Lifecycle{Kind: LifeRecovered, Agent: Root, N: len(ids) - count[recoverTimer], Text: recoveredText(count, asks)})
	for _, id := range ids {
		o, ok := k.ops[id]
		if !ok || o.kind == opTimer {
			continue // ended by an earlier resolution, or armed again below
		}
		a := k.agents[o.agent]
		k.endOp(a, id, o, OpLost)
		switch k.recovery(o) {
		case recoverEnd:
			k.startWaiting(a)
			k.settleUp(a)
		case recoverRestart:
			if a.ctx.compaction != nil {
				k.restartCompaction(a)
				continue
			}
			k.keepPartial(a)
			k.restart(a)
		case recoverRerun:
			k.startTool(a, int(o.call))
		case recoverLost:
			k.closeCall(a, int(o.call), fsm.ToolResult, CallLost, ReasonCrash, toolLostContent(), NoAgent, OutcomeNone, true)
			k.startWaiting(a)
			if a.pending == 0 {
				k.resume(a)
			}
		}
	}
	k.askAgain()
	// Arm again every timer that was set before the crash and is still
	// wanted; timers set above (new watchdogs, tool deadlines) are already
	// in this step's effects.
	for _, id := range ids {
		if o, ok := k.ops[id]; ok && o.kind == opTimer {
			k.out = append(k.out, Effect{Kind: EffSetTimer, Agent: o.agent, Op: id, At: o.at, Timer: o.tkind})
		}
	}
}

// recoveryKind is how onRecover resolves one op.
type recoveryKind uint8

const (
	recoverTimer   recoveryKind = iota // armed again
	recoverEnd                         // it was being cancelled: it ends
	recoverRestart                     // a streaming request: restarted
	recoverRerun                       // an idempotent tool: run again
	recoverLost                        // any other tool: answered tool_lost
	numRecoveries
)

func (k *Kernel) recovery(o op) recoveryKind {
	switch {
	case o.kind == opTimer:
		return recoverTimer
	case o.cancelling:
		return recoverEnd
	case o.kind == opLLM:
		return recoverRestart
	case k.idempotent[k.agents[o.agent].open[o.call].call.Name]:
		return recoverRerun
	}
	return recoverLost
}

func recoveredText(count [numRecoveries]int, asks int) string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{
		{count[recoverRestart], "request(s) restarted"}, {count[recoverRerun], "idempotent tool call(s) run again"},
		{count[recoverLost], "tool call(s) lost"}, {count[recoverEnd], "cancelled op(s) ended"},
	} {
		if p.n > 0 {
			parts = append(parts, strconv.Itoa(p.n)+" "+p.what)
		}
	}
	if asks > 0 {
		parts = append(parts, approvalsText(asks))
	}
	if len(parts) == 0 {
		return "nothing was in flight"
	}
	return strings.Join(parts, ", ")
}
