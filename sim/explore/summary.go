package explore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// Summary adds up a batch's reports: what `escapement sim explore`
// prints.
type Summary struct {
	Plan  Plan
	Items []*Item
	// The reports' counts, added up (Depth the deepest).
	Schedules, States, Transitions, Revisits, Slept, Depth, Replays int
	// Violations counts the explorations that failed, Cut those a
	// violation stopped, Stopped those a bound stopped or that never ran,
	// Done those that ran.
	Violations, Cut, Stopped, Done int
	// Worlds and Sequences count the small-scope worlds and their input
	// sequences.
	Worlds, Sequences int
	// Digest combines every exploration's digest, in order.
	Digest string
	// Wall is how long the batch took; Files the scenarios of the
	// violations, written.
	Wall  time.Duration
	Files []string
}

// Summarize adds up the reports of p's items.
func Summarize(p Plan, items []*Item) *Summary {
	s := &Summary{Plan: p, Items: items}
	h := sha256.New()
	for _, it := range items {
		if p.SmallScope {
			s.Worlds++
			s.Sequences += it.Sequences
		}
		r := it.Report
		if r == nil {
			s.Stopped++
			continue
		}
		s.add(r)
		fmt.Fprintf(h, "%s %s\n", it.Scenario.Name, r.Digest)
	}
	s.Digest = hex.EncodeToString(h.Sum(nil))[:16]
	return s
}

// add counts one report.
func (s *Summary) add(r *Report) {
	s.Done++
	s.Schedules += r.Schedules
	s.States += r.States
	s.Transitions += r.Transitions
	s.Revisits += r.Revisits
	s.Slept += r.Slept
	s.Replays += r.Replays
	s.Depth = max(s.Depth, r.Depth)
	if !r.Passed() {
		s.Violations++
	}
	if r.Violation != nil {
		s.Cut++
	}
	if r.Stopped != "" {
		s.Stopped++
	}
}

// Write prints the summary: a row per exploration (with its first
// violation), the expectations that held on some schedules only, the
// files that reproduce the violations, and the totals.
func (s *Summary) Write(w io.Writer) {
	s.table(w)
	for _, it := range s.Items {
		if it.Report != nil {
			expectations(w, it)
		}
	}
	for _, p := range s.Files {
		fmt.Fprintf(w, "reproduce: escapement sim %s\n", p)
	}
	rate := 0.0
	if s.Wall > 0 {
		rate = float64(s.States) / s.Wall.Seconds()
	}
	what, scope := s.scope()
	fmt.Fprintf(w, "explore: %s, %s; %s: %d schedules, %d distinct states, %d transitions (%d merged, %d skipped by reduction), depth %d, %d violation(s), %d replays in %v (%.0f states/s); digest %s\n",
		what, scope, s.exhaustive(), s.Schedules, s.States, s.Transitions, s.Revisits, s.Slept, s.Depth, s.Violations, s.Replays, s.Wall.Round(time.Millisecond), rate, s.Digest)
}

// table is a row per exploration.
func (s *Summary) table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tRESULT\tSCHEDULES\tSTATES\tTRANSITIONS\tDEPTH\tTIME\tDIGEST")
	for _, it := range s.Items {
		r := it.Report
		if r == nil {
			fmt.Fprintf(tw, "%s\tNOT RUN\t-\t-\t-\t-\t-\t-\n", it.Scenario.Name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%v\t%s\n", it.Scenario.Name, resultOf(r), r.Schedules, r.States, r.Transitions, r.Depth, it.Took.Round(time.Millisecond), r.Digest)
		if v := r.Violation; v != nil {
			fmt.Fprintf(tw, "  %s\t@%v\t%s\t%s\n", v.First.Invariant, v.First.At, orDash(v.First.Agent), v.First.Detail)
		}
	}
	_ = tw.Flush()
}

// resultOf is a report's RESULT.
func resultOf(r *Report) string {
	switch {
	case !r.Passed():
		return "FAIL"
	case r.Stopped != "":
		return "PARTIAL (" + r.Stopped + ")"
	}
	return "PASS"
}

// expectations says on how many schedules each schedule-dependent
// expectation of an item held, and which held on none.
func expectations(w io.Writer, it *Item) {
	for _, e := range it.Report.Expectations {
		if e.ScheduleDependent {
			fmt.Fprintf(w, "%s: expect %s (schedule-dependent) held on %d of %d schedules with every input at its instant\n", it.Scenario.Name, e.Name, e.Held, e.Of)
		}
	}
	for _, e := range it.Report.Unmet() {
		fmt.Fprintf(w, "%s: FAIL: expect %s holds on no schedule (escapement sim shows it failing in the scenario's own order)\n", it.Scenario.Name, e.Name)
	}
}

// scope says what was explored and how far.
func (s *Summary) scope() (what, scope string) {
	p := s.Plan
	switch {
	case p.SmallScope:
		return fmt.Sprintf("%d small-scope worlds (trees of ≤%d agents) × input sequences of ≤%d inputs = %d worlds", s.Worlds, p.Agents, p.MaxInputs, s.Sequences),
			"every sequence placed anywhere"
	case p.Family:
		what = fmt.Sprintf("%d everyday scenario(s) (shapes %v × chunks %v × inputs %v)", len(s.Items), FamilyShapes, FamilyChunks, FamilyInputs)
	default:
		what = fmt.Sprintf("%d scenario(s)", len(s.Items))
	}
	if p.MaxInputs < 0 {
		return what, "every input movable"
	}
	return what, fmt.Sprintf("up to %d moved input(s) per schedule", p.MaxInputs)
}

// exhaustive says whether the batch explored everything.
func (s *Summary) exhaustive() string {
	switch {
	case s.Stopped > 0:
		return fmt.Sprintf("NOT exhaustive: %d stopped by a bound", s.Stopped)
	case s.Cut > 0:
		return fmt.Sprintf("NOT exhaustive: %d stopped at their first violation", s.Cut)
	}
	return "exhaustive"
}

// Found are the violations the explorations found with a scenario that
// reproduces it, in order.
func (s *Summary) Found() []*Violation {
	var out []*Violation
	for _, it := range s.Items {
		if it.Report != nil && it.Report.Violation != nil && it.Report.Violation.Scenario != nil {
			out = append(out, it.Report.Violation)
		}
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
