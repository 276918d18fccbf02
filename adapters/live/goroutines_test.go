package live

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// gate holds stuck fakes until it opens; the test's cleanup opens it, so
// every goroutine has ended before synctest and goleak look.
type gate struct {
	once sync.Once
	c    chan struct{}
}

func newGate(t *testing.T) *gate {
	g := &gate{c: make(chan struct{})}
	t.Cleanup(g.open)
	return g
}

func (g *gate) open() { g.once.Do(func() { close(g.c) }) }

// running is a driver whose Run the test started.
type running struct {
	d      *Driver
	cancel context.CancelFunc
	errc   chan error
}

// runDriver starts d.Run; the test's cleanup ends its context and gives Run
// an hour of virtual time to return (a bubble's clock stands still once the
// test function has returned, and a test that failed early may leave a
// shutdown that needs time). Gates created before runDriver open after.
func runDriver(t *testing.T, d *Driver) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.Done():
		case <-time.After(time.Hour):
		}
	})
	return r
}

// shutdown ends Run's context and returns how long Run took to return, in
// the bubble's virtual time. If Run has not returned an hour later it fails
// the test (a driver that waits for an abandoned goroutine).
func (r *running) shutdown(t *testing.T) time.Duration {
	t.Helper()
	t0 := time.Now()
	r.cancel()
	return r.wait(t, t0)
}

func (r *running) wait(t *testing.T, t0 time.Time) time.Duration {
	t.Helper()
	select {
	case err := <-r.errc:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
		return time.Since(t0)
	case <-time.After(time.Hour):
		t.Errorf("Run had not returned an hour (virtual) after the shutdown: it waits for an abandoned goroutine")
		return time.Hour
	}
}

// stepsSince returns a copy of the steps recorded from index i on.
func (r *recorder) stepsSince(i int) []ports.Step {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]ports.Step(nil), r.steps[i:]...)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.steps)
}

// callOnce answers the first request with one call to tool and every later
// one with "done".
func callOnce(tool string) *script {
	return &script{answer: func(req ports.Request) []chunk {
		if last(req).Role == kernel.RoleTool {
			return []chunk{{text: "done"}}
		}
		return []chunk{{call: &kernel.CallDelta{Index: 0, ID: "c1", Name: tool, Args: `{}`}}}
	}}
}

// TestStuckToolDoesNotBlockRun: a tool that ignores its context and never
// returns (until the test's cleanup) is abandoned Grace after the shutdown,
// and Run returns exactly then; the tool is listed by Abandoned.
func TestStuckToolDoesNotBlockRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		var started atomic.Bool
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			started.Store(true)
			<-g.c // ignores ctx
			return ports.ToolResult{Status: kernel.ToolOK, Content: "never seen"}
		})
		rec := newRecorder()
		d := newDriver(t, callOnce("grep"), tools, rec, func(c *kernel.Config) { c.Grace = 2 * time.Second })
		r := runDriver(t, d)
		if err := d.Submit(t.Context(), "find it"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if !started.Load() {
			t.Fatal("the tool did not start")
		}
		if took := r.shutdown(t); took != 2*time.Second {
			t.Errorf("Run returned %v after the shutdown, want the grace period (2s)", took)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeInterrupted || end.Reason != kernel.ReasonShutdown {
			t.Errorf("turn ended %s/%s, want interrupted/shutdown", end.Outcome, end.Reason)
		}
		ab := d.Abandoned()
		if len(ab) != 1 || ab[0].Tool != "grep" || ab[0].Path != "main" || ab[0].At != 3*time.Second {
			t.Errorf("Abandoned() = %+v, want grep in main abandoned at 3s", ab)
		}
		// Released, the tool's goroutine returns without touching the
		// kernel (Run has returned) and without blocking.
		steps := rec.count()
		g.open()
		synctest.Wait()
		if ab := d.Abandoned(); len(ab) != 0 {
			t.Errorf("Abandoned() = %+v after the tool returned", ab)
		}
		if late := rec.stepsSince(steps); len(late) != 0 {
			t.Errorf("steps after Run returned: %+v", late)
		}
	})
}

