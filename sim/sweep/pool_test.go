package sweep

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
)

// startGoroutine is what a host passes as Pool.Start.
func startGoroutine(w func()) { go w() }

// TestPoolSummaryIndependentOfJobs: one worker or three, the worlds of a
// plan fold into the same summary (Summary.Add does not depend on the
// order workers finish in).
func TestPoolSummaryIndependentOfJobs(t *testing.T) {
	p := Plan{From: 1, Seeds: 30, Depth: 3, Shards: 1, RecheckEvery: 5}
	var digests []string
	for _, jobs := range []int{1, 3} {
		sum := NewSummary(p)
		err := Pool{Jobs: jobs, Start: startGoroutine}.Run(context.Background(), p, func(w World) error {
			sum.Add(w, "")
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Worlds != 30 {
			t.Fatalf("jobs %d: %d worlds", jobs, sum.Worlds)
		}
		digests = append(digests, sum.Digest)
	}
	if digests[0] != digests[1] {
		t.Fatalf("digests differ with the number of jobs: %v", digests)
	}
}

// TestPoolStops: the first error stops the sweep — from add, from a world
// that does not run (a *WorldError naming the seed), or from ctx — with
// every worker returned and few worlds run after it.
func TestPoolStops(t *testing.T) {
	p := Plan{From: 1, Seeds: 500, Depth: 2, Shards: 1}
	const jobs = 2
	stop := errors.New("stop here")
	added := 0
	err := Pool{Jobs: jobs, Start: startGoroutine}.Run(context.Background(), p, func(World) error {
		added++
		return stop
	})
	if !errors.Is(err, stop) || added != 1 {
		t.Fatalf("add's error: %v after %d worlds", err, added)
	}

	var built atomic.Int64
	broken := func(kernel.Config) (sim.Core, error) {
		built.Add(1)
		return nil, errors.New("no core today")
	}
	err = Pool{Jobs: jobs, Start: startGoroutine, Core: broken}.Run(context.Background(), p, func(World) error { return nil })
	var we *WorldError
	if !errors.As(err, &we) || we.Seed < 1 || we.Seed > jobs {
		t.Fatalf("a world that does not run: %v", err)
	}
	if n := built.Load(); n > 2*jobs {
		t.Fatalf("%d worlds started after the first failed", n-1)
	}

	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err = Pool{Jobs: jobs, Start: startGoroutine}.Run(ctx, p, func(World) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n >= 500 {
		t.Fatalf("cancelled: %v after %d worlds", err, n)
	}
	if err := (Pool{Jobs: 0, Start: startGoroutine}).Run(context.Background(), p, nil); err == nil {
		t.Fatal("0 jobs accepted")
	}
}
