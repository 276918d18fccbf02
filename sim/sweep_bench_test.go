package sim_test

import (
	"testing"
	"time"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/sweep"
)

// BenchmarkSweepVsSim sets a sweep's throughput beside the simulator's in
// one loop: each iteration runs BenchmarkSimEvents' depth-6 scenario once,
// then sweep worlds (depth 6, the CLI's re-run of every tenth, seeds
// 1..10000 in turn) until they have delivered as many events, then the
// same worlds again through sim.Run alone, drawn outside the timer —
// timing the three apart. Both run on one worker's kernel factory, as the
// CLI's pool gives each worker (sim.SequentialKernelCore). Interleaving keeps the ratios honest on a shared machine
// whose load drifts. ratio is the sweep's events/s over the depth-6
// scenario's (docs/performance.md); sim-on-worlds is what the
// simulator does with the sweep's own worlds, so sweep over sim-on-worlds
// is the share generation, per-world setup and the re-runs leave.
func BenchmarkSweepVsSim(b *testing.B) {
	s := sim.Depth6Scenario()
	p := sweep.Plan{From: 1, Seeds: 10000, Depth: 6, Shards: 1, RecheckEvery: 10}
	g := p.Generator()
	core := sim.SequentialKernelCore() // as a sweep's worker runs them
	var simT, sweepT, worldsT time.Duration
	simN, sweepN, worldsN, worlds, seed := 0, 0, 0, 0, 0
	for b.Loop() {
		t0 := time.Now()
		r, err := sim.Run(s, sim.Options{})
		if err != nil || !r.Passed {
			b.Fatal(err, r.Violations)
		}
		t1 := time.Now()
		first := seed
		for n := 0; n < r.Events; {
			w, err := sweep.RunWorld(g, p, p.From+seed, core)
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
		for k := first; k != seed; k = (k + 1) % p.Seeds {
			world := g.Example(p.From + k)
			t3 := time.Now()
			wr, err := sim.Run(world, sim.Options{Core: core})
			if err != nil {
				b.Fatal(err)
			}
			worldsT += time.Since(t3)
			worldsN += wr.Events
		}
	}
	simRate := float64(simN) / simT.Seconds()
	sweepRate := float64(sweepN) / sweepT.Seconds()
	worldsRate := float64(worldsN) / worldsT.Seconds()
	b.ReportMetric(simRate, "sim-events/s")
	b.ReportMetric(sweepRate, "sweep-events/s")
	b.ReportMetric(worldsRate, "sim-on-worlds-events/s")
	b.ReportMetric(sweepRate/simRate, "ratio")
	b.ReportMetric(float64(worlds)/sweepT.Seconds(), "worlds/s")
}