// TestTimedOutStuckToolDoesNotBlockRun is the reported hang: a tool stuck
// past its timeout is abandoned, the model answers, the turn completes —
// and a shutdown afterwards returns at once instead of waiting for the tool
// forever.
func TestTimedOutStuckToolDoesNotBlockRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			<-g.c // a FIFO that never opens
			return ports.ToolResult{Status: kernel.ToolOK}
		})
		rec := newRecorder()
		d := newDriver(t, callOnce("grep"), tools, rec, func(c *kernel.Config) {
			c.Grace = 2 * time.Second
			c.ToolTimeout = 5 * time.Second
		})
		r := runDriver(t, d)
		if err := d.Submit(t.Context(), "find it"); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeCompleted || end.Text != "done" {
			t.Fatalf("turn ended %s %q, want completed %q", end.Outcome, end.Text, "done")
		}
		time.Sleep(time.Minute) // well past the grace: the tool is abandoned
		if n := len(rec.abandoned()); n != 1 {
			t.Fatalf("%d abandoned ops, want the stuck tool", n)
		}
		if took := r.shutdown(t); took != 0 {
			t.Errorf("Run returned %v after the shutdown, want at once (nothing but the abandoned tool runs)", took)
		}
		if ab := d.Abandoned(); len(ab) != 1 || ab[0].Tool != "grep" || ab[0].At != 7*time.Second {
			t.Errorf("Abandoned() = %+v, want grep abandoned at timeout (5s) + grace (2s)", ab)
		}
	})
}

// TestStuckModelDoesNotBlockRun: a model that ignores its context is
// abandoned like a tool; when it finally speaks and returns, every sink
// call (Text, Call, Retry) and its end are dropped without blocking and
// without reaching the kernel.
func TestStuckModelDoesNotBlockRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			sink.Text("partial")
			<-g.c // ignores ctx
			for i := range 2 * eventBuffer {
				sink.Text("late")
				sink.Call(kernel.CallDelta{Index: 0, ID: "c", Name: "x"})
				sink.Retry(i+2, time.Second, "late")
			}
			return nil
		})
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, func(c *kernel.Config) { c.Grace = 2 * time.Second })
		r := runDriver(t, d)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if took := r.shutdown(t); took != 2*time.Second {
			t.Errorf("Run returned %v after the shutdown, want the grace period (2s)", took)
		}
		if end := <-rec.ended; end.Reason != kernel.ReasonShutdown || end.Text != "partial" {
			t.Errorf("turn ended %s %q, want shutdown with the partial", end.Reason, end.Text)
		}
		if ab := d.Abandoned(); len(ab) != 1 || ab[0].Tool != "" || ab[0].Path != "main" {
			t.Errorf("Abandoned() = %+v, want the main agent's request", ab)
		}
		steps := rec.count()
		g.open()
		synctest.Wait()
		if ab := d.Abandoned(); len(ab) != 0 {
			t.Errorf("Abandoned() = %+v after the model returned", ab)
		}
		if late := rec.stepsSince(steps); len(late) != 0 {
			t.Errorf("steps after Run returned: %+v", late)
		}
	})
}

// TestCancelledStreamCannotFloodTheLoop: a stream that keeps talking after
// its cancel is heard no more — none of its chunks is stepped (each would be
// a late record in the trace) — while the driver goes on serving the next
// turn; its end, once it returns, is one stale record.
func TestCancelledStreamCannotFloodTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		var n atomic.Int32
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			if n.Add(1) > 1 {
				sink.Text("second")
				return nil
			}
			sink.Text("first")
			<-ctx.Done()
			for range 4 * eventBuffer { // ignores the cancel
				sink.Text("late")
			}
			<-g.c
			return nil
		})
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, func(c *kernel.Config) { c.Grace = 2 * time.Second })
		r := runDriver(t, d)
		if err := d.Submit(t.Context(), "one"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		cancelAt := rec.count()
		if err := d.Cancel(t.Context(), kernel.Root, 1); err != nil {
			t.Fatal(err)
		}
		if end := <-rec.ended; end.Outcome != kernel.OutcomeInterrupted || end.At != 3*time.Second {
			t.Fatalf("turn ended %s at %v, want interrupted at cancel + grace", end.Outcome, end.At)
		}
		if err := d.Submit(t.Context(), "two"); err != nil {
			t.Fatal(err)
		}
		if end := <-rec.ended; end.Outcome != kernel.OutcomeCompleted || end.Text != "second" {
			t.Fatalf("second turn ended %s %q", end.Outcome, end.Text)
		}
		g.open()
		synctest.Wait()
		var deltas, stale int
		for _, s := range rec.stepsSince(cancelAt) {
			if s.Event.Kind == kernel.EvLLMDelta && s.Event.Text == "late" {
				deltas++
			}
			for _, e := range s.Effects {
				if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeStale {
					stale++
				}
			}
		}
		if deltas != 0 || stale != 1 {
			t.Errorf("after the cancel %d late chunks were stepped and %d stale records made; want none and one (its end)", deltas, stale)
		}
		if took := r.shutdown(t); took != 0 {
			t.Errorf("Run returned %v after the shutdown, want at once", took)
		}
	})
}

