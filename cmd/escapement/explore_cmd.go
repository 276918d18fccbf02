package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/explore"
	"github.com/escapement/escapement/sim/scenario"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

type exploreFlags struct {
	maxStates  int
	maxInputs  int
	timeLimit  time.Duration
	partial    bool
	out        string
	jobs       int
	nudge      time.Duration
	smallScope bool
	agents     int
	family     bool
	// core is the agent loop under test (nil: the kernel); set by tests.
	core sim.CoreFactory
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
				f.maxInputs = defaultMovedInputs
				if f.smallScope {
					f.maxInputs = defaultSmallInputs
				}
			}
			if f.smallScope && !cmd.Flags().Changed("nudge") {
				// Small worlds place inputs at the anchors' own instants
				// (before or after each event there): the nudges would
				// square the placements of four inputs.
				f.nudge = 0
			}
			return a.runExplore(cmd.Context(), args, f)
		},
	}
	cmd.Flags().IntVar(&f.maxStates, "max-states", defaultExploreStates, "stop a scenario's exploration after this many distinct states (0: no bound)")
	// The declared default is 0 and not printed: RunE sets the mode's own
	// default when the flag is not given, and the usage names both.
	cmd.Flags().IntVar(&f.maxInputs, "max-inputs", 0, fmt.Sprintf(
		"scenarios: inputs one schedule may move (-1: all; default %d); --small-scope: inputs one schedule makes (default %d)",
		defaultMovedInputs, defaultSmallInputs))
	cmd.Flags().DurationVar(&f.timeLimit, "time", 0, "stop the whole exploration after this long (0: no bound)")
	cmd.Flags().BoolVar(&f.partial, "partial", false, "exit 0 when a bound stopped an exploration early (the output still says so)")
	cmd.Flags().StringVar(&f.out, "out", "explore-failures", "directory for the scenarios of violations found")
	cmd.Flags().IntVar(&f.jobs, "jobs", runtime.NumCPU(), "scenarios explored in parallel")
	cmd.Flags().DurationVar(&f.nudge, "nudge", time.Millisecond, "how far before and after an anchor's instant an input is also placed (0: only at it, which --small-scope uses unless this is given)")
	cmd.Flags().BoolVar(&f.smallScope, "small-scope", false, "explore every small generated world instead of scenario files")
	cmd.Flags().IntVar(&f.agents, "agents", defaultSmallAgents, "--small-scope: most agents in a world (1..3)")
	cmd.Flags().BoolVar(&f.family, "family", false, "explore the generated everyday family (chunks × inputs × agents) instead of scenario files")
	return cmd
}

// exploreItem is one exploration to run.
type exploreItem struct {
	s        *scenario.Scenario
	alphabet []scenario.Input
	rep      *explore.Report
	err      error
	took     time.Duration // wall clock of its exploration
}

