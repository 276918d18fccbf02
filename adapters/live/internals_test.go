package live

import (
	"testing"

	"github.com/escapement/escapement/kernel"
)

// driverState is what the loop holds, read on the loop's goroutine.
type driverState struct{ ops, liveTimers, heap int }

func (d *Driver) state(t *testing.T) driverState {
	t.Helper()
	var s driverState
	if err := d.Inspect(t.Context(), func(*kernel.Kernel) {
		s = driverState{ops: len(d.ops), liveTimers: len(d.timers.live), heap: len(d.timers.heap)}
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

func (d *Driver) procCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.procs)
}
