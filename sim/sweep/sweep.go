// Package sweep runs generated worlds by seed and aggregates what they found
// (docs/semantics.md, "The oracle"): the seeds a shard owns, one world's run (with an
// occasional determinism re-run and, on failure, a shrunk counterexample),
// and a Summary that shards merge into the same result one machine would
// have produced, and the Pool that runs a plan on several workers. It
// starts no goroutines: the Pool runs its workers through the Start func
// its host passes.
package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
	"pgregory.net/rapid"
)

// Plan is what a sweep covers.
type Plan struct {
	From   int `json:"from"`
	Seeds  int `json:"seeds"`
	Depth  int `json:"depth"`
	Shard  int `json:"shard"`
	Shards int `json:"shards"`
	// RecheckEvery re-runs every Nth world and compares trace hashes (I6);
	// 0 never.
	RecheckEvery int `json:"recheck_every"`
	// CrashEvery, when positive, also runs each world once per crash
	// point k = N, 2N, … up to its step count, its host crashed after step
	// k and recovered from its log (RunWorld, CrashOptions;
	// docs/durable.md); 0 never.
	CrashEvery int `json:"crash_every,omitempty"`
}

// Validate names the first bad field.
func (p Plan) Validate() error {
	switch {
	case p.Seeds < 1:
		return fmt.Errorf("seeds must be at least 1, got %d", p.Seeds)
	case p.Seeds > MaxSeeds:
		return fmt.Errorf("seeds must be at most %d (shard a larger sweep), got %d", MaxSeeds, p.Seeds)
	case p.From > math.MaxInt-(p.Seeds-1):
		// From+Seeds-1 would wrap around to negative seeds.
		return fmt.Errorf("from %d and seeds %d pass the largest seed, %d: the last seed would be %d+%d-1", p.From, p.Seeds, math.MaxInt, p.From, p.Seeds)
	case p.Depth < 0 || p.Depth > gen.MaxDepth:
		return fmt.Errorf("depth must be in 0..%d, got %d", gen.MaxDepth, p.Depth)
	case p.RecheckEvery < 0:
		return fmt.Errorf("recheck-every must not be negative, got %d", p.RecheckEvery)
	case p.CrashEvery < 0:
		return fmt.Errorf("crash-every must not be negative, got %d", p.CrashEvery)
	}
	return checkShard(p.Shard, p.Shards)
}

// MaxSeeds bounds a sweep's seeds: a plan lists the seeds it owns
// (SeedList), and a sweep of more worlds than this is sharded.
const MaxSeeds = 1 << 31

// checkShard is the one range check of a shard i of n.
func checkShard(i, n int) error {
	if n < 1 || i < 0 || i >= n {
		return fmt.Errorf("shard %d/%d: want 0 <= i < n", i, n)
	}
	return nil
}

// Rechecks reports whether seed's world runs twice: every RecheckEvery'th
// seed of the whole plan counted from From, so a shard rechecks exactly the
// seeds a whole sweep would.
func (p Plan) Rechecks(seed int) bool {
	return p.RecheckEvery > 0 && (seed-p.From)%p.RecheckEvery == 0
}

// ParseShard parses "i/n".
func ParseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("shard %q: want i/n with 0 <= i < n", s)
	}
	return i, n, checkShard(i, n)
}

// SeedList is the seeds this shard owns: From..From+Seeds-1, every Shards-th
// starting at the Shard-th.
func (p Plan) SeedList() []int {
	var out []int
	for k := p.Shard; k < p.Seeds; k += p.Shards {
		out = append(out, p.From+k)
	}
	return out
}

// Generator is the world generator of a plan (one per worker: each call to
// Example builds its own state, but a generator per goroutine keeps that
// obviously true).
func (p Plan) Generator() *rapid.Generator[*scenario.Scenario] {
	return gen.World(gen.DefaultOptions(p.Depth))
}

// CrashOptions are the options of seed's world s crashed once, after its
// k-th step: worlds of even seeds declare every tool idempotent (a
// recovery runs them again), odd seeds none (a recovery reports them lost).
func CrashOptions(seed, k int, s *scenario.Scenario, core sim.CoreFactory) sim.Options {
	opt := sim.Options{Core: core, CrashAt: []int{k}}
	if seed%2 == 0 {
		// determinism: sorted
		opt.Idempotent = slices.Sorted(maps.Keys(s.Tools))
	}
	return opt
}

// SimFlags are the flags of `escapement sim FILE` that run a world as
// opt does ("" when it needs none).
func SimFlags(opt sim.Options) string {
	var flags []string
	if len(opt.CrashAt) > 0 {
		flags = append(flags, "--crash-at", sim.FormatCrashAt(opt.CrashAt))
	}
	if len(opt.Idempotent) > 0 {
		flags = append(flags, "--idempotent", strings.Join(opt.Idempotent, ","))
	}
	return strings.Join(flags, " ")
}

// SweepFlags are the flags of `escapement sim sweep` beyond seeds and
// depth that p needs to run a world again ("" when none).
func (p Plan) SweepFlags() string {
	if p.CrashEvery > 0 {
		return " --crash-every " + strconv.Itoa(p.CrashEvery)
	}
	return ""
}

