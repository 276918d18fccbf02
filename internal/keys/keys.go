// Package keys lists a map's keys in order: map iteration order must never
// reach an output of the simulator (I6, docs/semantics.md).
package keys

import (
	"cmp"
	"slices"
)

// Sorted returns m's keys in ascending order. (slices.Sorted(maps.Keys(m))
// grows its slice from nothing; the oracle and the canonical YAML call this
// on every run.)
func Sorted[K cmp.Ordered, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m { // determinism: sorted below
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
