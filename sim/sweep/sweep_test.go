package sweep

import (
	"slices"
	"testing"

	"github.com/escapement/escapement/internal/simtest"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

func TestSeedListShards(t *testing.T) {
	all := Plan{From: 5, Seeds: 10, Shards: 1}.SeedList()
	var union []int
	for i := 0; i < 3; i++ {
		union = append(union, Plan{From: 5, Seeds: 10, Shard: i, Shards: 3}.SeedList()...)
	}
	slices.Sort(union)
	if !slices.Equal(all, union) || len(all) != 10 || all[0] != 5 {
		t.Fatalf("shards %v do not partition %v", union, all)
	}
	for _, bad := range []string{"3/3", "-1/2", "1", "a/b", "0/0"} {
		if _, _, err := ParseShard(bad); err == nil {
			t.Errorf("shard %q accepted", bad)
		}
	}
}

// TestMergeEqualsWhole: shard summaries merge into exactly the summary of
// the whole sweep (digest, counts, probes, failures), in any order. Every
// recheck fails (the core's second run of a world differs), so the failures
// name exactly the seeds rechecked: shards must recheck the seeds the whole
// sweep does.
func TestMergeEqualsWhole(t *testing.T) {
	whole := Plan{From: 1, Seeds: 60, Depth: 4, Shards: 1, RecheckEvery: 7}
	run := func(p Plan) *Summary {
		s := NewSummary(p)
		g := p.Generator()
		for _, seed := range p.SeedList() {
			w, err := RunWorld(g, p, seed, secondRunDiffers())
			if err != nil {
				t.Fatal(err)
			}
			s.Add(w, "")
		}
		return s
	}
	w := run(whole)
	var rechecked, failed []int
	for seed := 1; seed <= 60; seed += 7 {
		rechecked = append(rechecked, seed)
	}
	for _, f := range w.Failures {
		if f.Invariant != "I6" {
			t.Fatalf("seed %d: %s %s; want only I6 from the rechecks", f.Seed, f.Invariant, f.Detail)
		}
		failed = append(failed, f.Seed)
	}
	if !slices.Equal(failed, rechecked) {
		t.Fatalf("whole sweep rechecked seeds %v, want %v", failed, rechecked)
	}
	var parts []*Summary
	for i := 2; i >= 0; i-- {
		p := whole
		p.Shard, p.Shards = i, 3
		parts = append(parts, run(p))
	}
	m, err := Merge(parts)
	if err != nil {
		t.Fatal(err)
	}
	if m.Digest != w.Digest || m.Worlds != w.Worlds || m.Events != w.Events || !m.Complete() || !slices.Equal(m.Failures, w.Failures) {
		t.Fatalf("merged %+v\nwhole %+v", m, w)
	}
	for k, v := range w.Probes {
		if m.Probes[k] != v {
			t.Fatalf("probe %s: merged %d, whole %d", k, m.Probes[k], v)
		}
	}
	if again := run(whole); again.Digest != w.Digest {
		t.Fatal("the same seeds gave a different digest")
	}
	if _, err := Merge([]*Summary{parts[0], parts[0]}); err == nil {
		t.Fatal("a shard merged twice was accepted")
	}
	other := *parts[1]
	other.Plan.RecheckEvery = 1
	if _, err := Merge([]*Summary{parts[0], &other, parts[2]}); err == nil {
		t.Fatal("shards of plans with different recheck-every were merged")
	}
}

// TestMergeRejectsImpossibleShards: a summary may not name a shard outside
// the plan, and one that claims shards without their worlds is incomplete.
func TestMergeRejectsImpossibleShards(t *testing.T) {
	part := func(shard, worlds int, merged ...int) *Summary {
		s := NewSummary(Plan{From: 1, Seeds: 10, Depth: 2, Shard: shard, Shards: 2})
		s.Worlds = worlds
		if merged != nil {
			s.ShardsMerged = merged
		}
		return s
	}
	for _, bad := range [][]*Summary{
		{part(0, 5), part(1, 5, 2)},
		{part(0, 5, -1), part(1, 5)},
	} {
		if m, err := Merge(bad); err == nil {
			t.Errorf("shards %v and %v merged into %v", bad[0].ShardsMerged, bad[1].ShardsMerged, m.ShardsMerged)
		}
	}
	if m, err := Merge([]*Summary{part(0, 5), part(1, 5)}); err != nil || !m.Complete() {
		t.Fatalf("two halves: complete %v, %v", m != nil && m.Complete(), err)
	}
	// One summary claiming both shards with half the worlds.
	m, err := Merge([]*Summary{part(0, 5, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Complete() {
		t.Fatalf("%d of %d worlds counted complete", m.Worlds, m.Plan.Seeds)
	}
}

// secondRunDiffers is a fresh core factory for one world whose second run
// (the recheck) loses the effects of its first step, so its trace differs.
func secondRunDiffers() sim.CoreFactory {
	runs := 0
	return func(cfg kernel.Config) (sim.Core, error) {
		runs++
		c, err := sim.KernelCore(cfg)
		if err != nil || runs != 2 {
			return c, err
		}
		return &simtest.DropFirstStep{Core: c}, nil
	}
}

// markerless is a broken loop (test code): its histories lose their
// markers, which the oracle reports as I13.
func markerless(cfg kernel.Config) (sim.Core, error) {
	c, err := sim.KernelCore(cfg)
	if err != nil {
		return nil, err
	}
	return stripMarkers{c}, nil
}

type stripMarkers struct{ sim.Core }

func (s stripMarkers) View(id kernel.AgentID) oracle.View {
	v := s.Core.View(id)
	v.History = slices.DeleteFunc(slices.Clone(v.History), func(m kernel.Message) bool { return m.Marker })
	return v
}

// TestFailingWorldIsShrunk: a sweep against a broken loop reports the
// failure and shrinks the world; the shrunk world still fails the same way
// and is a valid scenario file.
func TestFailingWorldIsShrunk(t *testing.T) {
	p := Plan{From: 1, Seeds: 40, Depth: 4, Shards: 1, RecheckEvery: 1}
	g := p.Generator()
	for _, seed := range p.SeedList() {
		w, err := RunWorld(g, p, seed, markerless)
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Violations) == 0 {
			continue
		}
		if w.Shrunk == nil || w.Violations[0].Invariant != "I13" {
			t.Fatalf("seed %d: %v, shrunk %v", seed, w.Violations, w.Shrunk != nil)
		}
		orig := g.Example(seed)
		s1, r1, c1, _, _ := orig.Size()
		s2, r2, c2, _, _ := w.Shrunk.Size()
		if s2+r2+c2 >= s1+r1+c1 && s1+r1+c1 > 3 {
			t.Fatalf("not shrunk: %d+%d+%d from %d+%d+%d", s2, r2, c2, s1, r1, c1)
		}
		back, err := scenario.Load("shrunk.yaml", w.Shrunk.YAML())
		if err != nil {
			t.Fatalf("shrunk world does not load: %v", err)
		}
		r, _ := sim.Run(back, sim.Options{Core: markerless})
		if r.Passed || r.Violations[0].Invariant != "I13" {
			t.Fatalf("shrunk world does not reproduce: %v", r.Violations)
		}
		t.Logf("seed %d shrunk to %d agents, %d events", seed, w.ShrunkAgents, w.ShrunkEvents)
		return
	}
	t.Fatal("no failing world in 40 seeds")
}

// TestProbesRequiredWhereReachable: a sweep requires a probe only where
// its worlds can reach it (oracle.Probe.MinDepth). At every depth from 0 to
// 4, a default-sized sweep (1000 worlds) reaches every probe it requires,
// so it passes without violations, and never reaches one it skips — a
// skipped probe reached would be a MinDepth set too deep, hiding a probe
// the generators could stop covering unnoticed.
func TestProbesRequiredWhereReachable(t *testing.T) {
	for depth := 0; depth <= 4; depth++ {
		p := Plan{From: 1, Seeds: 1000, Depth: depth, Shards: 1}
		s := NewSummary(p)
		g := p.Generator()
		for _, seed := range p.SeedList() {
			w, err := RunWorld(g, p, seed, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.Add(w, "")
		}
		if len(s.Failures) > 0 || len(s.Unreached()) > 0 {
			t.Errorf("depth %d: %d failure(s), probes never reached: %v", depth, len(s.Failures), s.Unreached())
		}
		for _, pr := range s.Skipped() {
			if s.Probes[pr] > 0 {
				t.Errorf("depth %d: probe %s is skipped (it needs depth %d) but was reached %d times", depth, pr, oracle.Probe(pr).MinDepth(), s.Probes[pr])
			}
		}
		if want := depth < 4; (len(s.Skipped()) > 0) != want {
			t.Errorf("depth %d skips %v", depth, s.Skipped())
		}
	}
}