// TestCancelledStreamNeverWaitsOnTheLoop: a stream blocked on a full event
// buffer is released by its cancel even while the loop cannot take events
// (here: the observer of the cancel's own step holds it), and every later
// sink call returns at once: a cancelled stream never depends on the loop.
func TestCancelledStreamNeverWaitsOnTheLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var flooded atomic.Bool
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			for range 4 * eventBuffer {
				sink.Text("x")
			}
			flooded.Store(true)
			return nil
		})
		holding, hold := make(chan struct{}), make(chan struct{})
		rec := newRecorder()
		d, err := New(Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: m, Tools: noTools,
			Observer: func(s ports.Step) {
				switch s.Event.Kind {
				case kernel.EvLLMDelta:
					time.Sleep(time.Millisecond) // slower than the stream: the buffer stays full
				case kernel.EvCancel:
					close(holding)
					<-hold
				}
				rec.observe(s)
			}})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		defer stop()
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		cancelled := make(chan error, 1)
		go func() { cancelled <- d.Cancel(context.Background(), kernel.Root, 1) }()
		<-holding // the loop is inside the cancel's step: it takes no event
		synctest.Wait()
		if !flooded.Load() {
			t.Error("the cancelled stream is still blocked on the event buffer while the loop is busy")
		}
		close(hold)
		if err := <-cancelled; err != nil {
			t.Fatal(err)
		}
		if end := <-rec.ended; end.Outcome != kernel.OutcomeInterrupted {
			t.Errorf("turn ended %s, want interrupted", end.Outcome)
		}
	})
}

// TestShutdownInput: Shutdown ends the running turn with reason shutdown
// (not user_cancel), returns at once, and Run returns by itself once the
// tree is quiescent. While the tree settles, Inspect still works, turns and
// cancels are refused with ErrStopped, and a second Shutdown is a no-op.
func TestShutdownInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			sink.Text("partial")
			<-ctx.Done()
			time.Sleep(time.Second) // acknowledges within the grace, slowly
			return ctx.Err()
		})
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, func(c *kernel.Config) { c.Grace = 2 * time.Second })
		runDriver(t, d) // its context never ends in this test
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		t0 := time.Now()
		if err := d.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := d.Shutdown(t.Context()); err != nil {
			t.Errorf("second Shutdown: %v", err)
		}
		var quiescent bool
		if err := d.Inspect(t.Context(), func(k *kernel.Kernel) { quiescent = k.Quiescent() }); err != nil {
			t.Errorf("Inspect while shutting down: %v", err)
		} else if quiescent {
			t.Error("quiescent before the stream acknowledged")
		}
		for name, input := range map[string]func() error{
			"Submit":    func() error { return d.Submit(t.Context(), "late") },
			"Say":       func() error { return d.Say(t.Context(), "late") },
			"Interject": func() error { return d.Interject(t.Context(), "late") },
			"Cancel":    func() error { return d.Cancel(t.Context(), kernel.Root, 0) },
		} {
			if err := input(); !errors.Is(err, ErrStopped) {
				t.Errorf("%s while shutting down: %v, want ErrStopped", name, err)
			}
		}
		<-d.Done()
		if took := time.Since(t0); took != time.Second {
			t.Errorf("Run returned %v after Shutdown, want when the stream acknowledged (1s)", took)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeInterrupted || end.Reason != kernel.ReasonShutdown || end.Text != "partial" {
			t.Errorf("turn ended %s/%s %q, want interrupted/shutdown with the partial", end.Outcome, end.Reason, end.Text)
		}
		shutdowns := 0
		for _, s := range rec.stepsSince(0) {
			if s.Event.Kind == kernel.EvShutdown {
				shutdowns++
			}
		}
		if shutdowns != 1 {
			t.Errorf("%d shutdown events stepped, want 1", shutdowns)
		}
		if err := d.Shutdown(t.Context()); err != nil {
			t.Errorf("Shutdown after Run returned: %v", err)
		}
		if err := d.Inspect(t.Context(), func(*kernel.Kernel) {}); !errors.Is(err, ErrStopped) {
			t.Errorf("Inspect after Run returned: %v, want ErrStopped", err)
		}
	})
}

