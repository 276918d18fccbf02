package sweep

import (
	"context"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/pool"
	"github.com/escapement/escapement/sim/scenario"
)

// WorldError is a generated world that does not run: a generator or
// simulator bug, reproducible from its seed.
type WorldError struct {
	Seed int
	Err  error
}

func (e *WorldError) Error() string { return e.Err.Error() } // RunWorld's errors name the seed

func (e *WorldError) Unwrap() error { return e.Err }

// Pool runs a plan's worlds on several workers (sim/pool).
type Pool struct {
	// Jobs is how many worlds run at once (at least 1).
	Jobs int
	// Start runs one worker concurrently with the caller: a host passes
	// func(w func()) { go w() }. The package starts no goroutine of its own
	// (sim/ has none, internal/detguard checks it); the summary does not
	// depend on the order workers finish in (Summary.Add).
	Start func(worker func())
	// Core is the agent loop under test (nil: the kernel, a
	// sim.SequentialKernelCore per worker). Workers share it, so it must
	// be safe to call from several goroutines at once: never one
	// sim.SequentialKernelCore, whose kernels share one state machine.
	Core sim.CoreFactory
}

// Run runs every seed of p and hands each world to add on the caller's
// goroutine, as the worlds finish. It stops handing out seeds once ctx is
// done, add returns an error, or a world does not run (a *WorldError), and
// returns that first error (ctx.Err() for ctx) after every worker has
// returned; a world that was running when ctx ended is still added.
func (pl Pool) Run(ctx context.Context, p Plan, add func(World) error) error {
	seeds := p.SeedList()
	worker := func() func(int) (World, error) {
		g := p.Generator()
		core := pl.Core
		if core == nil {
			// This worker's runs are sequential: its kernels can share
			// one configured state machine.
			core = sim.SequentialKernelCore()
		}
		return func(i int) (World, error) {
			w, err := RunWorld(g, p, seeds[i], core)
			if err != nil {
				return w, &WorldError{Seed: seeds[i], Err: err}
			}
			return w, nil
		}
	}
	return pool.Run(ctx, pool.Pool{Jobs: pl.Jobs, Start: pl.Start}, len(seeds), worker, func(_ int, w World) error { return add(w) })
}

// Sweep runs every world of p on the pool into a new Summary: save writes
// a failing world's shrunk scenario and says where (nil: not written), and
// each, when set, is told of every world added (a progress bar). It
// returns the summary so far with Run's error: a *WorldError, save's
// error, or ctx.Err(). Wall is the host's to set.
func (pl Pool) Sweep(ctx context.Context, p Plan, save func(*scenario.Scenario) (string, error), each func()) (*Summary, error) {
	sum := NewSummary(p)
	err := pl.Run(ctx, p, func(w World) error {
		file := ""
		if w.Shrunk != nil && save != nil {
			var err error
			if file, err = save(w.Shrunk); err != nil {
				return err
			}
		}
		sum.Add(w, file)
		if each != nil {
			each()
		}
		return nil
	})
	return sum, err
}
