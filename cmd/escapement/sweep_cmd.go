package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/scenario"
	"github.com/escapement/escapement/sim/sweep"
	"github.com/spf13/cobra"
)

// sweepGCPercent is the collector's target while a sweep runs (see runSweep).
const sweepGCPercent = 400

type sweepFlags struct {
	seeds, from, depth, jobs, recheck int
	crashEvery                        int
	shard, out, summary               string
	// core is the agent loop under test (nil: the kernel); set by tests.
	core sim.CoreFactory
}

func newSweepCmd(a *app) *cobra.Command {
	var f sweepFlags
	cmd := &cobra.Command{
		Use:   "sweep --seeds N [--from S] [--depth D] [--jobs J] [--shard i/n]",
		Short: "Run N generated worlds from consecutive seeds and report what they found",
		Long: `Generate N random worlds from consecutive seeds (the property suites'
generators, drawn deterministically from each seed), run each in the
simulator with the oracle, and report worlds/s, events/s, violations and how
often each reachability probe was reached. Every failing world is shrunk and
written to --out as a scenario file that 'escapement sim FILE' reproduces.
Every --recheck-every'th world runs twice and its trace hashes must match.

A sweep is deterministic: the same seeds give the same summary (and digest).
--shard i/n runs every n-th seed starting at the i-th; without it,
$JOB_COMPLETION_INDEX (a Kubernetes indexed job) with the shard count in
$ESCAPEMENT_SHARDS does the same. Write each shard's --summary and combine
them with 'escapement sim sweep merge'.

--crash-every N runs each passing world again once for every crash point
k = N, 2N, … up to its step count: the host crashes after step k (its
in-flight work is dropped), a fresh kernel is rebuilt from its write-ahead
log and gets the recovery, and the run goes on (docs/durable.md). Even
seeds declare every tool idempotent, odd seeds none. A failure is shrunk
with its crash point; the line printed for it carries --crash-at.

Exit codes: 0 clean, 1 a violation, a generated world that does not run,
or (for a whole sweep) a probe never reached that its worlds can reach (a
probe that needs a deeper delegation chain than --depth is skipped, and
the summary says so), 2 usage error (bad flags,
--out or --summary not writable), 130 interrupted (SIGINT or SIGTERM; the
partial summary is printed, no --summary written).`,
		Example: `  escapement sim sweep --seeds 10000 --depth 6 --jobs 2
  escapement sim sweep --seeds 100000 --from 1 --shard 3/8 --summary shard3.json --out failures/
  escapement sim sweep merge shard*.json
  escapement sim sweep --seeds 10000 --crash-every 3`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runSweep(cmd.Context(), f) },
	}
	cmd.Flags().IntVar(&f.seeds, "seeds", 1000, "number of worlds (consecutive seeds)")
	cmd.Flags().IntVar(&f.from, "from", 1, "first seed")
	cmd.Flags().IntVar(&f.depth, "depth", 6, fmt.Sprintf("deepest delegation chain a world may draw (0..%d)", gen.MaxDepth))
	cmd.Flags().IntVar(&f.jobs, "jobs", runtime.NumCPU(), "worlds run in parallel")
	cmd.Flags().StringVar(&f.shard, "shard", "", "run shard i of n (i/n); default $JOB_COMPLETION_INDEX/$ESCAPEMENT_SHARDS")
	cmd.Flags().StringVar(&f.out, "out", "sweep-failures", "directory for shrunk failing worlds")
	cmd.Flags().StringVar(&f.summary, "summary", "", "write the summary as JSON to FILE (for merge)")
	cmd.Flags().IntVar(&f.recheck, "recheck-every", 10, "re-run every Nth world and compare trace hashes (0: never)")
	cmd.Flags().IntVar(&f.crashEvery, "crash-every", 0, "also run each world crashed after step N, 2N, … (one crash per run), recovered from its log (even seeds: every tool idempotent; odd: none; 0: never)")
	cmd.AddCommand(newSweepMergeCmd(a))
	return cmd
}

// shardFromEnv reads a Kubernetes indexed job's shard.
func shardFromEnv() (string, error) {
	idx, ok := os.LookupEnv("JOB_COMPLETION_INDEX")
	if !ok {
		return "", nil
	}
	n, ok := os.LookupEnv("ESCAPEMENT_SHARDS")
	if !ok {
		return "", fmt.Errorf("JOB_COMPLETION_INDEX=%s is set but ESCAPEMENT_SHARDS (the shard count) is not", idx)
	}
	return idx + "/" + n, nil
}

