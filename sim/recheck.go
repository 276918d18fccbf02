package sim

import (
	"fmt"

	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// Recheck runs s a second time with opts (its Trace and Observe dropped)
// and, when the trace differs from first's, adds an I6 violation to first
// (which then no longer passes): a core that consults anything but its
// events — the wall clock, a global counter, a map's iteration order — shows
// up as two traces of one scenario and seed.
func Recheck(s *scenario.Scenario, opts Options, first *Result) error {
	opts.Trace, opts.Observe = nil, nil
	again, err := Run(s.Clone(), opts)
	if err != nil {
		return fmt.Errorf("recheck of %s: %w", s.Name, err)
	}
	if again.TraceSHA256 != first.TraceSHA256 {
		first.Violations = append(first.Violations, oracle.Violation{Invariant: oracle.Deterministic, At: first.End,
			Detail: fmt.Sprintf("the same scenario and seed gave two traces: %s then %s", first.TraceSHA256, again.TraceSHA256)})
		first.Passed = false
	}
	return nil
}