// World is one seed's verdict.
type World struct {
	Seed       int
	Events     int
	Hash       string
	Probes     map[oracle.Probe]int
	Violations []oracle.Violation
	// Shrunk is the smallest failing world found (nil when it passed).
	Shrunk *scenario.Scenario
	// ShrunkAgents and ShrunkEvents size the shrunk world's run.
	ShrunkAgents, ShrunkEvents int
	// SimFlags are the flags `escapement sim` needs to run the shrunk
	// world as the sweep did (SimFlags; "" when none).
	SimFlags string
	// Crashes counts the crashed runs of the world (Plan.CrashEvery).
	Crashes int
}

// ShrinkBudget bounds the runs spent shrinking one failing world.
const ShrinkBudget = 400

// RunWorld draws the world of seed, runs it (twice when p.Rechecks(seed)),
// and shrinks it on failure. With p.CrashEvery it then runs the world
// again once for each crash point k = N, 2N, … up to its step count,
// crashed after its k-th step and recovered from its log
// (docs/durable.md), until one fails; the world's hash then covers every
// run. core is the agent loop under test (nil: the kernel, its runs of
// this world sharing one state machine; a worker running many worlds
// passes sim.SequentialKernelCore to share one across them all).
func RunWorld(g *rapid.Generator[*scenario.Scenario], p Plan, seed int, core sim.CoreFactory) (World, error) {
	if core == nil {
		core = sim.SequentialKernelCore()
	}
	s := g.Example(seed)
	s.Name = "sweep-" + strconv.Itoa(seed)
	s.About = fmt.Sprintf("Generated by escapement sim sweep --from %d --seeds 1 --depth %d%s (seed %d).", seed, p.Depth, p.SweepFlags(), seed)
	opt := sim.Options{Core: core}
	r, err := sim.Run(s, opt)
	if err != nil {
		return World{}, fmt.Errorf("seed %d: %w", seed, err)
	}
	if p.Rechecks(seed) {
		if err := sim.Recheck(s, opt, r); err != nil {
			return World{}, fmt.Errorf("seed %d: %w", seed, err)
		}
	}
	w := World{Seed: seed, Events: r.Events, Hash: r.TraceSHA256, Probes: r.Probes, Violations: r.Violations}
	if len(w.Violations) == 0 && p.CrashEvery > 0 {
		h := sha256.New()
		h.Write([]byte(r.TraceSHA256))
		for k := p.CrashEvery; k <= r.Events; k += p.CrashEvery {
			copt := CrashOptions(seed, k, s, core)
			cr, err := sim.Run(s, copt)
			if err != nil {
				return World{}, fmt.Errorf("seed %d crashed after step %d: %w", seed, k, err)
			}
			w.Crashes++
			w.Events += cr.Events
			h.Write([]byte(cr.TraceSHA256))
			if len(cr.Violations) > 0 {
				w.Violations, opt = cr.Violations, copt
				break
			}
		}
		w.Hash = hex.EncodeToString(h.Sum(nil))
	}
	if len(w.Violations) == 0 {
		return w, nil
	}
	first := w.Violations[0]
	if first.Invariant == oracle.Deterministic {
		w.Shrunk = s // I6 shows only in a recheck, which a shrinker's runs do not make
	} else {
		w.Shrunk = sim.Shrink(s, func(c *scenario.Scenario) bool { return sim.Breaks(c, opt, first) }, ShrinkBudget)
	}
	w.Shrunk.About += " Shrunk; first violation: " + w.Violations[0].String()
	if w.SimFlags = SimFlags(opt); w.SimFlags != "" {
		w.Shrunk.About += " Run it with: escapement sim FILE " + w.SimFlags + "."
	}
	if rr, err := sim.Run(w.Shrunk, opt); err == nil {
		w.ShrunkAgents, w.ShrunkEvents = rr.Agents, rr.Events
	}
	return w, nil
}

// Failure is one failing world in a summary.
type Failure struct {
	Seed      int    `json:"seed"`
	Invariant string `json:"invariant"`
	Detail    string `json:"detail"`
	Agent     string `json:"agent,omitempty"`
	At        string `json:"at"`
	// File is where the shrunk world was written ("" when not written).
	File   string `json:"file,omitempty"`
	Agents int    `json:"shrunk_agents"`
	Events int    `json:"shrunk_events"`
	// Flags are the flags `escapement sim File` needs (SimFlags).
	Flags string `json:"flags,omitempty"`
}

// Summary is a sweep's (or a shard's) result. Everything but Wall is a
// function of the plan's seeds: the same seeds give the same summary.
type Summary struct {
	Plan   Plan `json:"plan"`
	Worlds int  `json:"worlds"`
	Events int  `json:"events"`
	// Crashes counts the crashed runs (Plan.CrashEvery).
	Crashes  int            `json:"crashes,omitempty"`
	Failures []Failure      `json:"failures"`
	Probes   map[string]int `json:"probes"`
	// Digest combines every world's trace hash; XOR of per-world digests,
	// so shards merge into the digest one machine would have computed.
	Digest string `json:"digest"`
	// Wall is how long the sweep took (the only nondeterministic field).
	Wall time.Duration `json:"wall_ns"`
	// Shards lists the shard indices merged into this summary.
	ShardsMerged []int `json:"shards_merged"`
}