func (a *app) runSweep(ctx context.Context, f sweepFlags) error {
	p := sweep.Plan{From: f.from, Seeds: f.seeds, Depth: f.depth, Shards: 1, RecheckEvery: f.recheck, CrashEvery: f.crashEvery}
	shard := f.shard
	if shard == "" {
		s, err := shardFromEnv()
		if err != nil {
			return usageErr("%v", err)
		}
		shard = s
	}
	if shard != "" {
		i, n, err := sweep.ParseShard(shard)
		if err != nil {
			return usageErr("--shard: %v", err)
		}
		p.Shard, p.Shards = i, n
	}
	if err := p.Validate(); err != nil {
		return usageErr("%v", err)
	}
	if f.jobs < 1 {
		return usageErr("--jobs must be at least 1, got %d", f.jobs)
	}
	ctx, interrupted, stopSignals := a.cancelOnSignal(ctx)
	defer stopSignals()
	// A world is a few hundred KB of garbage once it is summarised, and the
	// live heap stays a few MB, so at the default GOGC the collector runs
	// every few dozen worlds and costs about a fifth of the sweep's CPU;
	// sweepGCPercent trades about 10 MB for most of it. GOGC in the
	// environment still decides when set.
	if _, set := os.LookupEnv("GOGC"); !set {
		defer debug.SetGCPercent(debug.SetGCPercent(sweepGCPercent))
	}
	bar, added := a.progressBar(len(p.SeedList()), "sweep", "worlds"), 0
	var outErr error
	save := func(s *scenario.Scenario) (string, error) {
		file, err := writeOut(f.out, s.Name+".yaml", true, s.YAML())
		if err != nil {
			outErr = err
		}
		return file, err
	}
	started := time.Now()
	sum, runErr := sweep.Pool{Jobs: f.jobs, Core: f.core, Start: goWorker}.Sweep(ctx, p, save, func() { added++; bar.set(added, "") })
	sum.Wall = time.Since(started)
	bar.finish()
	var worldErr *sweep.WorldError
	switch {
	case errors.As(runErr, &worldErr):
		return &exitError{code: exitCheckFailed, err: fmt.Errorf("a generated world does not run, a generator or simulator bug (reproduce: escapement sim sweep --from %d --seeds 1 --depth %d%s): %w",
			worldErr.Seed, p.Depth, p.SweepFlags(), worldErr.Err)}
	case outErr != nil:
		return usageErr("--out: %v", outErr)
	case interrupted.Load() || runErr != nil:
		sum.Write(a.out, f.jobs)
		fmt.Fprintf(a.err, "escapement: sweep interrupted after %d of %d worlds\n", sum.Worlds, len(p.SeedList()))
		return &exitError{code: exitInterrupted}
	}
	if f.summary != "" {
		b, _ := json.MarshalIndent(sum, "", "  ")
		if err := os.WriteFile(f.summary, append(b, '\n'), 0o644); err != nil {
			return usageErr("--summary: %v", err)
		}
	}
	sum.Write(a.out, f.jobs)
	if len(sum.Failures) > 0 || (p.Shards == 1 && len(sum.Unreached()) > 0) {
		return &exitError{code: exitCheckFailed}
	}
	return nil
}

func newSweepMergeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "merge SUMMARY...",
		Short: "Combine the summaries of a sharded sweep",
		Long: `Combine shard summaries (sweep --summary) of one plan into the summary one
machine would have produced: counts, failures and probes add up, digests
combine. Fails when a shard is missing or given twice, on any violation, and
when a probe was never reached.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var parts []*sweep.Summary
			for _, path := range args {
				b, err := os.ReadFile(path)
				if err != nil {
					return usageErr("%v", err)
				}
				var s sweep.Summary
				if err := json.Unmarshal(b, &s); err != nil {
					return usageErr("%s: %v", path, err)
				}
				parts = append(parts, &s)
			}
			m, err := sweep.Merge(parts)
			if err != nil {
				return usageErr("%v", err)
			}
			m.Write(a.out, 0)
			if !m.Complete() {
				fmt.Fprintf(a.out, "incomplete: shards %v of %d merged, %d of %d worlds\n", m.ShardsMerged, m.Plan.Shards, m.Worlds, m.Plan.Seeds)
				return &exitError{code: exitCheckFailed}
			}
			if len(m.Failures) > 0 || len(m.Unreached()) > 0 {
				return &exitError{code: exitCheckFailed}
			}
			return nil
		},
	}
}
