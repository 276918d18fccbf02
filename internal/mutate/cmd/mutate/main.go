// Command mutate plants small realistic bugs in escapement's packages, one
// at a time, and reports which test layer catches each: for kernel/ and
// fsm/ the simulator layers (sim tests, embedded scenarios, a sweep) and the
// unit tests separately; for every other package its own tests. See
// docs/development.md, "Mutation testing", and package internal/mutate.
//
// It lives under internal/ rather than cmd/ because it is a tool for
// developing escapement, not something escapement ships, and because
// `mutate ./cmd/...` should not plant bugs in the tool itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/escapement/escapement/internal/mutate"
)

const (
	exitOK          = 0
	exitCheckFailed = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

type options struct {
	root, out, summary, equivalent, ops string
	gocache                             string
	sample, jobs                        int
	seed                                uint64
	timeoutFactor                       float64
	minTimeout                          time.Duration
	sweepSeeds, sweepDepth              int
	list, reportOnly                    bool
	failUnder                           float64
	patterns                            []string
}

// defaultPatterns are the kernel and the FSM. kernel/trace is left out: it
// is the trace's byte format, which the oracle does not judge (it checks
// behaviour, and compares a run's trace only with a rerun's); its unit
// tests do. Name it to include it.
var defaultPatterns = []string{"./kernel", "./fsm"}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: mutate [flags] [PACKAGES...]   (default ./kernel ./fsm)

Plants one small bug at a time in the packages' non-test files (through
go build -overlay; the working tree is never written) and runs the test
layers on each: for kernel/ and fsm/ the simulator layers (go test ./sim/...,
escapement sim, escapement sim sweep) and the unit tests (go test
./kernel/... ./fsm/...) separately; for any other package its own tests (and
cmd/escapement's for an adapters/ package). Writes one JSON line per mutant
to --out (a rerun skips mutants already there) and a Markdown summary.

Exit codes: 0 done, 1 a score below --fail-under, 2 usage or input error,
130 interrupted (the summary of what was judged is still written).

flags:
`)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.root, "root", ".", "the module root")
	fs.StringVar(&o.out, "out", "mutate-out/mutants.jsonl", "JSON Lines output, one record per mutant; mutants already in it are skipped")
	fs.StringVar(&o.summary, "summary", "", "Markdown summary (default: --out with .md)")
	fs.StringVar(&o.equivalent, "equivalent", "internal/mutate/equivalent.txt", "allow-list of equivalent mutants (relative to --root)")
	fs.StringVar(&o.gocache, "gocache", "auto",
		"build cache: auto (a fresh one for this run, removed at its end), go (go's own, which grows by tens of MB per mutant) or a directory (kept; one run at a time)")
	fs.StringVar(&o.ops, "ops", "", "comma-separated operators to use (default: all)")
	fs.IntVar(&o.sample, "sample", 0, "judge a deterministic sample of N mutants, stratified by package (0: all)")
	fs.Uint64Var(&o.seed, "seed", 1, "the sample's seed")
	fs.IntVar(&o.jobs, "jobs", max(1, runtime.GOMAXPROCS(0)/2), "mutants judged at once")
	fs.Float64Var(&o.timeoutFactor, "timeout-factor", 4, "a layer's time limit is this many times its unmutated duration...")
	fs.DurationVar(&o.minTimeout, "min-timeout", time.Minute, "...but at least this")
	fs.IntVar(&o.sweepSeeds, "sweep-seeds", mutate.DefaultSweep.Seeds, "worlds in the simulator layer's sweep")
	fs.IntVar(&o.sweepDepth, "sweep-depth", mutate.DefaultSweep.Depth, "depth of the sweep's worlds")
	fs.BoolVar(&o.list, "list", false, "print the selected mutants and exit")
	fs.BoolVar(&o.reportOnly, "report", false, "only rewrite the summary from --out (after editing the allow-list)")
	fs.Float64Var(&o.failUnder, "fail-under", 0, "exit 1 if a profile's score (percent) is below this")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.patterns = fs.Args()
	if len(o.patterns) == 0 {
		o.patterns = defaultPatterns
	}
	switch {
	case o.jobs < 1:
		return o, fmt.Errorf("--jobs must be at least 1, got %d", o.jobs)
	case o.sample < 0:
		return o, fmt.Errorf("--sample must not be negative, got %d", o.sample)
	case o.sweepSeeds < 1 || o.sweepDepth < 0:
		return o, fmt.Errorf("--sweep-seeds must be positive and --sweep-depth not negative")
	case o.timeoutFactor < 1:
		return o, fmt.Errorf("--timeout-factor must be at least 1, got %v", o.timeoutFactor)
	}
	if o.summary == "" {
		o.summary = strings.TrimSuffix(o.out, filepath.Ext(o.out)) + ".md"
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	started := time.Now()
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "mutate:", err)
		return exitUsage
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "mutate: "+format+"\n", a...)
		return code
	}
	eqPath := o.equivalent
	if !filepath.IsAbs(eqPath) {
		eqPath = filepath.Join(o.root, eqPath)
	}
	eqs, err := mutate.ReadEquivalents(eqPath)
	if err != nil {
		return fail(exitUsage, "--equivalent: %v", err)
	}
	var ops map[mutate.Operator]bool
	if o.ops != "" {
		ops = map[mutate.Operator]bool{}
		for _, s := range strings.Split(o.ops, ",") {
			op, err := mutate.ParseOperator(strings.TrimSpace(s))
			if err != nil {
				return fail(exitUsage, "--ops: %v", err)
			}
			ops[op] = true
		}
	}

	pkgs, err := mutate.Load(o.root, o.patterns...)
	if err != nil {
		return fail(exitUsage, "%v", err)
	}
	var all, allGenerated []*mutate.Mutant
	for _, p := range pkgs {
		for _, m := range mutate.Generate(p, mutate.ProjectExclusions()) {
			allGenerated = append(allGenerated, m)
			if ops == nil || ops[m.Op] {
				all = append(all, m)
			}
		}
	}
	selected := mutate.Sample(all, o.sample, o.seed)
	how := fmt.Sprintf("%d generated in %s; all %d judged", len(all), strings.Join(o.patterns, " "), len(all))
	if len(selected) < len(all) {
		how = fmt.Sprintf("%d generated in %s; a deterministic sample of %d (--sample %d --seed %d, stratified by package)",
			len(all), strings.Join(o.patterns, " "), len(selected), o.sample, o.seed)
	}
	if o.list {
		for _, m := range selected {
			fmt.Fprintf(stdout, "%s\t%s\n", m.ID(), m.Diff())
		}
		fmt.Fprintf(stderr, "mutate: %s\n", how)
		return exitOK
	}

	profileFor := mutate.ProjectProfiles(mutate.SweepPlan{Seeds: o.sweepSeeds, Depth: o.sweepDepth})
	profiles := []mutate.Profile{mutate.OracleProfile(mutate.SweepPlan{Seeds: o.sweepSeeds, Depth: o.sweepDepth}), mutate.PackageProfile(".")}
	ours := []string{o.out, o.summary}
	treeBefore := gitStatus(o.root, ours)
	tree := gitDescribe(o.root)
	var recs []*mutate.Record
	var runErr error
	var warnings []string
	if o.reportOnly {
		var all []*mutate.Record
		all, warnings, err = mutate.ReadRecords(o.out)
		if err != nil {
			return fail(exitUsage, "--out: %v", err)
		}
		latest := mutate.Latest(all)
		for _, m := range selected {
			if r, ok := latest[m.Key()]; ok {
				recs = append(recs, r)
			}
		}
	} else {
		if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
			return fail(exitUsage, "--out: %v", err)
		}
		gocache, cleanup, err := buildCache(o.gocache)
		if err != nil {
			return fail(exitUsage, "--gocache: %v", err)
		}
		defer cleanup()
		cfg := mutate.Config{
			Root: o.root, Profile: profileFor, Jobs: o.jobs, Out: o.out, Equivalents: eqs, GoCache: gocache,
			TimeoutFactor: o.timeoutFactor, MinTimeout: o.minTimeout, Log: stderr,
		}
		recs, runErr = mutate.Run(ctx, cfg, selected)
		if runErr != nil && !errors.Is(runErr, context.Canceled) {
			return fail(exitCheckFailed, "%v", runErr)
		}
	}
	if after := gitStatus(o.root, ours); after != treeBefore {
		warnings = append(warnings, "the working tree's `git status` changed during the run (something other than the overlay wrote to it):\n"+after)
	}
	if len(recs) < len(selected) {
		warnings = append(warnings, fmt.Sprintf("only %d of the %d selected mutants are judged in %s (run again to continue)", len(recs), len(selected), o.out))
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "mutate: warning:", w)
	}
	meta := mutate.ReportMeta{
		Command:  "go run ./internal/mutate/cmd/mutate " + strings.Join(args, " "),
		Tree:     tree,
		Selected: how,
		Warnings: warnings,
		Stale:    mutate.Stale(eqs, allGenerated),
	}
	if !o.reportOnly {
		meta.Wall = time.Since(started).Round(time.Second).String()
	}
	f, err := os.Create(o.summary)
	if err != nil {
		return fail(exitUsage, "--summary: %v", err)
	}
	if err := mutate.WriteReport(f, recs, profiles, eqs, meta); err != nil {
		f.Close()
		return fail(exitUsage, "--summary: %v", err)
	}
	if err := f.Close(); err != nil {
		return fail(exitUsage, "--summary: %v", err)
	}
	code := exitOK
	for _, p := range profiles {
		var mine []*mutate.Record
		for _, r := range recs {
			if r.Profile == p.Name {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			continue
		}
		t := mutate.Count(mine, p.Groups, eqs)
		fmt.Fprintf(stdout, "mutate: profile %s: %d judged, %d scored; killed by %s alone %d (%.1f%%)",
			p.Name, t.Judged, t.Scored, p.Groups[0], t.KilledFirst, t.Score())
		if len(p.Groups) > 1 {
			fmt.Fprintf(stdout, ", only by %s %d, survived every layer %d", strings.Join(p.Groups[1:], ","), t.KilledLater, t.Survived)
		}
		fmt.Fprintln(stdout)
		if o.failUnder > 0 && t.Score() < o.failUnder {
			code = exitCheckFailed
		}
	}
	fmt.Fprintf(stdout, "mutate: records %s, summary %s\n", o.out, o.summary)
	if runErr != nil {
		fmt.Fprintln(stderr, "mutate: interrupted; run the same command again to continue")
		return exitInterrupted
	}
	return code
}

// buildCache resolves --gocache: the directory to use ("" for go's own)
// and what to do when the run ends.
func buildCache(flag string) (dir string, cleanup func(), err error) {
	switch flag {
	case "go":
		return "", func() {}, nil
	case "auto":
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		base = filepath.Join(base, "escapement-mutate")
		if err := os.MkdirAll(base, 0o755); err != nil {
			return "", nil, err
		}
		dir, err := os.MkdirTemp(base, "go-build-")
		if err != nil {
			return "", nil, err
		}
		return dir, func() { os.RemoveAll(dir) }, nil
	}
	dir, err = filepath.Abs(flag)
	if err != nil {
		return "", nil, err
	}
	return dir, func() {}, os.MkdirAll(dir, 0o755)
}

// gitStatus is `git status --porcelain` without the lines naming our own
// output files.
func gitStatus(root string, ours []string) string {
	out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=all").Output()
	if err != nil {
		return ""
	}
	var keep []string
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		mine := false
		for _, p := range ours {
			if rel, err := filepath.Rel(root, p); err == nil && strings.HasSuffix(l, filepath.ToSlash(rel)) {
				mine = true
			}
		}
		if !mine && l != "" {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func gitDescribe(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	s := "commit " + strings.TrimSpace(string(out))
	if gitStatus(root, nil) != "" {
		s += " with uncommitted changes"
	}
	return s
}
