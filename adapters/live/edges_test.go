package live

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// TestClockNeverGoesBackwards: the event clock is clamped, so a wall
// clock that reads earlier than the last event (here: a start in the
// future) repeats the last time instead of going back, which the kernel
// would refuse with a panic.
func TestClockNeverGoesBackwards(t *testing.T) {
	d := &Driver{start: time.Now().Add(time.Hour), now: 5 * time.Second}
	if got := d.clock(); got != 5*time.Second {
		t.Errorf("clock() = %v, want the last time (5s)", got)
	}
	d.start = time.Now().Add(-time.Hour)
	if got := d.clock(); got < time.Hour {
		t.Errorf("clock() = %v, want at least 1h", got)
	}
}

// TestFailureClasses: a Stream error names its kernel failure class when it
// is a FailureError; otherwise it is a stream error once any chunk arrived
// (the answer may be cut) and a server error before.
func TestFailureClasses(t *testing.T) {
	cases := []struct {
		err    error
		chunks uint32
		want   kernel.Failure
	}{
		{ports.Fail(kernel.FailureRateLimit, errors.New("429")), 0, kernel.FailureRateLimit},
		{ports.Fail(kernel.FailureBadResponse, errors.New("junk")), 7, kernel.FailureBadResponse},
		{ports.Fail(kernel.FailureNone, errors.New("unclassed")), 1, kernel.FailureStream},
		{io.ErrUnexpectedEOF, 1, kernel.FailureStream},
		{io.ErrUnexpectedEOF, 0, kernel.FailureServer},
	}
	for _, c := range cases {
		if got := ports.FailureOf(c.err, int(c.chunks)); got != c.want {
			t.Errorf("FailureOf(%v, %d) = %s, want %s", c.err, c.chunks, got, c.want)
		}
	}
	err := ports.Fail(kernel.FailureDisconnect, io.ErrUnexpectedEOF)
	if err.Error() != io.ErrUnexpectedEOF.Error() || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Fail(…, EOF) = %q, not wrapping it", err)
	}
	if got := ports.Fail(kernel.FailureServer, nil).Error(); got != kernel.FailureServer.String() {
		t.Errorf("Fail(server, nil).Error() = %q, want %q", got, kernel.FailureServer.String())
	}
}

// TestNewRequiresModelAndTools: a driver without a model or tools is a
// configuration error, said at New, not a nil dereference mid-turn.
func TestNewRequiresModelAndTools(t *testing.T) {
	m := ports.ModelFunc(func(context.Context, ports.Request, ports.Sink) error { return nil })
	for name, cfg := range map[string]Config{
		"Model": {Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Tools: noTools},
		"Tools": {Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: m},
	} {
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "Config."+name) {
			t.Errorf("New without %s: %v", name, err)
		}
	}
	if _, err := New(Config{Model: m, Tools: noTools}); err == nil {
		t.Error("New with an invalid kernel config did not fail")
	}
}

// TestSinkEvents: an empty text delta is no chunk (chunk numbers stay
// dense), a call fragment is numbered like text, a retry reaches the kernel
// with its attempt, delay and cause, and each step's Before is the target's
// state before the event.
func TestSinkEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			if last(req).Role == kernel.RoleTool {
				sink.Text("ok")
				return nil
			}
			sink.Retry(2, 3*time.Second, "429 slow down")
			sink.Text("")
			sink.Text("a")
			sink.Text("")
			sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "t", Args: "{}"})
			return nil
		})
		tools := ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult {
			return ports.ToolResult{Status: kernel.ToolOK, Content: "r"}
		})
		rec := newRecorder()
		d := newDriver(t, m, tools, rec, nil)
		stop := start(t, d)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		<-rec.ended
		stop()
		var chunks []uint32
		var befores []fsm.State
		for _, s := range rec.stepsSince(0) {
			if s.Event.Kind == kernel.EvLLMDelta {
				chunks = append(chunks, s.Event.Chunk)
			}
			if s.Event.Kind == kernel.EvToolResult {
				befores = append(befores, s.Before)
			}
		}
		if want := []uint32{1, 2, 1}; !slices.Equal(chunks, want) {
			t.Errorf("chunk numbers %v, want %v (empty text is no chunk)", chunks, want)
		}
		if len(befores) != 1 || befores[0] != fsm.Tooling {
			t.Errorf("tool result stepped with Before %v, want [Tooling]", befores)
		}
		retries := rec.lifes(kernel.LifeRetry)
		if len(retries) != 1 || retries[0].N != 2 || retries[0].Delay != 3*time.Second || retries[0].Text != "429 slow down" {
			t.Errorf("retries %+v, want attempt 2 after 3s for %q", retries, "429 slow down")
		}
	})
}

