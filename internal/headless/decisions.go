package headless

import (
	"errors"

	"github.com/escapement/escapement/adapters/protocol"
)

// ErrNotDecision refuses a stdin line of run --json PROMPT that is not a
// decision: run takes no messages after its prompt (docs/live.md,
// "Approvals").
var ErrNotDecision = errors.New(`run takes no messages after its PROMPT: a stdin line must be a decision, {"approve":"CALL_ID","digest":"…"} or {"deny":"CALL_ID","note":"…"}`)

// StdinDecides says whether run reads decision lines from its text stdin:
// with --json (jsonOut) and the prompt given as an argument — stdin then
// holds nothing else — so that a script can approve or deny the calls
// that wait (docs/live.md, "Approvals"). With the prompt on stdin (-, or
// no PROMPT) stdin is the prompt's; with --input-format json (jsonIn)
// every line is protocol input already.
func StdinDecides(args []string, jsonOut, jsonIn bool) bool {
	return jsonOut && !jsonIn && len(args) == 1 && args[0] != "-"
}

// ParseDecisionInput reads one protocol input line (protocol.ParseInput);
// with decisionsOnly (StdinDecides) a line that is not a decision object
// (protocol.IsDecision) is refused with ErrNotDecision, never taken as a
// message, an interjection or a cancel.
func ParseDecisionInput(line string, decisionsOnly bool) (protocol.Input, error) {
	if decisionsOnly && !protocol.IsDecision([]byte(line)) {
		return protocol.Input{}, ErrNotDecision
	}
	return protocol.ParseInput([]byte(line))
}
