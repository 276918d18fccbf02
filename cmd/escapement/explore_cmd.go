package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/sim/explore"
	"github.com/escapement/escapement/sim/pool"
	"github.com/escapement/escapement/sim/scenario"
	"github.com/spf13/cobra"
)

type exploreFlags struct {
	explore.Plan
	timeLimit time.Duration
	partial   bool
	out       string
	jobs      int
}

// Default scopes (docs/oracle.md, "Exhaustive exploration").
const (
	defaultExploreStates = 2_000_000
	defaultMovedInputs   = 2 // scenario mode: inputs one schedule moves
	defaultSmallInputs   = 4 // small-scope mode: inputs one schedule makes
	defaultSmallAgents   = 3
)

func newExploreCmd(a *app) *cobra.Command {
	var f exploreFlags
	cmd := &cobra.Command{
		Use:   "explore [FILE|DIR...]",
		Short: "Explore every order of same-instant events and every placement of the inputs",
		Long: `Explore scenarios exhaustively instead of sampling them: every order of the
events due at one virtual instant, and every placement of each user input at
every anchor the world offers — the instant of any event (a chunk, a stream's
end, a tool's result, a deadline, a child's start), before or after that
event, and --nudge before or after that instant — with the oracle after
every step. A state reached twice (the kernel's canonical state and the
simulator's pending work) is explored once; orders that only swap chunks of
disjoint subtrees are skipped (sleep sets). With no PATH the embedded
scenarios are explored.

Scope: --max-inputs is how many of a scenario's inputs one schedule may move
off their scripted instant (-1: all; the others keep it). --small-scope
explores generated worlds instead: every tree of at most --agents agents
drawn from five reply shapes, with every sequence of at most --max-inputs
inputs (a submission, an interjection, a cancel of any agent). --family
explores the everyday family: generated scenarios of two or three agents, a
tool, streams of 2, 5 or 10 chunks and 1, 3, 5 or 7 inputs (to measure how
exploration scales).

Expectations: a scenario's expect is judged at the end of every schedule
that keeps each input at its scripted instant (every order of the events
due at one instant). Those it marks schedule_dependent are counted — the
output says on how many of those schedules each held — and the others must
hold on all of them.

Bounds: --max-states (per scenario) and --time (the whole run). A bound that
stops an exploration early is reported, and the exit code is 1 unless
--partial is given: "explored everything" is never claimed falsely.

A violation is shrunk and written to --out as a scenario file (with the
order of same-instant events in its schedule) that 'escapement sim FILE'
reproduces.

Exit codes: 0 every exploration finished with no violation, 1 a violation
or a bound stopped it (without --partial), 2 usage or input error, 130
interrupted (SIGINT or SIGTERM; the counts so far are printed).`,
		Example: `  escapement sim explore                          # every embedded scenario
  escapement sim explore scenarios/f14-*.yaml --max-inputs -1
  escapement sim explore --small-scope            # every world of ≤` + fmt.Sprint(defaultSmallAgents) + ` agents, ≤` + fmt.Sprint(defaultSmallInputs) + ` inputs
  escapement sim explore --small-scope --agents 2 --max-inputs 2 --time 1m
  escapement sim explore --family --jobs 1        # how exploration scales`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("max-inputs") {
				f.MaxInputs = defaultMovedInputs
				if f.SmallScope {
					f.MaxInputs = defaultSmallInputs
				}
			}
			if f.SmallScope && !cmd.Flags().Changed("nudge") {
				// Small worlds place inputs at the anchors' own instants
				// (before or after each event there): the nudges would
				// square the placements of four inputs.
				f.Nudge = 0
			}
			return a.runExplore(cmd.Context(), args, f)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&f.MaxStates, "max-states", defaultExploreStates, "stop a scenario's exploration after this many distinct states (0: no bound)")
	// The declared default is 0 and not printed: RunE sets the mode's own
	// default when the flag is not given, and the usage names both.
	fl.IntVar(&f.MaxInputs, "max-inputs", 0, fmt.Sprintf(
		"scenarios: inputs one schedule may move (-1: all; default %d); --small-scope: inputs one schedule makes (default %d)",
		defaultMovedInputs, defaultSmallInputs))
	fl.DurationVar(&f.timeLimit, "time", 0, "stop the whole exploration after this long (0: no bound)")
	fl.BoolVar(&f.partial, "partial", false, "exit 0 when a bound stopped an exploration early (the output still says so)")
	fl.StringVar(&f.out, "out", "explore-failures", "directory for the scenarios of violations found")
	fl.IntVar(&f.jobs, "jobs", runtime.NumCPU(), "scenarios explored in parallel")
	fl.DurationVar(&f.Nudge, "nudge", time.Millisecond, "how far before and after an anchor's instant an input is also placed (0: only at it, which --small-scope uses unless this is given)")
	fl.BoolVar(&f.SmallScope, "small-scope", false, "explore every small generated world instead of scenario files")
	fl.IntVar(&f.Agents, "agents", defaultSmallAgents, "--small-scope: most agents in a world (1..3)")
	fl.BoolVar(&f.Family, "family", false, "explore the generated everyday family (chunks × inputs × agents) instead of scenario files")
	return cmd
}

