package headless

import (
	"fmt"

	"github.com/escapement/escapement/kernel"
)

// ExitError carries a command's exit code through cobra's error return
// (docs/cli.md: 1 a check failed, 2 usage or input error, 130
// interrupted); Err, when set, is what the command prints.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// OutcomeError maps the root turn's end to the exit code: nil when it
// completed, 130 when it was interrupted, 1 otherwise.
func OutcomeError(l kernel.Lifecycle) error {
	switch l.Outcome {
	case kernel.OutcomeCompleted:
		return nil
	case kernel.OutcomeInterrupted:
		return &ExitError{Code: 130}
	default:
		return &ExitError{Code: 1}
	}
}
