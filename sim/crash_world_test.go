package sim

import (
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
)

// TestCrashSilencesEndedOps: a tool that ignores its cancel is abandoned
// after grace, its result still on its way (a late answer); the host then
// crashes, and the result never arrives — the process that would have
// received it is gone — where without the crash it arrives late.
func TestCrashSilencesEndedOps(t *testing.T) {
	s := mustLoad(t, "name: crash-silences-ended-ops\nagents:\n  main:\n    - calls: [{tool: stuck, args: {n: 1}}]\n"+
		"tools:\n  stuck: {duration: 30s, on_cancel: ignore, result: late}\n"+
		"inputs:\n  - {at: 0s, submit: go}\n  - {at: 500ms, cancel: main}\n")
	for _, crash := range []bool{false, true} {
		recovered, results := false, 0
		m, err := New(s, Options{Durable: true, Observe: func(st StepInfo) {
			switch st.Event.Kind {
			case kernel.EvRecover:
				recovered = true
			case kernel.EvToolResult:
				if recovered || !crash {
					results++
				}
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		if crash {
			m.Advance(5 * time.Second)
			m.Recover()
		}
		r, err := m.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if !r.Passed {
			t.Fatalf("crash %v: %v", crash, r.Violations)
		}
		if want := map[bool]int{false: 1, true: 0}[crash]; results != want {
			t.Fatalf("crash %v: %d tool result(s) delivered (after the recovery), want %d", crash, results, want)
		}
	}
}