func (a *app) runExplore(ctx context.Context, paths []string, f exploreFlags) error {
	switch err := f.Validate(paths); {
	case err != nil:
		return usageErr("%v", err)
	case f.timeLimit < 0:
		return usageErr("--time must not be negative, got %v", f.timeLimit)
	case f.jobs < 1:
		return usageErr("--jobs must be at least 1, got %d", f.jobs)
	}
	var given []*scenario.Scenario
	if !f.Generated() {
		ss, err := loadScenarios(paths)
		if err != nil {
			return err
		}
		given = ss
	}
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return usageErr("--out: %v", err)
		}
	}
	ctx, interrupted, stopSignals := a.cancelOnSignal(ctx)
	defer stopSignals()
	if f.timeLimit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeLimit)
		defer cancel()
	}
	items := f.Items(given)
	bar := a.progressBar(len(items), "explore", "scenarios")
	started := time.Now()
	f.Run(ctx, items, explore.Host{Pool: pool.Pool{Jobs: f.jobs, Start: goWorker}, Now: time.Now, Progress: func(states int64, done int) {
		bar.set(done, fmt.Sprintf("explore: %d states", states))
	}})
	bar.finish()
	if it := explore.Failed(items); it != nil {
		return &exitError{code: exitCheckFailed, err: fmt.Errorf("%s: the exploration could not run: %w", it.Scenario.Name, it.Err)}
	}
	sum := explore.Summarize(f.Plan, items)
	sum.Wall = time.Since(started)
	var writeErr error
	for _, v := range sum.Found() {
		if f.out == "" {
			break
		}
		p, err := userfile.WriteNew(f.out, v.Scenario.Name+"-explore", ".yaml", v.Scenario.YAML())
		if err != nil {
			writeErr = err
			continue
		}
		sum.Files = append(sum.Files, p)
	}
	sum.Write(a.out)
	switch {
	case writeErr != nil:
		return usageErr("--out: %v", writeErr)
	case interrupted.Load():
		fmt.Fprintf(a.err, "escapement: explore interrupted after %d of %d scenario(s); not exhaustive\n", sum.Done, len(items))
		return &exitError{code: exitInterrupted}
	case sum.Violations > 0:
		return &exitError{code: exitCheckFailed}
	case sum.Stopped > 0 && !f.partial:
		fmt.Fprintf(a.err, "escapement: a bound stopped %d exploration(s) early: not exhaustive (--partial accepts that)\n", sum.Stopped)
		return &exitError{code: exitCheckFailed}
	}
	return nil
}
