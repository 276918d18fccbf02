// Package pool is the simulator's one worker pool: it runs numbered jobs —
// a sweep's worlds (sim/sweep), an exploration's scenarios (sim/explore) —
// on a fixed number of workers and hands each result back on the caller's
// goroutine. It starts no goroutine of its own (sim/ has none,
// internal/detguard checks it): the host passes Start, and Run returns
// only after every worker it started has returned.
package pool

import (
	"context"
	"fmt"
)

// Pool is how jobs run.
type Pool struct {
	// Jobs is how many jobs run at once (at least 1).
	Jobs int
	// Start runs one worker concurrently with the caller: a host passes
	// func(w func()) { go w() }.
	Start func(worker func())
}

// Run runs job 0 to n-1 on p.Jobs workers, handing them out in order as
// workers free up, and passes each job's result to add on the caller's
// goroutine as jobs finish (in whatever order they finish). Each worker
// calls newWorker once and runs its jobs with the func it returns: what a
// worker keeps from one job to the next (a generator, a core factory whose
// kernels must not step at once) is made there.
//
// Run stops handing out jobs once ctx is done, a job returns an error or
// add does. A job that was running when ctx ended still has its result
// added; after an error nothing more is added. Run returns the first error
// (ctx.Err() for ctx) once every worker has returned.
func Run[T any](ctx context.Context, p Pool, n int, newWorker func() func(i int) (T, error), add func(i int, r T) error) error {
	if p.Jobs < 1 {
		return fmt.Errorf("jobs must be at least 1, got %d", p.Jobs)
	}
	// Every job is queued before the workers start; they stop taking jobs
	// once stop is closed or ctx ends.
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	type result struct {
		i   int
		r   T
		err error
	}
	workers := min(p.Jobs, max(n, 1))
	results := make(chan result)
	exited := make(chan struct{}, workers)
	stop := make(chan struct{})
	for range workers {
		p.Start(func() {
			defer func() { exited <- struct{}{} }()
			job := newWorker()
			for i := range work {
				if stopped(ctx, stop) {
					return
				}
				r, err := job(i)
				results <- result{i, r, err} // Run reads until every worker has exited
			}
		})
	}
	c := &collector[T]{add: add, stop: stop}
	done := ctx.Done()
	for running := workers; running > 0; {
		select {
		case r := <-results:
			c.take(r.i, r.r, r.err)
		case <-exited:
			running--
		case <-done:
			done = nil
			c.halt(ctx.Err())
		}
	}
	if c.first == nil && c.finished < n {
		c.first = ctx.Err() // the workers saw ctx end before Run did
	}
	return c.first
}

// collector takes the jobs' results on Run's goroutine.
type collector[T any] struct {
	add  func(int, T) error
	stop chan struct{} // closed at the first error
	// first is the first error; failed: a job or add failed, and nothing
	// more is added; finished counts the jobs that returned.
	first    error
	failed   bool
	finished int
}

// halt stops the workers taking jobs, keeping the first error.
func (c *collector[T]) halt(err error) {
	if c.first == nil {
		c.first = err
		close(c.stop)
	}
}

// take adds job i's result, unless something failed before.
func (c *collector[T]) take(i int, r T, err error) {
	c.finished++
	switch {
	case c.failed:
	case err != nil:
		c.failed = true
		c.halt(err)
	default:
		if err := c.add(i, r); err != nil {
			c.failed = true
			c.halt(err)
		}
	}
}

// stopped reports whether a worker is to take no more jobs.
func stopped(ctx context.Context, stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	case <-ctx.Done():
		return true
	default:
		return false
	}
}
