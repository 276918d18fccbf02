package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/kernel/trace"
	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
	"github.com/spf13/cobra"
)

type simFlags struct {
	json     bool
	trace    string
	perfetto string
	permute  bool
	recheck  bool
	// crashAt and idempotent reproduce a crashed run of the crash
	// property (docs/durable.md): crash the host after these steps, with
	// these tools safe to run again.
	crashAt    string
	idempotent []string
	// memoryBudget is a run's memory budget in MiB (sim.Options).
	memoryBudget int
}

// memoryBudgetFlag registers --memory-budget on a command that runs
// scenarios.
func memoryBudgetFlag(cmd *cobra.Command, mib *int) {
	cmd.Flags().IntVar(mib, "memory-budget", sim.DefaultMemoryBudget>>20, "stop a run (exit 2) once it holds this many `MiB` by the simulator's count: a small scenario or trace can ask for a huge tree")
}

// budgetBytes checks a --memory-budget value and returns it in bytes.
func budgetBytes(mib int) (int64, error) {
	if mib < 1 || mib > 1<<20 {
		return 0, usageErr("--memory-budget must be in 1..%d MiB, got %d", 1<<20, mib)
	}
	return int64(mib) << 20, nil
}

func newSimCmd(a *app) *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim [PATH...]",
		Short: "Run scenarios in the deterministic simulator",
		Long: `Run scenario files in the deterministic simulator: virtual time, scripted
models and tools, injected faults, and the invariant oracle checked after
every step (` + invariantRange() + `). A PATH is a scenario file or a directory
of *.yaml files; with none, the built-in suite embedded in the binary runs.

Each scenario runs twice and the two traces' SHA-256 must match (I6); the
hash is printed so any run can be reproduced and compared.

Exit codes: 0 every scenario passed, 1 an expectation or invariant failed,
2 bad input (the message names file:line).`,
		Example: `  escapement sim                              # the embedded suite
  escapement sim scenarios/f01-*.yaml --trace run.jsonl
  escapement sim my-scenarios/ --json | jq .
  escapement sim scenarios/f02-*.yaml --perfetto f02.json   # open in ui.perfetto.dev
  escapement sim replay run.jsonl`,
		RunE: func(cmd *cobra.Command, args []string) error { return a.runSim(args, f) },
	}
	cmd.Flags().BoolVar(&f.json, "json", false, "print one JSON object per scenario on stdout")
	cmd.Flags().StringVar(&f.trace, "trace", "", "write the JSONL trace to FILE (one scenario) or into DIR as NAME.jsonl")
	cmd.Flags().StringVar(&f.perfetto, "perfetto", "", "write a Perfetto/Chrome trace-event timeline to FILE (one scenario) or into DIR as NAME.json")
	cmd.Flags().BoolVar(&f.permute, "permute", false, "permute events due at the same virtual instant, drawn from the seed")
	cmd.Flags().BoolVar(&f.recheck, "recheck", true, "run each scenario twice and require identical trace hashes (I6)")
	cmd.Flags().StringVar(&f.crashAt, "crash-at", "", "crash the host after these steps (comma-separated, ascending, from 1) and recover it from its log")
	cmd.Flags().StringSliceVar(&f.idempotent, "idempotent", nil, "tools a recovery may run again (comma-separated)")
	memoryBudgetFlag(cmd, &f.memoryBudget)
	cmd.AddCommand(newReplayCmd(a), newSweepCmd(a), newExploreCmd(a))
	return cmd
}

// invariantRange names the numbered invariants the oracle checks, first to
// last ("I1–I24"), from the oracle's own list, so --help cannot fall behind
// it; "and liveness" when the list has the liveness check.
func invariantRange() string {
	var first, last string
	live := ""
	for _, inv := range oracle.Invariants() {
		switch {
		case inv == oracle.Liveness:
			live = " and liveness"
		case first == "":
			first, last = string(inv), string(inv)
		default:
			last = string(inv)
		}
	}
	return first + "–" + last + live
}