func (a *app) runExplore(ctx context.Context, paths []string, f exploreFlags) error {
	switch {
	case f.maxStates < 0:
		return usageErr("--max-states must not be negative, got %d", f.maxStates)
	case f.timeLimit < 0:
		return usageErr("--time must not be negative, got %v", f.timeLimit)
	case f.jobs < 1:
		return usageErr("--jobs must be at least 1, got %d", f.jobs)
	case f.nudge < 0:
		return usageErr("--nudge must not be negative, got %v", f.nudge)
	case f.smallScope && len(paths) > 0:
		return usageErr("--small-scope explores generated worlds; it takes no PATH (got %q)", paths[0])
	case f.family && len(paths) > 0:
		return usageErr("--family explores generated scenarios; it takes no PATH (got %q)", paths[0])
	case f.family && f.smallScope:
		return usageErr("--family and --small-scope are two different generated sets; give one")
	case f.smallScope && (f.agents < 1 || f.agents > 3):
		return usageErr("--agents must be in 1..3, got %d", f.agents)
	case f.smallScope && f.maxInputs < 0:
		return usageErr("--max-inputs must not be negative with --small-scope, got %d", f.maxInputs)
	case f.maxInputs < -1:
		return usageErr("--max-inputs must be -1 (all) or more, got %d", f.maxInputs)
	}
	var items []*exploreItem
	worlds, sequences := 0, 0
	if f.smallScope {
		for _, w := range explore.Worlds(f.agents) {
			items = append(items, &exploreItem{s: w.Scenario, alphabet: w.Alphabet})
			worlds++
			sequences += w.Sequences(f.maxInputs)
		}
	} else if f.family {
		for _, e := range explore.Family() {
			items = append(items, &exploreItem{s: e.Scenario()})
		}
	} else {
		ss, err := a.loadScenarios(paths)
		if err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		for _, s := range ss {
			items = append(items, &exploreItem{s: s})
		}
	}
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return usageErr("--out: %v", err)
		}
	}

	ctx, interrupted, stopSignals := a.cancelOnSignal(ctx)
	defer stopSignals()

	started := time.Now()
	var deadline time.Time
	if f.timeLimit > 0 {
		deadline = started.Add(f.timeLimit)
	}
	stop := func() bool {
		if ctx.Err() != nil {
			return true
		}
		if !deadline.IsZero() && time.Now().After(deadline) {
			return true
		}
		return false
	}

	var bar *progressbar.ProgressBar
	if fd, ok := a.err.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(fd.Fd())) {
		bar = progressbar.NewOptions(len(items), progressbar.OptionSetWriter(a.err), progressbar.OptionSetDescription("explore"),
			progressbar.OptionShowCount(), progressbar.OptionSetItsString("scenarios"), progressbar.OptionShowIts(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	var states atomic.Int64 // distinct states so far, for the bar
	var barMu sync.Mutex
	progress := func(delta int) {
		if bar == nil {
			return
		}
		barMu.Lock()
		defer barMu.Unlock()
		bar.Describe(fmt.Sprintf("explore: %d states", states.Load()))
		if delta > 0 {
			_ = bar.Add(delta)
		}
	}

	// A pool of jobs over the items, in order; each worker is joined.
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(f.jobs, len(items)) {
		wg.Add(1)
		go func() { // owned: wg.Wait below
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(items) || stop() {
					return
				}
				it := items[i]
				last := 0
				opt := explore.Options{Core: f.core, MaxStates: f.maxStates, MaxInputs: f.maxInputs, Alphabet: it.alphabet, Stop: stop,
					Nudge: f.nudge, Progress: func(r explore.Report) {
						states.Add(int64(r.States - last))
						last = r.States
						progress(0)
					}}
				if f.nudge == 0 {
					opt.Nudge = -1
				}
				began := time.Now()
				it.rep, it.err = explore.Scenario(it.s, opt)
				it.took = time.Since(began)
				if it.rep != nil {
					states.Add(int64(it.rep.States - last))
				}
				progress(1)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(started)
	if bar != nil {
		_ = bar.Finish()
	}

	for _, it := range items {
		if it.err != nil {
			return &exitError{code: exitCheckFailed, err: fmt.Errorf("%s: the exploration could not run: %w", it.s.Name, it.err)}
		}
	}
	sum := summarize(items)
	sum.wall = wall
	sum.worlds, sum.sequences = worlds, sequences
	var writeErr error
	for _, it := range items {
		if it.rep == nil || it.rep.Violation == nil || it.rep.Violation.Scenario == nil || f.out == "" {
			continue
		}
		p, err := writeFresh(f.out, it.rep.Violation.Scenario.Name+"-explore", it.rep.Violation.Scenario.YAML())
		if err != nil {
			writeErr = err
			continue
		}
		sum.files = append(sum.files, p)
	}
	printExplore(a.out, items, sum, f)
	switch {
	case writeErr != nil:
		return usageErr("--out: %v", writeErr)
	case interrupted.Load():
		fmt.Fprintf(a.err, "escapement: explore interrupted after %d of %d scenario(s); not exhaustive\n", sum.done, len(items))
		return &exitError{code: exitInterrupted}
	case sum.violations > 0:
		return &exitError{code: exitCheckFailed}
	case sum.stopped > 0 && !f.partial:
		fmt.Fprintf(a.err, "escapement: a bound stopped %d exploration(s) early: not exhaustive (--partial accepts that)\n", sum.stopped)
		return &exitError{code: exitCheckFailed}
	}
	return nil
}

// exploreSummary adds the reports up.
type exploreSummary struct {
	schedules, states, transitions, revisits, slept, depth, replays int
	violations, stopped, cut, done, worlds, sequences               int
	digest                                                          string
	wall                                                            time.Duration
	files                                                           []string
}

func summarize(items []*exploreItem) exploreSummary {
	var s exploreSummary
	h := sha256.New()
	for _, it := range items {
		r := it.rep
		if r == nil {
			s.stopped++
			continue
		}
		s.done++
		s.schedules += r.Schedules
		s.states += r.States
		s.transitions += r.Transitions
		s.revisits += r.Revisits
		s.slept += r.Slept
		s.replays += r.Replays
		s.depth = max(s.depth, r.Depth)
		if !r.Passed() {
			s.violations++
		}
		if r.Violation != nil {
			s.cut++
		}
		if r.Stopped != "" {
			s.stopped++
		}
		fmt.Fprintf(h, "%s %s\n", it.s.Name, r.Digest)
	}
	s.digest = hex.EncodeToString(h.Sum(nil))[:16]
	return s
}

func printExplore(w io.Writer, items []*exploreItem, s exploreSummary, f exploreFlags) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tRESULT\tSCHEDULES\tSTATES\tTRANSITIONS\tDEPTH\tTIME\tDIGEST")
	for _, it := range items {
		r := it.rep
		if r == nil {
			fmt.Fprintf(tw, "%s\tNOT RUN\t-\t-\t-\t-\t-\t-\n", it.s.Name)
			continue
		}
		verdict := "PASS"
		switch {
		case !r.Passed():
			verdict = "FAIL"
		case r.Stopped != "":
			verdict = "PARTIAL (" + r.Stopped + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%v\t%s\n", it.s.Name, verdict, r.Schedules, r.States, r.Transitions, r.Depth, it.took.Round(time.Millisecond), r.Digest)
		if v := r.Violation; v != nil {
			fmt.Fprintf(tw, "  %s\t@%v\t%s\t%s\n", v.First.Invariant, v.First.At, orDash(v.First.Agent), v.First.Detail)
		}
	}
	_ = tw.Flush()
	for _, it := range items {
		if it.rep == nil {
			continue
		}
		for _, e := range it.rep.Expectations {
			if !e.ScheduleDependent {
				continue
			}
			fmt.Fprintf(w, "%s: expect %s (schedule-dependent) held on %d of %d schedules with every input at its instant\n", it.s.Name, e.Name, e.Held, e.Of)
		}
		for _, e := range it.rep.Unmet() {
			fmt.Fprintf(w, "%s: FAIL: expect %s holds on no schedule (escapement sim shows it failing in the scenario's own order)\n", it.s.Name, e.Name)
		}
	}
	for _, p := range s.files {
		fmt.Fprintf(w, "reproduce: escapement sim %s\n", p)
	}
	scope := fmt.Sprintf("up to %d moved input(s) per schedule", f.maxInputs)
	if f.maxInputs < 0 {
		scope = "every input movable"
	}
	what := fmt.Sprintf("%d scenario(s)", len(items))
	switch {
	case f.smallScope:
		what = fmt.Sprintf("%d small-scope worlds (trees of ≤%d agents) × input sequences of ≤%d inputs = %d worlds", s.worlds, f.agents, f.maxInputs, s.sequences)
		scope = "every sequence placed anywhere"
	case f.family:
		what = fmt.Sprintf("%d everyday scenario(s) (shapes %v × chunks %v × inputs %v)", len(items), explore.FamilyShapes, explore.FamilyChunks, explore.FamilyInputs)
	}
	exhaustive := "exhaustive"
	switch {
	case s.stopped > 0:
		exhaustive = fmt.Sprintf("NOT exhaustive: %d stopped by a bound", s.stopped)
	case s.cut > 0:
		exhaustive = fmt.Sprintf("NOT exhaustive: %d stopped at their first violation", s.cut)
	}
	rate := 0.0
	if s.wall > 0 {
		rate = float64(s.states) / s.wall.Seconds()
	}
	fmt.Fprintf(w, "explore: %s, %s; %s: %d schedules, %d distinct states, %d transitions (%d merged, %d skipped by reduction), depth %d, %d violation(s), %d replays in %v (%.0f states/s); digest %s\n",
		what, scope, exhaustive, s.schedules, s.states, s.transitions, s.revisits, s.slept, s.depth, s.violations, s.replays, s.wall.Round(time.Millisecond), rate, s.digest)
}

// writeFresh writes data as DIR/NAME.yaml, or NAME-2.yaml, … when that
// exists: an earlier finding is never overwritten.
func writeFresh(dir, name string, data []byte) (string, error) {
	for n := 1; ; n++ {
		p := filepath.Join(dir, name+".yaml")
		if n > 1 {
			p = filepath.Join(dir, fmt.Sprintf("%s-%d.yaml", name, n))
		}
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = fh.Write(data)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", fmt.Errorf("write %s: %w", p, err)
		}
		return p, nil
	}
}
