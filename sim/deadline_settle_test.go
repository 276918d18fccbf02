package sim

import (
	"strings"
	"testing"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

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
	if got := r.Outcomes[scenario.RootScript]; got != "timed_out" || r.QuiescentAt.String() != "3s" {
		t.Fatalf("outcome %s, quiescent at %v; want timed_out at 3s", got, r.QuiescentAt)
	}
}

// TestLateTurnTimeoutOfAnEndedTurn: the allowance above holds only in the
// step the turn ended. A loop that reports a turn timeout for its last
// turn steps later, past that turn's deadline, breaks I5.
func TestLateTurnTimeoutOfAnEndedTurn(t *testing.T) {
	s := mustLoad(t, "name: late-turn-timeout\nlimits: {turn_timeout: 1s}\nagents:\n  main:\n    - {text: quick answer}\n"+
		"inputs:\n  - {at: 0s, submit: go}\n  - {at: 3s, cancel: main}\n")
	core := broken(func(b *brokenCore) {
		b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
			out := b.inner(ev)
			if ev.Kind == kernel.EvCancel {
				v := b.View(0)
				out = append(out, emit(0, kernel.Lifecycle{Kind: kernel.LifeTimedOut, Reason: kernel.ReasonTurnTimeout, Turn: v.Turn, At: ev.At}))
			}
			return out
		}
	})
	r := mustRun(t, s, Options{Core: core})
	for _, v := range r.Violations {
		if v.Invariant == oracle.DeadlinesOnTime && strings.Contains(v.Detail, "turn timeout at 3s") {
			return
		}
	}
	t.Fatalf("a turn timeout 2 s after its turn ended passed I5: %v", r.Violations)
}