// TestCancelledStreamIsReportedCancelled: whatever a cancelled stream
// returns — here a transport error, as an HTTP client gives when its
// request is cut — the driver reports the cancel's acknowledgement, not a
// stream failure.
func TestCancelledStreamIsReportedCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			sink.Text("partial")
			<-ctx.Done()
			return ports.Fail(kernel.FailureDisconnect, errors.New("connection reset"))
		})
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, nil)
		stop := start(t, d)
		defer stop()
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := d.Cancel(t.Context(), kernel.Root, 1); err != nil {
			t.Fatal(err)
		}
		<-rec.ended
		var got []kernel.Failure
		for _, s := range rec.stepsSince(0) {
			if s.Event.Kind == kernel.EvLLMError {
				got = append(got, s.Event.Failure)
			}
		}
		if len(got) != 1 || got[0] != kernel.FailureCancelled {
			t.Errorf("stream errors %v, want [cancelled]", got)
		}
	})
}

// TestAbandonedListsOnlyAbandoned: a tool that is merely running, or
// cancelled and still within its grace, is not abandoned.
func TestAbandonedListsOnlyAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t)
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			<-g.c
			return ports.ToolResult{Status: kernel.ToolOK}
		})
		rec := newRecorder()
		d := newDriver(t, callOnce("slow"), tools, rec, func(c *kernel.Config) { c.Grace = 2 * time.Second })
		r := runDriver(t, d)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if ab := d.Abandoned(); len(ab) != 0 {
			t.Errorf("Abandoned() = %+v while the tool runs", ab)
		}
		if err := d.Cancel(t.Context(), kernel.Root, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if ab := d.Abandoned(); len(ab) != 0 {
			t.Errorf("Abandoned() = %+v within the grace", ab)
		}
		<-rec.ended
		if ab := d.Abandoned(); len(ab) != 1 {
			t.Errorf("Abandoned() = %+v after the grace, want the tool", ab)
		}
		r.shutdown(t)
	})
}

// TestTimerTiesFireInOpOrder: timers due at the same instant fire in the
// order the kernel set them (op id order), whatever order the heap holds
// them in.
func TestTimerTiesFireInOpOrder(t *testing.T) {
	tm := newTimers()
	ops := []kernel.OpID{9, 2, 14, 5, 11, 1, 7, 3, 12, 8, 4, 13, 6, 10}
	for _, op := range ops {
		tm.set(op, time.Second)
	}
	var got []kernel.OpID
	for {
		op, ok := tm.popDue(time.Second)
		if !ok {
			break
		}
		got = append(got, op)
	}
	want := slices.Sorted(slices.Values(ops))
	if !slices.Equal(got, want) {
		t.Errorf("fired %v, want %v", got, want)
	}
}

// TestFireDueFiresEveryDueTimer: one wake-up fires every timer that is due,
// in deadline then op order, and none that is not.
func TestFireDueFiresEveryDueTimer(t *testing.T) {
	var fired []kernel.OpID
	d, err := New(Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: ports.ModelFunc(func(context.Context, ports.Request, ports.Sink) error { return nil }), Tools: noTools,
		Observer: func(s ports.Step) {
			if s.Event.Kind == kernel.EvTimer {
				fired = append(fired, s.Event.Op)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	d.start = time.Now().Add(-time.Minute) // a minute into the run
	for op, at := range map[kernel.OpID]time.Duration{101: time.Second, 102: 0, 103: time.Second, 104: time.Hour} {
		d.timers.set(op, at) // ops the kernel does not know: each steps as stale
	}
	d.fireDue()
	if want := []kernel.OpID{102, 101, 103}; !slices.Equal(fired, want) {
		t.Errorf("fired %v, want %v", fired, want)
	}
}
