package sweep

import (
	"context"
	"fmt"

	"github.com/escapement/escapement/sim"
)

// WorldError is a generated world that does not run: a generator or
// simulator bug, reproducible from its seed.
type WorldError struct {
	Seed int
	Err  error
}

func (e *WorldError) Error() string { return e.Err.Error() } // RunWorld's errors name the seed

func (e *WorldError) Unwrap() error { return e.Err }

// Pool runs a plan's worlds on several workers.
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
// returned.
func (pl Pool) Run(ctx context.Context, p Plan, add func(World) error) error {
	if pl.Jobs < 1 {
		return fmt.Errorf("jobs must be at least 1, got %d", pl.Jobs)
	}
	seeds := p.SeedList()
	// Every seed is queued before the workers start; they stop taking
	// seeds once stop is closed.
	work := make(chan int, len(seeds))
	for _, seed := range seeds {
		work <- seed
	}
	close(work)
	type result struct {
		seed int
		w    World
		err  error
	}
	results := make(chan result)
	exited := make(chan struct{}, pl.Jobs)
	stop := make(chan struct{})
	for range pl.Jobs {
		pl.Start(func() {
			defer func() { exited <- struct{}{} }()
			g := p.Generator()
			core := pl.Core
			if core == nil {
				// This worker's runs are sequential: its kernels can
				// share one configured state machine.
				core = sim.SequentialKernelCore()
			}
			for seed := range work {
				select {
				case <-stop:
					return
				default:
				}
				w, err := RunWorld(g, p, seed, core)
				select {
				case results <- result{seed, w, err}:
				case <-stop:
					return
				}
			}
		})
	}
	var first error
	halt := func(err error) {
		if first == nil {
			first = err
			close(stop)
		}
	}
	done := ctx.Done()
	for running := pl.Jobs; running > 0; {
		select {
		case r := <-results:
			switch {
			case first != nil:
			case r.err != nil:
				halt(&WorldError{Seed: r.seed, Err: r.err})
			default:
				if err := add(r.w); err != nil {
					halt(err)
				}
			}
		case <-exited:
			running--
		case <-done:
			done = nil
			halt(ctx.Err())
		}
	}
	return first
}
