package mutate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Layer is one test command that judges every mutant of a profile.
// Exactly one of GoTest and Exec is set.
type Layer struct {
	Name  string // unique in its profile: sim-test, unit, ...
	Group string // layers of one group are summed up together: sim, unit, tests
	// GoTest holds the packages (and any extra flags) given to `go test`;
	// the runner adds -overlay, -count=1, -vet=off, -failfast and -timeout.
	GoTest []string
	// Exec is a command line; "{bin}" is the profile's Binary built with
	// the mutant, "{tmp}" the mutant's scratch directory and "{cpus}" the
	// cores one job may use.
	Exec []string
}

// Profile says which layers judge the mutants of a package.
type Profile struct {
	Name   string
	Title  string   // the report's heading
	Groups []string // in report order: the first is the one the score is about
	// Binary is the main package ("./cmd/escapement") built once per
	// mutant, with the mutant, for the Exec layers.
	Binary string
	Layers []Layer
}

// Config configures a run.
type Config struct {
	Root    string                // the module root; every command runs there
	Profile func(*Mutant) Profile // the layers for a mutant
	Jobs    int                   // mutants judged at once (at least 1)
	Out     string                // the JSON Lines file; records already in it are kept and their mutants skipped
	// Equivalents is the allow-list; a listed mutant still runs (a listed
	// mutant that some layer kills is worth knowing about) but is not scored.
	Equivalents []Equivalent
	// A layer's time limit is TimeoutFactor times its duration on the
	// unmutated tree, at least MinTimeout; `go test` layers get
	// CompileAllowance on top for building the mutant.
	TimeoutFactor    float64
	MinTimeout       time.Duration
	CompileAllowance time.Duration
	// GoCache, if set, is the build cache of every go command (GOCACHE);
	// the runner locks it for the run and deletes what mutants add to it
	// (see judgeAll). Empty: the caller's cache, which then grows by every
	// mutant's builds.
	GoCache string
	// Log gets one line per judged mutant and the baseline's timings.
	Log io.Writer
}