// TestStoppedTimerIsNeverStepped: a timer the kernel stopped never reaches
// it (the kernel would drop it as stale; it would still be a wasted
// wake-up), and every timer that fires is one set and not stopped, once.
func TestStoppedTimerIsNeverStepped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := callOnce("read_file")
		m.gap = 10 * time.Millisecond
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			time.Sleep(time.Second)
			return ports.ToolResult{Status: kernel.ToolOK, Content: "ok"}
		})
		rec := newRecorder()
		d := newDriver(t, m, tools, rec, func(c *kernel.Config) {
			c.ToolTimeout = 5 * time.Second
			c.FirstTokenTimeout = 3 * time.Second
			c.StallTimeout = 2 * time.Second
			c.TurnTimeout = 20 * time.Second
		})
		stop := start(t, d)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		if end := <-rec.ended; end.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("turn ended %s", end.Outcome)
		}
		time.Sleep(time.Hour) // past every deadline the turn set
		stop()
		set, stopped, fired := map[kernel.OpID]bool{}, map[kernel.OpID]bool{}, map[kernel.OpID]int{}
		for _, s := range rec.stepsSince(0) {
			if s.Event.Kind == kernel.EvTimer {
				fired[s.Event.Op]++
			}
			for _, e := range s.Effects {
				switch e.Kind {
				case kernel.EffSetTimer:
					set[e.Op] = true
				case kernel.EffStopTimer:
					stopped[e.Op] = true
				}
			}
		}
		if len(stopped) < 3 {
			t.Fatalf("only %d timers stopped; the test must stop the tool's and both requests' timers", len(stopped))
		}
		for op, n := range fired {
			if stopped[op] || !set[op] || n != 1 {
				t.Errorf("timer %d stepped %d times (set %v, stopped %v)", op, n, set[op], stopped[op])
			}
		}
	})
}

// TestEveryChunkReachesTheKernelInOrder: a 1,000-chunk stream against an
// observer slower than the stream: the event buffer fills, the stream waits
// (back-pressure), and every chunk reaches the kernel once, in order.
func TestEveryChunkReachesTheKernelInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const chunks = 1000
		var want strings.Builder
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			for i := range chunks {
				sink.Text(fmt.Sprintf("%d,", i))
			}
			return nil
		})
		for i := range chunks {
			fmt.Fprintf(&want, "%d,", i)
		}
		rec := newRecorder()
		d, err := New(Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: m, Tools: noTools,
			Observer: func(s ports.Step) {
				time.Sleep(5 * time.Millisecond) // much slower than the stream
				rec.observe(s)
			}})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		defer stop()
		if err := d.Submit(t.Context(), "count"); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		var got []uint32
		for _, s := range rec.stepsSince(0) {
			if s.Event.Kind == kernel.EvLLMDelta {
				got = append(got, s.Event.Chunk)
			}
		}
		if len(got) != chunks {
			t.Fatalf("%d of %d chunks reached the kernel", len(got), chunks)
		}
		for i, c := range got {
			if c != uint32(i+1) {
				t.Fatalf("chunk %d arrived as number %d", i+1, c)
			}
		}
		if end.Outcome != kernel.OutcomeCompleted || end.Text != want.String() {
			t.Errorf("turn ended %s with %.40q…, want completed with %.40q…", end.Outcome, end.Text, want.String())
		}
	})
}

// TestShutdownWhileIdle: Shutdown on an idle tree ends Run at once, with no
// turn to end; a Submit queued behind nothing is refused.
func TestShutdownWhileIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecorder()
		d := newDriver(t, callOnce("x"), noTools, rec, nil)
		runDriver(t, d)
		time.Sleep(time.Second)
		t0 := time.Now()
		if err := d.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		<-d.Done()
		if took := time.Since(t0); took != 0 {
			t.Errorf("Run returned %v after Shutdown on an idle tree, want at once", took)
		}
		if n := len(rec.lifes(kernel.LifeTurnEnded)); n != 0 {
			t.Errorf("%d turns ended, want none", n)
		}
		if err := d.Submit(t.Context(), "late"); !errors.Is(err, ErrStopped) {
			t.Errorf("Submit after Run returned: %v, want ErrStopped", err)
		}
	})
}