// NewSummary starts an empty summary for p.
func NewSummary(p Plan) *Summary {
	s := &Summary{Plan: p, Probes: map[string]int{}, Digest: strings.Repeat("0", 64), ShardsMerged: []int{p.Shard}}
	for _, pr := range oracle.Probes() {
		s.Probes[string(pr)] = 0
	}
	return s
}

// worldDigest is the digest contribution of one world.
func worldDigest(seed int, hash string) []byte {
	d := sha256.Sum256([]byte(strconv.Itoa(seed) + ":" + hash))
	return d[:]
}

func xorHex(a string, b []byte) string {
	ab, _ := hex.DecodeString(a)
	for i := range ab {
		ab[i] ^= b[i]
	}
	return hex.EncodeToString(ab)
}

// Add folds one world into the summary (any order gives the same result).
func (s *Summary) Add(w World, file string) {
	s.Worlds++
	s.Events += w.Events
	s.Crashes += w.Crashes
	for p, n := range w.Probes { // determinism: sums
		s.Probes[string(p)] += n
	}
	s.Digest = xorHex(s.Digest, worldDigest(w.Seed, w.Hash))
	if len(w.Violations) > 0 {
		v := w.Violations[0]
		s.Failures = append(s.Failures, Failure{Seed: w.Seed, Invariant: string(v.Invariant), Detail: v.Detail, Agent: v.Agent, At: v.At.String(), File: file, Agents: w.ShrunkAgents, Events: w.ShrunkEvents, Flags: w.SimFlags})
		sort.Slice(s.Failures, func(i, j int) bool { return s.Failures[i].Seed < s.Failures[j].Seed })
	}
}

// Unreached lists the probes the plan's worlds can reach and never did,
// in report order: a probe that needs deeper worlds than the plan draws
// (oracle.Probe.MinDepth) is skipped instead, never required.
func (s *Summary) Unreached() []string {
	var out []string
	for _, p := range oracle.Probes() {
		if s.Probes[string(p)] == 0 && !Skips(s.Plan, p) {
			out = append(out, string(p))
		}
	}
	return out
}

// Skipped lists the probes the plan's worlds cannot reach, in report
// order (Skips).
func (s *Summary) Skipped() []string {
	var out []string
	for _, p := range oracle.Probes() {
		if Skips(s.Plan, p) {
			out = append(out, string(p))
		}
	}
	return out
}

// Skips reports whether p's worlds are too shallow to reach probe pr:
// it needs a delegation chain deeper than the plan's depth.
func Skips(p Plan, pr oracle.Probe) bool { return pr.MinDepth() > p.Depth }

// Complete reports whether every shard of the plan, and so every world, is
// in the summary.
func (s *Summary) Complete() bool {
	return len(s.ShardsMerged) == s.Plan.Shards && s.Worlds == s.Plan.Seeds
}

// Merge combines shard summaries of one plan into one summary: what a single
// machine running every seed would have reported (bar Wall, the slowest).
func Merge(parts []*Summary) (*Summary, error) {
	if len(parts) == 0 {
		return nil, errors.New("no summaries to merge")
	}
	base := parts[0].Plan
	base.Shard = 0
	if err := base.Validate(); err != nil {
		return nil, fmt.Errorf("summary 1: %w", err)
	}
	out := NewSummary(base)
	out.ShardsMerged = nil
	seen := map[int]bool{}
	for i, p := range parts {
		q := p.Plan
		if q.Shard = 0; q != base {
			return nil, fmt.Errorf("summary %d: plan %+v differs from the first summary's %+v", i+1, p.Plan, parts[0].Plan)
		}
		for _, sh := range p.ShardsMerged {
			if sh < 0 || sh >= q.Shards {
				return nil, fmt.Errorf("summary %d: shard %d/%d is not one of the plan's shards", i+1, sh, q.Shards)
			}
			if seen[sh] {
				return nil, fmt.Errorf("summary %d: shard %d/%d given twice", i+1, sh, q.Shards)
			}
			seen[sh] = true
			out.ShardsMerged = append(out.ShardsMerged, sh)
		}
		out.Worlds += p.Worlds
		out.Events += p.Events
		out.Crashes += p.Crashes
		out.Failures = append(out.Failures, p.Failures...)
		for k, v := range p.Probes { // determinism: sums
			out.Probes[k] += v
		}
		d, err := hex.DecodeString(p.Digest)
		if err != nil || len(d) != 32 {
			return nil, fmt.Errorf("summary %d: bad digest %q", i+1, p.Digest)
		}
		out.Digest = xorHex(out.Digest, d)
		out.Wall = max(out.Wall, p.Wall)
	}
	sort.Ints(out.ShardsMerged)
	sort.Slice(out.Failures, func(i, j int) bool { return out.Failures[i].Seed < out.Failures[j].Seed })
	return out, nil
}