func (c *Config) defaults() {
	if c.Jobs < 1 {
		c.Jobs = 1
	}
	if c.TimeoutFactor <= 0 {
		c.TimeoutFactor = 4
	}
	if c.MinTimeout <= 0 {
		c.MinTimeout = time.Minute
	}
	if c.CompileAllowance <= 0 {
		c.CompileAllowance = 5 * time.Minute
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Run judges every mutant not already in cfg.Out, appending a record per
// mutant as soon as it is judged, and returns the records of all the given
// mutants (earlier runs' included). The working tree is never written:
// each mutant reaches the compiler through `go build -overlay`, from a
// scratch directory that is removed afterwards.
//
// First every layer runs once on the unmutated tree: it must pass (or
// every mutant would look killed), and its duration sets its time limit.
// On ctx's cancellation Run stops the running commands and returns what it
// has, with ctx's error.
func Run(ctx context.Context, cfg Config, mutants []*Mutant) ([]*Record, error) {
	cfg.defaults()
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return nil, err
	}
	cfg.Root = root
	old, warnings, err := ReadRecords(cfg.Out)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		fmt.Fprintln(cfg.Log, "mutate: warning:", w)
	}
	prev := Latest(old)
	done := map[string]*Record{}
	var todo []*Mutant
	retry := 0
	for _, m := range mutants {
		switch r, ok := prev[m.Key()]; {
		case !ok:
			todo = append(todo, m)
		case r.Incomplete():
			todo = append(todo, m)
			retry++
		default:
			done[m.Key()] = r
		}
	}
	fmt.Fprintf(cfg.Log, "mutate: %d mutant(s), %d already judged in %s, %d to run (%d of them again: a layer could not run) with %d job(s)\n",
		len(mutants), len(done), cfg.Out, len(todo), retry, cfg.Jobs)
	r := &runner{cfg: cfg, limits: map[string]time.Duration{}}
	if cfg.GoCache != "" && len(todo) > 0 {
		unlock, err := lockDir(cfg.GoCache)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	if len(todo) > 0 {
		if err := r.baseline(ctx, todo); err != nil {
			return nil, err
		}
		if err := r.snapshotCache(); err != nil {
			return nil, err
		}
		w, err := openRecords(cfg.Out)
		if err != nil {
			return nil, err
		}
		runErr := r.judgeAll(ctx, todo, w, done)
		if err := w.close(); err != nil && runErr == nil {
			runErr = err
		}
		if runErr != nil && !errors.Is(runErr, context.Canceled) {
			return nil, runErr
		}
		err = runErr
	}
	var out []*Record
	for _, m := range mutants {
		if rec, ok := done[m.Key()]; ok {
			out = append(out, rec)
		} else if rec, ok := prev[m.Key()]; ok {
			out = append(out, rec) // incomplete, and not judged again (interrupted)
		}
	}
	return out, err
}

type runner struct {
	cfg       Config
	limits    map[string]time.Duration // layer key → time limit
	cacheKeep map[string]bool          // the private build cache's files after the baseline
}

func layerKey(p Profile, l Layer) string {
	return p.Name + "\x00" + l.Name + "\x00" + strings.Join(l.GoTest, " ") + "\x00" + strings.Join(l.Exec, " ")
}

// baseline runs each distinct layer once on the unmutated tree.
func (r *runner) baseline(ctx context.Context, todo []*Mutant) error {
	tmp, err := os.MkdirTemp("", "mutate-baseline-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	built := map[string]bool{}
	for _, m := range todo {
		p := r.cfg.Profile(m)
		for _, l := range p.Layers {
			key := layerKey(p, l)
			if _, ok := r.limits[key]; ok {
				continue
			}
			if l.Exec != nil && !built[p.Binary] {
				o := r.command(ctx, 30*time.Minute, tmp, goArgs("build", "", "-o", binPath(tmp, p), p.Binary)...)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if o.exit != 0 {
					return fmt.Errorf("baseline: go build %s failed on the unmutated tree:\n%s", p.Binary, o.out.text())
				}
				built[p.Binary] = true
			}
			if l.GoTest != nil {
				// Build the tests first, so the timing below is of the
				// tests (a cold build cache would stretch the time limit).
				warm := append(goArgs("test", "", "-count=1", "-vet=off", "-run", "^$"), l.GoTest...)
				if o := r.command(ctx, 30*time.Minute, tmp, warm...); ctx.Err() != nil {
					return ctx.Err()
				} else if o.exit != 0 {
					return fmt.Errorf("baseline: the tests of layer %s do not build on the unmutated tree:\n%s", l.Name, o.out.text())
				}
			}
			o := r.runLayer(ctx, p, l, "", tmp, 30*time.Minute)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if o.exit != 0 {
				return fmt.Errorf("baseline: layer %s fails on the unmutated tree (every mutant would look killed); fix that first:\n%s",
					l.Name, o.out.text())
			}
			limit := time.Duration(float64(o.dur) * r.cfg.TimeoutFactor)
			limit = max(limit, r.cfg.MinTimeout).Round(time.Second)
			r.limits[key] = limit
			fmt.Fprintf(r.cfg.Log, "mutate: baseline %-14s %-8s passes in %v; time limit per mutant %v\n",
				l.Name, p.Name, o.dur.Round(100*time.Millisecond), limit)
		}
	}
	return nil
}

// trimBatch is how many mutants per job run between two trims of the
// private build cache.
const trimBatch = 8

// judgeAll runs the mutants on cfg.Jobs workers and writes each record as
// it is judged. With a private build cache it goes in batches and, between
// two, deletes what the batch added to the cache (each mutant leaves tens
// of megabytes of packages built with it that no later build reuses).
func (r *runner) judgeAll(ctx context.Context, todo []*Mutant, w *recordWriter, done map[string]*Record) error {
	batch := len(todo)
	if r.cfg.GoCache != "" {
		batch = r.cfg.Jobs * trimBatch
	}
	n := 0
	for start := 0; start < len(todo); start += batch {
		err := r.judgeBatch(ctx, todo[start:min(start+batch, len(todo))], len(todo), &n, w, done)
		if terr := r.trimCache(); terr != nil {
			fmt.Fprintln(r.cfg.Log, "mutate: warning: trimming the build cache:", terr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) judgeBatch(ctx context.Context, todo []*Mutant, total int, n *int, w *recordWriter, done map[string]*Record) error {
	work := make(chan *Mutant)
	type result struct {
		rec *Record
		err error
	}
	results := make(chan result)
	var wg sync.WaitGroup
	for range r.cfg.Jobs {
		wg.Go(func() {
			for m := range work {
				rec, err := r.judge(ctx, m)
				results <- result{rec, err}
			}
		})
	}
	go func() {
		defer close(work)
		for _, m := range todo {
			select {
			case work <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	// results closes once every worker has returned, so the loop below
	// waits for all of them.
	go func() {
		wg.Wait()
		close(results)
	}()
	var firstErr error
	for res := range results {
		if res.err != nil {
			if firstErr == nil && !errors.Is(res.err, context.Canceled) {
				firstErr = res.err
			}
			continue
		}
		*n++
		done[res.rec.Key()] = res.rec
		if err := w.write(res.rec); err != nil && firstErr == nil {
			firstErr = err
		}
		fmt.Fprintf(r.cfg.Log, "[%d/%d] %s\n", *n, total, progressLine(res.rec))
	}
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

// snapshotCache records the private build cache's files after the
// baseline: what every mutant's build reuses.
func (r *runner) snapshotCache() error {
	if r.cfg.GoCache == "" {
		return nil
	}
	r.cacheKeep = map[string]bool{}
	return filepath.WalkDir(r.cfg.GoCache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			r.cacheKeep[p] = true
		}
		return err
	})
}

// trimCache deletes the private cache's files the snapshot does not hold.
// No go command runs while it does.
func (r *runner) trimCache() error {
	if r.cfg.GoCache == "" || r.cacheKeep == nil {
		return nil
	}
	return filepath.WalkDir(r.cfg.GoCache, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || r.cacheKeep[p] {
			return err
		}
		return os.Remove(p)
	})
}

func progressLine(rec *Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d %s (%.0fs)", rec.File, rec.Line, rec.Op, rec.Seconds)
	if rec.Status == StatusUncompilable {
		b.WriteString(" uncompilable")
	}
	for _, l := range rec.Layers {
		fmt.Fprintf(&b, " %s=%s", l.Name, l.Result)
	}
	if rec.Equivalent != "" {
		b.WriteString(" [equivalent]")
	}
	fmt.Fprintf(&b, ": %s", rec.Diff())
	return b.String()
}

// judge builds and tests one mutant. It returns ctx's error if the run was
// cancelled while the mutant was being judged (the mutant is then not
// recorded).
func (r *runner) judge(ctx context.Context, m *Mutant) (*Record, error) {
	started := time.Now()
	p := r.cfg.Profile(m)
	rec := newRecord(m, p.Name)
	for _, e := range r.cfg.Equivalents {
		if e.Matches(m.File, m.Line, m.Col, m.Op, m.Before) {
			rec.Equivalent = e.Reason
		}
	}
	tmp, err := os.MkdirTemp("", "mutant-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	overlay, err := writeOverlay(tmp, m)
	if err != nil {
		return nil, err
	}
	// The compile check: the mutated package alone (its output thrown
	// away), then the profile's binary if a layer runs it.
	builds := [][]string{{"-o", os.DevNull, "./" + m.Dir}}
	if p.Binary != "" && slices.ContainsFunc(p.Layers, func(l Layer) bool { return l.Exec != nil }) {
		builds = append(builds, []string{"-o", binPath(tmp, p), p.Binary})
	}
	for _, b := range builds {
		o := r.command(ctx, r.cfg.CompileAllowance, tmp, goArgs("build", overlay, b...)...)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if o.exit != 0 && r.cfg.GoCache != "" && strings.Contains(o.out.text(), r.cfg.GoCache) {
			return nil, fmt.Errorf("%s: the build failed inside the build cache, not in the mutant:\n%s", m.ID(), o.out.head(8))
		}
		if o.exit != 0 {
			rec.Status = StatusUncompilable
			rec.CompileError = o.out.head(8)
			rec.Seconds = time.Since(started).Seconds()
			return rec, nil
		}
	}
	rec.Status = StatusRun
	for _, l := range p.Layers {
		limit := r.limits[layerKey(p, l)]
		o := r.runLayer(ctx, p, l, overlay, tmp, limit)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rec.Layers = append(rec.Layers, verdict(l, o, limit))
	}
	rec.Seconds = time.Since(started).Seconds()
	return rec, nil
}

// writeOverlay writes the mutated file and the overlay that maps the
// original path to it; it returns the overlay's path.
func writeOverlay(tmp string, m *Mutant) (string, error) {
	src := filepath.Join(tmp, "src", filepath.Base(m.Abs))
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(src, m.Source(), 0o644); err != nil {
		return "", err
	}
	b, err := json.Marshal(map[string]map[string]string{"Replace": {m.Abs: src}})
	if err != nil {
		return "", err
	}
	path := filepath.Join(tmp, "overlay.json")
	return path, os.WriteFile(path, b, 0o644)
}

// goArgs is a go command line; overlay may be empty (the baseline).
func goArgs(verb, overlay string, rest ...string) []string {
	args := []string{"go", verb}
	if overlay != "" {
		args = append(args, "-overlay", overlay)
	}
	return append(args, rest...)
}

// binPath is where the profile's binary is built in the scratch directory.
func binPath(tmp string, p Profile) string {
	return filepath.Join(tmp, "bin", filepath.Base(p.Binary))
}

// runLayer runs one layer; limit bounds the tests themselves (a `go test`
// layer also gets CompileAllowance to build them).
func (r *runner) runLayer(ctx context.Context, p Profile, l Layer, overlay, tmp string, limit time.Duration) outcome {
	if l.GoTest != nil {
		args := goArgs("test", overlay, "-count=1", "-vet=off", "-failfast", "-timeout", limit.String())
		return r.command(ctx, limit+r.cfg.CompileAllowance, tmp, append(args, l.GoTest...)...)
	}
	cpus := max(1, runtime.NumCPU()/r.cfg.Jobs)
	bin := binPath(tmp, p)
	argv := make([]string, len(l.Exec))
	for i, a := range l.Exec {
		a = strings.ReplaceAll(a, "{bin}", bin)
		a = strings.ReplaceAll(a, "{tmp}", tmp)
		argv[i] = strings.ReplaceAll(a, "{cpus}", fmt.Sprint(cpus))
	}
	return r.command(ctx, limit, tmp, argv...)
}

// verdict turns a layer's outcome into its result.
func verdict(l Layer, o outcome, limit time.Duration) LayerResult {
	res := LayerResult{Name: l.Name, Group: l.Group, Seconds: o.dur.Seconds()}
	switch {
	case o.timedOut || o.out.testTimedOut:
		res.Result = Timeout
		res.Detail = "no result within " + limit.String()
	case o.out.buildFailed:
		res.Result = Errored
		res.Detail = "tests did not build: " + o.out.head(4)
	case o.exit == 0:
		res.Result = Survived
	default:
		res.Result = Killed
		res.Detail = o.out.killedBy()
	}
	return res
}

// env is the environment of every command: the caller's, with scratch
// places for whatever a test or the simulator writes.
func (r *runner) env(tmp string) []string {
	scratch := filepath.Join(tmp, "tmp")
	_ = os.MkdirAll(scratch, 0o755)
	env := os.Environ()
	if r.cfg.GoCache != "" {
		env = append(env, "GOCACHE="+r.cfg.GoCache)
	}
	// A test that builds the program itself (cmd/escapement's end-to-end
	// tests run `go build`) must build the mutant too: the overlay also goes
	// into GOFLAGS, which every nested go command reads. (GOFLAGS is split
	// at spaces; a scratch path holding one is left out.)
	if ov := filepath.Join(tmp, "overlay.json"); !strings.ContainsAny(ov, " \t") {
		if _, err := os.Stat(ov); err == nil {
			env = append(env, strings.TrimSpace("GOFLAGS="+os.Getenv("GOFLAGS")+" -overlay="+ov))
		}
	}
	return append(env,
		"TMPDIR="+scratch,
		"RAPID_NOFAILFILE=true", // rapid would write testdata/rapid/... into the package directory
		"ESCAPEMENT_FAILURES="+filepath.Join(tmp, "failures"),
		"XDG_STATE_HOME="+filepath.Join(tmp, "state"),
	)
}