func (a *app) loadScenarios(paths []string) ([]*scenario.Scenario, error) {
	if len(paths) == 0 {
		return scenario.LoadFS(scenarios.FS, ".", "scenarios (embedded)")
	}
	return loadScenarioPaths(paths)
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

func jsonCrashes(cs []sim.Crash) []jsonCrash {
	var out []jsonCrash
	for _, c := range cs {
		out = append(out, jsonCrash{After: c.After, At: c.At.String(), Changed: append([]string{}, c.Changed...)})
	}
	return out
}

func (a *app) runSim(paths []string, f simFlags) error {
	if _, err := budgetBytes(f.memoryBudget); err != nil {
		return err
	}
	if f.crashAt != "" {
		if _, err := sim.ParseCrashAt(f.crashAt); err != nil {
			return usageErr("--crash-at: %v", err)
		}
	}
	ss, err := a.loadScenarios(paths)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	if (f.trace != "" || f.perfetto != "") && len(ss) > 1 {
		for _, dir := range []string{f.trace, f.perfetto} {
			if dir != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return usageErr("--trace/--perfetto: %v", err)
				}
			}
		}
	}
	started := time.Now()
	var results []*sim.Result
	events := 0
	for _, s := range ss {
		res, err := a.runScenario(s, f, len(ss) > 1)
		if err != nil {
			return err
		}
		results = append(results, res)
		events += res.Events
	}
	wall := time.Since(started)
	if f.json {
		enc := json.NewEncoder(a.out)
		for _, r := range results {
			if r.Violations == nil {
				r.Violations = []oracle.Violation{}
			}
			if err := enc.Encode(jsonResult{Name: r.Name, Passed: r.Passed, Violations: r.Violations, Outcomes: r.Outcomes,
				LLMRequests: r.LLMRequests, QuiescentAt: r.QuiescentAt.String(), Events: r.Events, TraceSHA256: r.TraceSHA256,
				Crashes: jsonCrashes(r.Crashes), CrashChanged: r.CrashChanged}); err != nil {
				return err
			}
		}
	} else {
		printTable(a.out, results)
		passed := 0
		for _, r := range results {
			if r.Passed {
				passed++
			}
		}
		fmt.Fprintf(a.out, "\n%d scenario(s): %d passed, %d failed; %d events in %v\n", len(results), passed, len(results)-passed, events, wall.Round(time.Millisecond))
	}
	if sim.ExitCode(results) != 0 {
		return &exitError{code: exitCheckFailed}
	}
	return nil
}

