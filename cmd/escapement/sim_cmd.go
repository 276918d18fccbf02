package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
	"github.com/spf13/cobra"
)

type simFlags struct {
	json, permute, recheck bool
	trace, perfetto        string
	// crashAt and idempotent reproduce a crashed run of the crash
	// property (docs/durable.md).
	crashAt      string
	idempotent   []string
	memoryBudget int // MiB
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
	fl := cmd.Flags()
	fl.BoolVar(&f.json, "json", false, "print one JSON object per scenario on stdout")
	fl.StringVar(&f.trace, "trace", "", "write the JSONL trace to FILE (one scenario) or into DIR as NAME.jsonl")
	fl.StringVar(&f.perfetto, "perfetto", "", "write a Perfetto/Chrome trace-event timeline to FILE (one scenario) or into DIR as NAME.json")
	fl.BoolVar(&f.permute, "permute", false, "permute events due at the same virtual instant, drawn from the seed")
	fl.BoolVar(&f.recheck, "recheck", true, "run each scenario twice and require identical trace hashes (I6)")
	fl.StringVar(&f.crashAt, "crash-at", "", "crash the host after these steps (comma-separated, ascending, from 1) and recover it from its log")
	fl.StringSliceVar(&f.idempotent, "idempotent", nil, "tools a recovery may run again (comma-separated)")
	memoryBudgetFlag(cmd, &f.memoryBudget)
	cmd.AddCommand(newReplayCmd(a), newSweepCmd(a), newExploreCmd(a))
	return cmd
}

// invariantRange names the numbered invariants the oracle checks, first to
// last ("I1–I24"), from the oracle's own list, so --help cannot fall behind
// it; "and liveness" when the list has the liveness check.
func invariantRange() string {
	var first, last, live string
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

// loadScenarios loads the scenarios at paths, or the embedded suite.
func loadScenarios(paths []string) ([]*scenario.Scenario, error) {
	ss, err := scenario.LoadPaths(paths)
	if len(paths) == 0 {
		ss, err = scenario.LoadFS(scenarios.FS, ".", "scenarios (embedded)")
	}
	if err != nil {
		return nil, &exitError{code: exitUsage, err: err}
	}
	return ss, nil
}

func (a *app) runSim(paths []string, f simFlags) error {
	budget, err := budgetBytes(f.memoryBudget)
	if err != nil {
		return err
	}
	opt := sim.Options{Permute: f.permute, Build: buildInfo(), Idempotent: f.idempotent, MemoryBudget: budget}
	if f.crashAt != "" {
		if opt.CrashAt, err = sim.ParseCrashAt(f.crashAt); err != nil {
			return usageErr("--crash-at: %v", err)
		}
	}
	ss, err := loadScenarios(paths)
	if err != nil {
		return err
	}
	for _, dir := range []string{f.trace, f.perfetto} {
		if dir != "" && len(ss) > 1 {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return usageErr("--trace/--perfetto: %v", err)
			}
		}
	}
	started := time.Now()
	var results []*sim.Result
	for _, s := range ss {
		c, err := sim.Check(s, opt, f.recheck, sim.Keep{Trace: f.trace != "", Perfetto: f.perfetto != ""})
		if errors.Is(err, sim.ErrBudget) {
			return &exitError{code: exitUsage, err: err} // the input is too big
		} else if err != nil {
			return err
		}
		a.logger.Debug("scenario", "name", s.Name, "passed", c.Passed, "events", c.Events, "sha256", c.TraceSHA256)
		if _, err := writeOut(f.trace, s.Name+".jsonl", len(ss) > 1, c.Trace); err != nil {
			return err
		}
		if _, err := writeOut(f.perfetto, s.Name+".json", len(ss) > 1, c.Perfetto); err != nil {
			return err
		}
		results = append(results, c.Result)
	}
	if f.json {
		err = sim.WriteJSON(a.out, results)
	} else {
		sim.WriteTable(a.out, results, time.Since(started))
	}
	if err == nil && sim.ExitCode(results) != 0 {
		return &exitError{code: exitCheckFailed}
	}
	return err
}

// writeOut writes data to target ("": nowhere), or when dir to target/name
// (creating the directory), and returns the path written.
func writeOut(target, name string, dir bool, data []byte) (string, error) {
	if target == "" {
		return "", nil
	}
	if dir {
		if err := os.MkdirAll(target, 0o755); err != nil {
			return "", err
		}
		target = filepath.Join(target, name)
	}
	if err := os.WriteFile(target, data, 0o644); err != nil {
		return "", fmt.Errorf("write %s: %w", target, err)
	}
	return target, nil
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
			data, err := userfile.Read(args[0], sim.MaxTraceBytes)
			if err != nil {
				return usageErr("%v", err)
			}
			res, timeline, err := sim.ReplayTimeline(data, budget, perfetto != "")
			if err != nil {
				return usageErr("%s: %v", args[0], err)
			}
			if _, err := writeOut(perfetto, "", false, timeline); err != nil {
				return usageErr("--perfetto: %v", err)
			}
			res.Write(a.out, args[0])
			if !res.Identical {
				return &exitError{code: exitCheckFailed}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&perfetto, "perfetto", "", "write the replayed run's spans as a Perfetto/Chrome trace-event timeline to FILE")
	memoryBudgetFlag(cmd, &mib)
	return cmd
}

// buildInfo names this binary in trace headers.
func buildInfo() string { return "escapement" }

// clip puts s on one line and cuts it to at most n bytes, at a rune
// boundary, marking the cut.
func clip(s string, n int) string {
	return textcut.Clip(strings.ReplaceAll(s, "\n", " "), n)
}

// inputError says on stderr, and as an error event with --json, that
// input line n was not acted on, and why.
func (lr *liveRun) inputError(n int, err error) {
	lr.say("stdin line %d: %v; it was not acted on", n, err)
	if lr.enc != nil {
		_ = lr.enc.Encode(protocol.ErrorEvent(protocol.SourceInput, n, err.Error()))
	}
}
