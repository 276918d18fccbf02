package headless

import (
	"errors"
	"testing"

	"github.com/escapement/escapement/kernel"
)

func TestOutcomeError(t *testing.T) {
	if err := OutcomeError(kernel.Lifecycle{Outcome: kernel.OutcomeCompleted}); err != nil {
		t.Fatalf("completed: %v; want nil", err)
	}
	for outcome, want := range map[kernel.Outcome]int{kernel.OutcomeInterrupted: 130, kernel.OutcomeFailed: 1} {
		var ee *ExitError
		if err := OutcomeError(kernel.Lifecycle{Outcome: outcome}); !errors.As(err, &ee) || ee.Code != want {
			t.Errorf("%v: %v; want exit %d", outcome, err, want)
		}
	}
}
