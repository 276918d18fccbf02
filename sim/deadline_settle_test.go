package sim

import "testing"

// TestTurnTimeoutSettlingInItsStep: an interjection cancels the stream just
// before the turn's deadline; the deadline fires while the restart waits
// out its debounce, with nothing in flight, so the turn times out and
// settles in one step. The oracle judges the timeout by that turn's
// deadline (it once read the deadline the turn's end had already cleared,
// and blamed a correct kernel: found by the crash soak, uncrashed).
func TestTurnTimeoutSettlingInItsStep(t *testing.T) {
	s := mustLoad(t, "name: turn-timeout-settles-in-its-step\nlimits: {turn_timeout: 3s}\nagents:\n  main:\n"+
		"    - {text: one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen, rate: 5}\n    - {text: adjusted}\n"+
		"inputs:\n  - {at: 0s, submit: go}\n  - {at: 2940ms, interject: wait}\n")
	r := mustRun(t, s, Options{})
	if !r.Passed {
		t.Fatalf("violations: %v", r.Violations)
	}
	if got := r.Outcomes[RootScript]; got != "timed_out" || r.QuiescentAt.String() != "3s" {
		t.Fatalf("outcome %s, quiescent at %v; want timed_out at 3s", got, r.QuiescentAt)
	}
}
