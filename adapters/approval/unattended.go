package approval

import (
	"fmt"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/kernel"
)

// UnattendedNote is the denial's note the model reads when nobody can
// decide (Unattended).
const UnattendedNote = "not approved: this call needs a person's approval, and no one can give it in this run (no terminal, no --input-format json); it was not run"

// Unattended is the policy of a run nobody can answer — no terminal to
// prompt on, no protocol lines on stdin: every request is denied at once,
// with UnattendedNote for the model, and say (stderr) is told which call
// and how a person could have decided. Never a silent hang until the
// approval timeout.
func Unattended(say func(string)) live.Policy {
	return func(r live.ApprovalRequest) (live.Decision, bool) {
		say(fmt.Sprintf("%s's call %s of %s needs approval and no one can give it here: denied (run chat on a terminal, or decide with --input-format json)", r.Path, r.CallID, r.Tool))
		return live.Decision{Verdict: kernel.VerdictDeny, Note: UnattendedNote}, true
	}
}

// For is the policy of a run: none when someone can decide (a person at
// a terminal, a program writing protocol lines on stdin), so each call
// waits for that decision; else Unattended.
func For(someoneDecides bool, say func(string)) live.Policy {
	if someoneDecides {
		return nil
	}
	return Unattended(say)
}
