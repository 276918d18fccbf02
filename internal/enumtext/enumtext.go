// Package enumtext reads back the names the kernel's small enums (states,
// triggers, event, effect and lifecycle kinds, outcomes, reasons) are written
// as in traces and JSON, so every UnmarshalText is one call.
package enumtext

import (
	"fmt"
	"slices"
)

// Parse sets *p to the index of text in names; an unknown name is an error
// naming what was parsed, and leaves *p as it was.
func Parse[T ~uint8](p *T, names []string, text []byte, what string) error {
	i := slices.Index(names, string(text))
	if i < 0 {
		return fmt.Errorf("unknown %s %q", what, text)
	}
	*p = T(i)
	return nil
}
