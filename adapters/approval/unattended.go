package approval

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/kernel"
)

// UnattendedNote is the denial's note the model reads when nobody can
// decide (Attendance).
const UnattendedNote = "not approved: this call needs a person's approval, and no one can give it in this run (no terminal, no decisions on stdin with --json or --input-format json, or its input has ended); it was not run"

// Attendance is whether anyone can decide the calls of a run that wait
// for approval: a person at a terminal, or a program writing protocol
// decision lines on stdin (every line with --input-format json; with
// chat --json, the text lines that are decisions, protocol.IsDecision;
// with run --json PROMPT, every line, which must be a decision) —
// until that input ends. A run nobody attends denies each
// request at once, with UnattendedNote for the model and a line for say
// (stderr) naming the call: never a silent hang until the approval
// timeout on a question nobody sees.
type Attendance struct {
	say  func(string)
	gone atomic.Bool
}

// NewAttendance is the attendance of a run: attended says someone can
// decide from the start.
func NewAttendance(attended bool, say func(string)) *Attendance {
	a := &Attendance{say: say}
	a.gone.Store(!attended)
	return a
}

// Policy is the driver's policy (live.Config.Policy): while someone
// attends, every call waits for that one's decision; once nobody does,
// requests are denied at once.
func (a *Attendance) Policy() live.Policy {
	return func(r live.ApprovalRequest) (live.Decision, bool) {
		if !a.gone.Load() {
			return live.Decision{}, false
		}
		a.say(fmt.Sprintf("%s's call %s of %s needs approval and no one can give it here: denied (run chat on a terminal, or write decision lines on stdin: chat --json, run --json PROMPT, or --input-format json)", r.Path, r.CallID, r.Tool))
		return live.Decision{Verdict: kernel.VerdictDeny, Note: UnattendedNote}, true
	}
}

// Decider is what Leave needs of the driver (*live.Driver).
type Decider interface {
	Approvals(ctx context.Context) ([]live.ApprovalRequest, error)
	Decide(ctx context.Context, agent kernel.AgentID, callID, digest string, v kernel.Verdict, note string) error
}

// Leave is the end of the input decisions came from (stdin's end, Ctrl-D):
// the calls waiting now are denied, and so is every later request. A wait
// that ended meanwhile is left as it ended; a denial the driver refuses
// is said.
func (a *Attendance) Leave(ctx context.Context, d Decider) {
	if a.gone.Swap(true) {
		return
	}
	waits, err := d.Approvals(ctx)
	for _, w := range waits {
		a.say(fmt.Sprintf("input ended: no one can decide %s's call %s of %s any more: denied", w.Path, w.CallID, w.Tool))
		if derr := d.Decide(ctx, w.Agent, w.CallID, w.Digest, kernel.VerdictDeny, UnattendedNote); !errors.Is(derr, kernel.ErrDecisionStale) {
			err = errors.Join(err, derr)
		}
	}
	if err != nil && !errors.Is(err, live.ErrStopped) { // nothing waits in a driver that has stopped
		a.say(err.Error())
	}
}
