package gen

import "github.com/escapement/escapement/sim/scenario"

// baseFaultKinds are the fault kinds a world draws in its faults' draws:
// every kind but context_length, which is drawn with the world's context
// window after every other draw, so the worlds of existing seeds keep
// their faults (docs/oracle.md, "Property suites: random worlds, shrinking, sweeps").
func baseFaultKinds() []scenario.FaultKind {
	var out []scenario.FaultKind
	for _, k := range scenario.FaultKinds() {
		if k != scenario.FaultContextLength {
			out = append(out, k)
		}
	}
	return out
}
