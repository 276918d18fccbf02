package live

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// TestRunWaitsForOwnedOpGoroutines: Run returns only once every op
// goroutine the kernel did not abandon has returned, so a host that exits
// when Run returns leaves nothing of its own running. The tool answers its
// cancel while holding the driver's record lock, which stops its goroutine
// between delivering that answer and leaving: Run must still be inside its
// wait for that goroutine (seen in the goroutine dump, no clock involved)
// and not return before the lock is released.
func TestRunWaitsForOwnedOpGoroutines(t *testing.T) {
	var d *Driver
	started, held := make(chan struct{}), make(chan struct{})
	tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
		close(started)
		<-ctx.Done()
		d.mu.Lock() // the test unlocks it: this goroutine's exit waits for that
		close(held)
		return ports.ToolResult{Status: kernel.ToolCancelled, Content: "cancelled"}
	})
	rec := newRecorder()
	d = newDriver(t, callOnce("slow"), tools, rec, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	if err := d.Submit(t.Context(), "go"); err != nil {
		t.Fatal(err)
	}
	<-started
	cancel()
	<-held
	for !inStack("live.(*Driver).waitOwned") {
		select {
		case <-d.Done():
			d.mu.Unlock()
			t.Fatal("Run returned while the tool call's goroutine, which the kernel did not abandon, was still running")
		default:
			runtime.Gosched()
		}
	}
	d.mu.Unlock()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if n := d.procCount(); n != 0 {
		t.Errorf("Run returned with %d op goroutines running, none abandoned", n)
	}
	if got := rec.abandoned(); len(got) != 0 {
		t.Errorf("abandoned %v: the tool answered its cancel at once", got)
	}
}

// inStack reports whether any goroutine is running fn (a function name as
// runtime.Stack prints it).
func inStack(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}
