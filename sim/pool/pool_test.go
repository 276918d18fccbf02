package pool

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
)

func start(w func()) { go w() }

// TestRunsEveryJobOnce: every job runs once, on one of at most Jobs
// workers (each made once), and every result is added on the caller's
// goroutine.
func TestRunsEveryJobOnce(t *testing.T) {
	for _, jobs := range []int{1, 3, 50} {
		var workers atomic.Int64
		var got []int
		err := Run(context.Background(), Pool{Jobs: jobs, Start: start}, 20, func() func(int) (int, error) {
			workers.Add(1)
			return func(i int) (int, error) { return i * i, nil }
		}, func(i, r int) error {
			if r != i*i {
				t.Errorf("job %d gave %d", i, r)
			}
			got = append(got, i) // the caller's goroutine: no lock (-race)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if len(got) != 20 || got[0] != 0 || got[19] != 19 || len(slices.Compact(got)) != 20 {
			t.Fatalf("jobs %d: added %v", jobs, got)
		}
		if w := workers.Load(); w < 1 || w > int64(min(jobs, 20)) {
			t.Fatalf("jobs %d: %d workers made", jobs, w)
		}
	}
	if err := Run(context.Background(), Pool{Jobs: 2, Start: start}, 0, func() func(int) (int, error) {
		return func(int) (int, error) { return 0, nil }
	}, func(int, int) error { t.Error("added a job of none"); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), Pool{Jobs: 0, Start: start}, 3, nil, func(int, int) error { return nil }); err == nil {
		t.Fatal("0 jobs accepted")
	}
}

// TestStopsOnTheFirstError: a job's error or add's stops the pool and is
// returned, and nothing is added after it; a cancelled context stops
// handing out jobs, but a job running then is still added.
func TestStopsOnTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	added := 0
	err := Run(context.Background(), Pool{Jobs: 2, Start: start}, 1000, func() func(int) (int, error) {
		return func(i int) (int, error) {
			if i == 5 {
				return 0, boom
			}
			return i, nil
		}
	}, func(int, int) error { added++; return nil })
	if !errors.Is(err, boom) || added > 10 {
		t.Fatalf("a job's error: %v after %d added", err, added)
	}

	added = 0
	err = Run(context.Background(), Pool{Jobs: 3, Start: start}, 1000, func() func(int) (int, error) {
		return func(i int) (int, error) { return i, nil }
	}, func(int, int) error { added++; return boom })
	if !errors.Is(err, boom) || added != 1 {
		t.Fatalf("add's error: %v after %d added", err, added)
	}

	// Cancelled by job 0: it is still added, and no job starts after it.
	ctx, cancel := context.WithCancel(context.Background())
	var ran []int
	err = Run(ctx, Pool{Jobs: 1, Start: start}, 1000, func() func(int) (int, error) {
		return func(i int) (int, error) {
			if i == 0 {
				cancel()
			}
			return i, nil
		}
	}, func(i, _ int) error { ran = append(ran, i); return nil })
	if !errors.Is(err, context.Canceled) || !slices.Equal(ran, []int{0}) {
		t.Fatalf("cancelled: %v, added %v", err, ran)
	}
}
