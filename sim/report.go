package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/sim/oracle"
)

// This file is how `escapement sim` and `sim replay` print results: the
// table, the JSON Lines form (the CLI's contract, docs/scenarios.md) and a
// replay's verdict.

// WriteTable prints a row per result (its violations and, for a
// --crash-at run, its crashes under it), the events that led to each
// result's first violation, and a line of totals (wall is how long the
// runs took).
func WriteTable(w io.Writer, results []*Result, wall time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tRESULT\tQUIESCENT AT\tEVENTS\tAGENTS\tTRACE SHA-256")
	passed, events := 0, 0
	for _, r := range results {
		verdict := "FAIL"
		if r.Passed {
			verdict = "PASS"
			passed++
		}
		events += r.Events
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%s\n", r.Name, verdict, r.QuiescentAt, r.Events, r.Agents, r.TraceSHA256[:16])
		for _, v := range r.Violations {
			fmt.Fprintf(tw, "  %s\t@%v\t%s\t%s\n", v.Invariant, v.At, orDash(v.Agent), v.Detail)
		}
		writeCrashes(tw, r)
	}
	_ = tw.Flush()
	for _, r := range results { // the events that led to each scenario's first violation
		if len(r.Violations) == 0 || len(r.Violations[0].Recent) == 0 {
			continue
		}
		v := r.Violations[0]
		fmt.Fprintf(w, "\n%s: the events before %s:\n", r.Name, v.Invariant)
		for _, e := range v.Recent {
			fmt.Fprintf(w, "    %s\n", e)
		}
	}
	fmt.Fprintf(w, "\n%d scenario(s): %d passed, %d failed; %d events in %v\n", len(results), passed, len(results)-passed, events, wall.Round(time.Millisecond))
}

// writeCrashes says, for a --crash-at run, how each crash changed the
// story and which expectations the changed story no longer meets: those
// do not fail the run (docs/semantics.md, "Expectations under a crash").
func writeCrashes(tw io.Writer, r *Result) {
	for _, c := range r.Crashes {
		if len(c.Changed) == 0 {
			fmt.Fprintf(tw, "  crash\t@%v\t-\tafter step %d: the recovery changed nothing; every expectation judged\n", c.At, c.After)
		}
		for _, what := range c.Changed {
			fmt.Fprintf(tw, "  crash\t@%v\t-\tafter step %d: %s\n", c.At, c.After, what)
		}
	}
	for _, v := range r.CrashChanged {
		fmt.Fprintf(tw, "  changed\t@%v\t%s\t%s (not judged: a crash changed the story)\n", v.At, orDash(v.Agent), v.Detail)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// jsonResult is the --json shape (the CLI's contract, docs/scenarios.md).
type jsonResult struct {
	Name        string             `json:"name"`
	Passed      bool               `json:"passed"`
	Violations  []oracle.Violation `json:"violations"`
	Outcomes    map[string]string  `json:"outcomes"`
	LLMRequests map[string]int     `json:"llm_requests"`
	QuiescentAt string             `json:"quiescent_at"`
	Events      int                `json:"events"`
	TraceSHA256 string             `json:"trace_sha256"`
	// Crashes and CrashChanged are there only for a run with --crash-at
	// (docs/semantics.md, "Expectations under a crash").
	Crashes      []jsonCrash        `json:"crashes,omitempty"`
	CrashChanged []oracle.Violation `json:"crash_changed,omitempty"`
}

// jsonCrash is one crash of a --crash-at run and how it changed the story.
type jsonCrash struct {
	After   int      `json:"after"`
	At      string   `json:"at"`
	Changed []string `json:"changed"`
}

// WriteJSON prints one JSON object per result, one a line.
func WriteJSON(w io.Writer, results []*Result) error {
	enc := json.NewEncoder(w)
	for _, r := range results {
		violations := r.Violations
		if violations == nil {
			violations = []oracle.Violation{}
		}
		var crashes []jsonCrash
		for _, c := range r.Crashes {
			crashes = append(crashes, jsonCrash{After: c.After, At: c.At.String(), Changed: append([]string{}, c.Changed...)})
		}
		if err := enc.Encode(jsonResult{Name: r.Name, Passed: r.Passed, Violations: violations, Outcomes: r.Outcomes,
			LLMRequests: r.LLMRequests, QuiescentAt: r.QuiescentAt.String(), Events: r.Events, TraceSHA256: r.TraceSHA256,
			Crashes: crashes, CrashChanged: r.CrashChanged}); err != nil {
			return err
		}
	}
	return nil
}

// Write prints whether the trace in file reproduced: its lines and hash,
// or the first line that differs, each side clipped.
func (r *ReplayResult) Write(w io.Writer, file string) {
	if r.Identical {
		fmt.Fprintf(w, "%s: %s trace of %q reproduced: %d lines identical, sha256 %s\n", file, r.Source, r.Name, r.Lines, r.SHA256)
		return
	}
	fmt.Fprintf(w, "%s: %s trace of %q differs at line %d\n  recorded: %s\n  replayed: %s\n", file, r.Source, r.Name, r.FirstDiff, orNothing(clipLine(r.Want)), orNothing(clipLine(r.Got)))
}

// clipLine is a trace line shortened for a terminal, on one line.
func clipLine(s string) string { return textcut.Clip(strings.ReplaceAll(s, "\n", " "), 400) }

// orNothing marks a missing line in a replay diff.
func orNothing(s string) string {
	if s == "" {
		return "(nothing)"
	}
	return s
}
