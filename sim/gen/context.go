package gen

import (
	"slices"
	"sort"
	"time"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/sim/scenario"
	"pgregory.net/rapid"
)

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

// drawContext draws what a world says of tokens and compaction
// (docs/semantics.md, "Compaction"): a context window small enough that
// the short texts of generated scripts pass its threshold after a few
// exchanges (so sweeps compact often, and now and then a threshold leaves
// no room to ask for a summary and the turn ends context_exhausted), a
// server that counts more than the kernel's measure, agents whose server
// reports no usage, and the server's refusals as too long — of ordinary
// requests and of compactions — and other faults that hit only
// compactions. Drawn after every other draw of World, so the worlds of
// existing seeds keep what they drew (their window is drawn off first,
// which shrinking moves towards).
func drawContext(t *rapid.T, s *scenario.Scenario, faults bool) {
	s.Limits.ContextWindow = pick(t, []int{0, 0, 250, 200, 300, 400}, "context_window")
	if s.Limits.ContextWindow > 0 {
		s.Limits.CompactPercent = pick(t, []int{80, 90, 70, 50}, "compact_percent")
	}
	s.Usage.PromptExtra = pick(t, []int{0, 0, 0, 16}, "usage_prompt_extra")
	names := keys.Sorted(s.Agents)
	if drawBool(t, "usage_unreported") && intRange(t, 0, 3, "usage_unreported_on") == 3 {
		s.Usage.Unreported = []string{pick(t, names, "usage_unreported_agent")}
	}
	drawCompactInputs(t, s)
	if !faults {
		return
	}
	for n := pick(t, []int{0, 0, 0, 1, 2}, "context_faults"); n > 0; n-- {
		f := scenario.Fault{
			At:    grid * time.Duration(intRange(t, 0, 300, "context_fault_at")),
			Agent: pick(t, names, "context_fault_agent"),
			Fault: pick(t, []scenario.FaultKind{scenario.FaultContextLength, scenario.FaultContextLength, scenario.FaultStreamError, scenario.FaultHang, scenario.FaultRateLimit}, "context_fault_kind"),
		}
		// A context_length fault hits an ordinary request or a compaction;
		// the others only compactions (they hit requests in drawFaults).
		f.Compaction = f.Fault != scenario.FaultContextLength || drawBool(t, "context_fault_compaction")
		if f.Fault == scenario.FaultRateLimit {
			f.Attempts, f.RetryAfter = 1, ms(100)
		}
		s.Faults = append(s.Faults, f)
	}
}

// drawCompactInputs now and then places the compact input (chat's
// /compact) among the world's inputs, in time order: accepted between
// turns, refused while the root works.
func drawCompactInputs(t *rapid.T, s *scenario.Scenario) {
	for n := pick(t, []int{0, 0, 0, 1, 2}, "compacts"); n > 0; n-- {
		in := scenario.Input{At: grid * time.Duration(intRange(t, 0, 300, "compact_at")), Compact: true}
		if drawBool(t, "compact_focus") {
			in.Focus = "focus"
		}
		i := sort.Search(len(s.Inputs), func(i int) bool { return s.Inputs[i].At > in.At })
		s.Inputs = slices.Insert(s.Inputs, i, in)
	}
}
