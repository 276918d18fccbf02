package sim_test

import (
	"testing"
	"time"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/sweep"
)

// BenchmarkSweepVsSim sets a sweep's throughput beside the simulator's in
// one loop: each iteration runs BenchmarkSimEvents' depth-6 scenario once,
// then sweep worlds (depth 6, the CLI's default re-run of every tenth, seeds
// 1..10000 in turn) until they have delivered as many events, timing the
// two apart. Interleaving keeps the ratio honest on a shared machine whose
// load drifts; the target is a sweep at least half as fast per event as
// the simulator (the README's performance table).
func BenchmarkSweepVsSim(b *testing.B) {
	s := sim.Depth6Scenario()
	p := sweep.Plan{From: 1, Seeds: 10000, Depth: 6, Shards: 1, RecheckEvery: 10}
	g := p.Generator()
	var simT, sweepT time.Duration
	simN, sweepN, worlds, seed := 0, 0, 0, 0
	for b.Loop() {
		t0 := time.Now()
		r, err := sim.Run(s, sim.Options{})
		if err != nil || !r.Passed {
			b.Fatal(err, r.Violations)
		}
		t1 := time.Now()
		for n := 0; n < r.Events; {
			w, err := sweep.RunWorld(g, p, p.From+seed, nil)
			if err != nil || len(w.Violations) > 0 {
				b.Fatal(err, w.Violations)
			}
			seed = (seed + 1) % p.Seeds
			n += w.Events
			sweepN += w.Events
			worlds++
		}
		t2 := time.Now()
		simT, sweepT, simN = simT+t1.Sub(t0), sweepT+t2.Sub(t1), simN+r.Events
	}
	simRate := float64(simN) / simT.Seconds()
	sweepRate := float64(sweepN) / sweepT.Seconds()
	b.ReportMetric(simRate, "sim-events/s")
	b.ReportMetric(sweepRate, "sweep-events/s")
	b.ReportMetric(sweepRate/simRate, "ratio")
	b.ReportMetric(float64(worlds)/sweepT.Seconds(), "worlds/s")
}
