package live

import "fmt"

// panicText describes a recovered panic for a result or an error.
func panicText(what string, v any) string { return fmt.Sprintf("%s panicked: %v", what, v) }
