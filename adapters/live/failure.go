package live

import (
	"errors"
	"fmt"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// failureOf classifies a Stream error for the kernel. A stream that fails
// without saying how is a stream error once chunks arrived (the kernel must
// not assume the answer is whole) and a server error before.
func failureOf(err error, chunks uint32) kernel.Failure {
	var fe *ports.FailureError
	if errors.As(err, &fe) && fe.Failure != kernel.FailureNone {
		return fe.Failure
	}
	if chunks > 0 {
		return kernel.FailureStream
	}
	return kernel.FailureServer
}

// panicText describes a recovered panic for a result or an error.
func panicText(what string, v any) string { return fmt.Sprintf("%s panicked: %v", what, v) }