func (a *app) runScenario(s *scenario.Scenario, f simFlags, many bool) (*sim.Result, error) {
	var traceBuf bytes.Buffer
	budget, _ := budgetBytes(f.memoryBudget) // checked in runSim
	opts := sim.Options{Permute: f.permute, Build: buildInfo(), Idempotent: f.idempotent, MemoryBudget: budget}
	if f.crashAt != "" {
		opts.CrashAt, _ = sim.ParseCrashAt(f.crashAt) // checked in runSim
	}
	if f.trace != "" {
		opts.Trace = &traceBuf
	}
	var pf *sim.Perfetto
	if f.perfetto != "" {
		pf = sim.NewPerfetto(s.Name)
		opts.Observe = pf.Observe
	}
	res, err := sim.Run(s, opts)
	if errors.Is(err, sim.ErrBudget) {
		return nil, &exitError{code: exitUsage, err: err} // the input is too big
	}
	if err != nil {
		return nil, err
	}
	if f.recheck {
		if err := sim.Recheck(s, opts, res); err != nil {
			return nil, err
		}
	}
	a.logger.Debug("scenario", "name", s.Name, "passed", res.Passed, "events", res.Events, "sha256", res.TraceSHA256)
	if f.trace != "" {
		if _, err := writeOut(f.trace, s.Name+".jsonl", many, traceBuf.Bytes()); err != nil {
			return nil, err
		}
	}
	if pf != nil {
		var buf bytes.Buffer
		if err := pf.Write(&buf, res.End); err != nil {
			return nil, err
		}
		if _, err := writeOut(f.perfetto, s.Name+".json", many, buf.Bytes()); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// writeOut writes data to target, or when dir to target/name (creating the
// directory), and returns the path written.
func writeOut(target, name string, dir bool, data []byte) (string, error) {
	p := target
	if dir {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return "", err
		}
		p = filepath.Join(target, name)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", p, err)
	}
	return p, nil
}

func printTable(w io.Writer, results []*sim.Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tRESULT\tQUIESCENT AT\tEVENTS\tAGENTS\tTRACE SHA-256")
	for _, r := range results {
		verdict := "PASS"
		if !r.Passed {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%s\n", r.Name, verdict, r.QuiescentAt, r.Events, r.Agents, r.TraceSHA256[:16])
		for _, v := range r.Violations {
			fmt.Fprintf(tw, "  %s\t@%v\t%s\t%s\n", v.Invariant, v.At, orDash(v.Agent), v.Detail)
		}
		printCrashes(tw, r)
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
}

// printCrashes says, for a --crash-at run, how each crash changed the
// story and which expectations the changed story no longer meets: those
// do not fail the run (docs/semantics.md, "Expectations under a crash").
func printCrashes(tw io.Writer, r *sim.Result) {
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

func newReplayCmd(a *app) *cobra.Command {
	var (
		mib      int
		perfetto string
	)
	cmd := &cobra.Command{
		Use:   "replay TRACE",
		Short: "Re-run a recorded trace and check it reproduces byte for byte",
		Long: `Re-run what a JSONL trace recorded and compare bytes. A simulator trace
re-runs the scenario embedded in its header; a live trace (escapement run
--trace) feeds its recorded events to a fresh kernel. Prints the first
differing line when they differ. With --perfetto the replayed run's spans
(the ones a live run exports over OpenTelemetry) are written as a
Perfetto/Chrome timeline, for a live trace as for a simulated one.

The re-run has a memory budget (--memory-budget): a trace's header can ask
for a tree far bigger than the file, and such a replay stops with exit 2.

Exit codes: 0 identical, 1 different, 2 unreadable trace or over budget.`,
		Example: `  escapement run "fix the test" --trace run.jsonl
  escapement sim replay run.jsonl --perfetto run.json   # open in ui.perfetto.dev`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			budget, err := budgetBytes(mib)
			if err != nil {
				return err
			}
			data, err := userfile.Read(args[0], maxTraceBytes)
			if err != nil {
				return usageErr("%v", err)
			}
			var pf *sim.Perfetto
			var observe func(sim.StepInfo)
			if perfetto != "" {
				if pf, err = perfettoOf(data); err != nil {
					return usageErr("%s: %v", args[0], err)
				}
				observe = pf.Observe
			}
			res, err := sim.ReplayObserved(bytes.NewReader(data), budget, observe)
			if err != nil {
				return usageErr("%s: %v", args[0], err)
			}
			if pf != nil {
				var buf bytes.Buffer
				if err := pf.Write(&buf, res.End); err != nil {
					return err
				}
				if _, err := writeOut(perfetto, "", false, buf.Bytes()); err != nil {
					return usageErr("--perfetto: %v", err)
				}
			}
			if res.Identical {
				fmt.Fprintf(a.out, "%s: %s trace of %q reproduced: %d lines identical, sha256 %s\n", args[0], res.Source, res.Name, res.Lines, res.SHA256)
				return nil
			}
			fmt.Fprintf(a.out, "%s: %s trace of %q differs at line %d\n  recorded: %s\n  replayed: %s\n", args[0], res.Source, res.Name, res.FirstDiff, orNothing(clip(res.Want, 400)), orNothing(clip(res.Got, 400)))
			return &exitError{code: exitCheckFailed}
		},
	}
	cmd.Flags().StringVar(&perfetto, "perfetto", "", "write the replayed run's spans as a Perfetto/Chrome trace-event timeline to FILE")
	memoryBudgetFlag(cmd, &mib)
	return cmd
}

// perfettoOf starts the timeline of the run a trace recorded, configured
// as its header says.
func perfettoOf(data []byte) (*sim.Perfetto, error) {
	first, _, _ := bytes.Cut(data, []byte("\n"))
	hdr, err := trace.ReadHeader(first)
	if err != nil {
		return nil, err
	}
	cfg := hdr.Config()
	return sim.NewPerfetto(hdr.Name).WithSpans(spans.Config{RootName: cfg.RootName, DelegateTool: cfg.DelegateTool}), nil
}

// orNothing marks a missing line in a replay diff.
func orNothing(s string) string {
	if s == "" {
		return "(nothing)"
	}
	return s
}

// buildInfo names this binary in trace headers.
func buildInfo() string { return "escapement" }
