package live

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// script is an in-memory model: it answers each request by the last message
// of the agent's history (a user text or a tool result), with virtual-time
// pauses between chunks.
type script struct {
	mu       sync.Mutex
	requests []ports.Request
	// answer returns the chunks for a request; a chunk is text or a call.
	answer func(req ports.Request) []chunk
	gap    time.Duration
}

type chunk struct {
	text string
	call *kernel.CallDelta
}

func (s *script) Stream(ctx context.Context, req ports.Request, sink ports.Sink) error {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	for _, c := range s.answer(req) {
		select {
		case <-time.After(s.gap):
		case <-ctx.Done():
			return ctx.Err()
		}
		if c.call != nil {
			sink.Call(*c.call)
		} else {
			sink.Text(c.text)
		}
	}
	sink.Usage(kernel.Usage{PromptTokens: 3, CompletionTokens: 2})
	return nil
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func last(req ports.Request) kernel.Message { return req.Messages[len(req.Messages)-1] }

// recorder keeps every step's event and effects (copied: the slice is reused).
type recorder struct {
	mu    sync.Mutex
	steps []ports.Step
	ended chan kernel.Lifecycle // root turn ends
}

func newRecorder() *recorder { return &recorder{ended: make(chan kernel.Lifecycle, 16)} }

func (r *recorder) observe(s ports.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Effects = append([]kernel.Effect(nil), s.Effects...)
	s.Kernel = nil
	r.steps = append(r.steps, s)
	for _, e := range s.Effects {
		if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded && e.Life.Agent == kernel.Root {
			r.ended <- e.Life
		}
	}
}

func (r *recorder) lifes(kind kernel.LifeKind) []kernel.Lifecycle {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []kernel.Lifecycle
	for _, s := range r.steps {
		for _, e := range s.Effects {
			if e.Kind == kernel.EffEmit && e.Life.Kind == kind {
				out = append(out, e.Life)
			}
		}
	}
	return out
}

// abandoned lists the ops the kernel abandoned, in order.
func (r *recorder) abandoned() []kernel.OpID {
	var out []kernel.OpID
	for _, l := range r.lifes(kernel.LifeOpEnded) {
		if l.End == kernel.OpAbandoned {
			out = append(out, l.Op)
		}
	}
	return out
}

func newDriver(t *testing.T, m ports.Model, tools ports.Tools, rec *recorder, mutate func(*kernel.Config)) *Driver {
	t.Helper()
	cfg := kernel.Config{Limits: kernel.DefaultLimits()}
	if mutate != nil {
		mutate(&cfg)
	}
	d, err := New(Config{Kernel: cfg, Model: m, Tools: tools, Observer: rec.observe})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// start runs d in a goroutine and returns a stop function that shuts it
// down, waits for Run to return, and checks that every op goroutine still
// running then is one the kernel abandoned.
func start(t *testing.T, d *Driver) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	return func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
		if running, abandoned := d.procCount(), len(d.Abandoned()); running != abandoned {
			t.Errorf("Run returned with %d op goroutines running, %d of them abandoned", running, abandoned)
		}
	}
}

var noTools = ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult {
	return ports.ToolResult{Status: kernel.ToolError, Content: "no tools"}
})

// TestSynctestToolTurn runs a whole turn — streamed text, a streamed tool
// call, the tool, the follow-up request — in virtual time, and checks the
// event clock to the nanosecond: the driver's timing is deterministic under
// testing/synctest with an in-memory model and tools.
func TestSynctestToolTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &script{gap: 10 * time.Millisecond, answer: func(req ports.Request) []chunk {
			if last(req).Role == kernel.RoleTool {
				return []chunk{{text: "the file says "}, {text: last(req).Content}}
			}
			return []chunk{
				{text: "Let me look."},
				{call: &kernel.CallDelta{Index: 0, ID: "c1", Name: "read_file"}},
				{call: &kernel.CallDelta{Index: 0, Args: `{"path":`}},
				{call: &kernel.CallDelta{Index: 0, Args: `"a.txt"}`}},
			}
		}}
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			time.Sleep(time.Second)
			return ports.ToolResult{Status: kernel.ToolOK, Content: "hello from " + c.Arguments}
		})
		rec := newRecorder()
		d := newDriver(t, m, tools, rec, nil)
		stop := start(t, d)
		if err := d.Submit(t.Context(), "read a.txt"); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		stop()
		if end.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("outcome %s", end.Outcome)
		}
		// 4 chunks, 1 s tool, 2 chunks: 40ms + 1s + 20ms of virtual time.
		if want := 1060 * time.Millisecond; end.At != want {
			t.Errorf("turn ended at %v, want %v", end.At, want)
		}
		h := d.Kernel().Agent(kernel.Root).History()
		if err := kernel.ValidateTranscript(h, false); err != nil {
			t.Fatal(err)
		}
		got := h[len(h)-1].Content
		if want := `the file says hello from {"path":"a.txt"}`; got != want {
			t.Errorf("answer %q, want %q", got, want)
		}
		if m.count() != 2 {
			t.Errorf("%d requests, want 2", m.count())
		}
		var ends []kernel.Event
		for _, s := range rec.steps {
			if s.Event.Kind == kernel.EvLLMEnd {
				ends = append(ends, s.Event)
			}
		}
		if len(ends) != 2 || ends[0].Usage == nil || ends[0].Usage.CompletionTokens != 2 {
			t.Errorf("usage not carried on the stream end: %+v", ends)
		}
	})
}

// TestSynctestCancelAbandonsStubbornTool: a tool that ignores its cancel is
// abandoned exactly Grace after the cancel (F3, I3), the turn ends
// interrupted then, no request follows (F1), and Run returns at once on
// shutdown without waiting for the abandoned goroutine, which is listed as
// abandoned until it returns and then sends nothing the kernel sees.
func TestSynctestCancelAbandonsStubbornTool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &script{gap: time.Millisecond, answer: func(req ports.Request) []chunk {
			return []chunk{{call: &kernel.CallDelta{Index: 0, ID: "c1", Name: "slow", Args: `{}`}}}
		}}
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			time.Sleep(10 * time.Second) // ignores ctx
			return ports.ToolResult{Status: kernel.ToolOK, Content: "too late"}
		})
		rec := newRecorder()
		d := newDriver(t, m, tools, rec, func(c *kernel.Config) { c.Grace = 2 * time.Second })
		stop := start(t, d)
		t0 := time.Now()
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if err := d.Cancel(t.Context(), kernel.Root, 0); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeInterrupted || end.Reason != kernel.ReasonUserCancel {
			t.Fatalf("turn ended %s/%s", end.Outcome, end.Reason)
		}
		if want := 3 * time.Second; end.At != want {
			t.Errorf("turn ended at %v, want cancel (1s) + grace (2s) = %v", end.At, want)
		}
		stop()
		if took := time.Since(t0); took != 3*time.Second {
			t.Errorf("Run returned %v after the start, want 3s: it waited for the abandoned tool", took)
		}
		ab := rec.abandoned()
		if len(ab) != 1 {
			t.Fatalf("abandoned ops %v, want the stubborn tool", ab)
		}
		want := []AbandonedOp{{Op: ab[0], Agent: kernel.Root, Path: "main", Tool: "slow", At: 3 * time.Second}}
		if got := d.Abandoned(); !slices.Equal(got, want) {
			t.Errorf("Abandoned() = %+v, want %+v", got, want)
		}
		steps := len(rec.steps)
		time.Sleep(time.Hour) // the tool returns at 10s and its result is dropped
		if got := d.Abandoned(); len(got) != 0 {
			t.Errorf("Abandoned() = %+v after the tool returned", got)
		}
		if len(rec.steps) != steps {
			t.Errorf("the abandoned tool's late result reached the kernel after Run returned: %+v", rec.steps[steps:])
		}
		if n := len(rec.lifes(kernel.LifeOpEnded)); n != 2 {
			t.Errorf("%d op ends, want 2 (request, abandoned tool)", n)
		}
		if m.count() != 1 {
			t.Errorf("%d requests after the interrupt, want 1 (F1)", m.count())
		}
	})
}

// TestSynctestCancelStream: a cancel mid-stream reaches the model's context
// at once, the partial text is kept (F7), and the tree is quiescent at the
// cancel's instant (the model acknowledged without delay).
func TestSynctestCancelStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &script{gap: 100 * time.Millisecond, answer: func(ports.Request) []chunk {
			return []chunk{{text: "one "}, {text: "two "}, {text: "three "}, {text: "four"}}
		}}
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, nil)
		stop := start(t, d)
		defer stop()
		if err := d.Submit(t.Context(), "count"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(250 * time.Millisecond)
		if err := d.Cancel(t.Context(), kernel.Root, 1); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.At != 250*time.Millisecond || end.Text != "one two " {
			t.Errorf("turn ended at %v with %q; want 250ms with the partial %q", end.At, end.Text, "one two ")
		}
		var hist []kernel.Message
		if err := d.Inspect(t.Context(), func(k *kernel.Kernel) {
			hist = k.Agent(kernel.Root).History()
			if !k.Quiescent() {
				t.Error("not quiescent after the interrupted turn ended")
			}
		}); err != nil {
			t.Fatal(err)
		}
		if len(hist) != 3 || !hist[1].Partial || !hist[2].Marker {
			t.Errorf("history %+v; want user, partial assistant, marker", hist)
		}
		// A cancel bound to the ended turn is a no-op (F14).
		if err := d.Cancel(t.Context(), kernel.Root, 1); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSynctestSayInterjects: a line said while the root streams becomes an
// interjection (the stream is cut and restarted with it), a line said while
// it is Idle starts a turn.
func TestSynctestSayInterjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &script{gap: 100 * time.Millisecond, answer: func(req ports.Request) []chunk {
			return []chunk{{text: "re: " + last(req).Content}}
		}}
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, nil)
		stop := start(t, d)
		defer stop()
		if err := d.Say(t.Context(), "first"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if err := d.Say(t.Context(), "also this"); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeCompleted || end.Text != "re: also this" {
			t.Fatalf("turn ended %s %q", end.Outcome, end.Text)
		}
		if got := len(rec.lifes(kernel.LifeInterjected)); got != 1 {
			t.Errorf("%d interjections, want 1", got)
		}
		if err := d.Say(t.Context(), "next"); err != nil {
			t.Fatal(err)
		}
		if end := <-rec.ended; end.Turn != 2 || end.Text != "re: next" {
			t.Errorf("second turn %d %q", end.Turn, end.Text)
		}
		// Submit while busy is refused by the kernel and says so.
		if err := d.Submit(t.Context(), "a"); err != nil {
			t.Fatal(err)
		}
		if err := d.Submit(t.Context(), "b"); !errors.Is(err, ErrRejected) {
			t.Errorf("submit while streaming: %v, want ErrRejected", err)
		}
		<-rec.ended
	})
}

// TestShutdownMidTurn: ending Run's context aborts the running turn with
// reason shutdown, cancels the stream and returns once everything ended.
func TestShutdownMidTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			sink.Text("partial")
			<-ctx.Done()
			return ctx.Err()
		})
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, nil)
		stop := start(t, d)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		stop()
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeInterrupted || end.Reason != kernel.ReasonShutdown {
			t.Errorf("turn ended %s/%s, want interrupted/shutdown", end.Outcome, end.Reason)
		}
		if !d.Kernel().Quiescent() {
			t.Error("Run returned before the kernel was quiescent")
		}
		if err := d.Submit(t.Context(), "late"); !errors.Is(err, ErrStopped) {
			t.Errorf("submit after stop: %v, want ErrStopped", err)
		}
	})
}

// TestPanicsBecomeResults: a panicking tool is an error result for the
// model; a panicking model fails the request; neither crashes the process.
func TestPanicsBecomeResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			n++
			switch n {
			case 1:
				sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "boom", Args: "{}"})
				return nil
			case 2:
				if c := last(req).Content; !strings.Contains(c, "tool boom panicked: kaboom") {
					return fmt.Errorf("tool result %q lacks the panic", c)
				}
				panic("model bug")
			}
			return nil
		})
		tools := ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult { panic("kaboom") })
		rec := newRecorder()
		d := newDriver(t, m, tools, rec, nil)
		stop := start(t, d)
		defer stop()
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeFailed {
			t.Fatalf("outcome %s, want failed", end.Outcome)
		}
		var detail string
		for _, s := range rec.steps {
			if s.Event.Kind == kernel.EvLLMError {
				detail = s.Event.Text
				if s.Event.Failure != kernel.FailureBadResponse {
					t.Errorf("failure %s, want bad_response", s.Event.Failure)
				}
			}
		}
		if !strings.Contains(detail, "model panicked: model bug") {
			t.Errorf("error detail %q", detail)
		}
	})
}

// TestTimersFireInOrder: the stall watchdog of a silent stream fires in
// virtual time at exactly its deadline, and the abort is typed (F13).
func TestTimersFireInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			sink.Text("hi")
			<-ctx.Done() // then silence
			return ctx.Err()
		})
		rec := newRecorder()
		d := newDriver(t, m, noTools, rec, func(c *kernel.Config) { c.StallTimeout = 5 * time.Second })
		stop := start(t, d)
		defer stop()
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Reason != kernel.ReasonStallTimeout || end.At != 5*time.Second {
			t.Errorf("turn ended %s at %v, want stall_timeout at 5s", end.Reason, end.At)
		}
	})
}

// TestRealClock runs one short turn on the real clock (no synctest): the
// same driver, real goroutines and timers.
func TestRealClock(t *testing.T) {
	m := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		sink.Text("real")
		return nil
	})
	rec := newRecorder()
	d := newDriver(t, m, noTools, rec, nil)
	stop := start(t, d)
	if err := d.Submit(context.Background(), "hi"); err != nil {
		t.Fatal(err)
	}
	var end kernel.Lifecycle
	select { // the real clock: a hang must not last until the test binary's timeout
	case end = <-rec.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the turn did not end within 10s")
	}
	stop()
	if end.Text != "real" {
		t.Errorf("text %q", end.Text)
	}
	prev := time.Duration(-1)
	for _, s := range rec.steps {
		if s.Event.At < prev {
			t.Fatalf("event time went backwards: %v after %v", s.Event.At, prev)
		}
		prev = s.Event.At
		if s.Target != kernel.NoAgent && s.Event.Kind == kernel.EvSubmit && s.Before != fsm.Idle {
			t.Errorf("submit saw root in %s", s.Before)
		}
	}
	if err := d.Run(context.Background()); err == nil {
		t.Error("second Run did not fail")
	}
}

// TestKernelReadableBeforeRun: before Run, the kernel may be read (the
// root's starting history); while Run runs, Kernel refuses; after, it may be
// read again.
func TestKernelReadableBeforeRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		model := ports.ModelFunc(func(context.Context, ports.Request, ports.Sink) error { return nil })
		tools := ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult { return ports.ToolResult{} })
		d, err := New(Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits(), System: "sys"}, Model: model, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		if h := d.Kernel().Agent(kernel.Root).History(); len(h) != 1 || h[0].Content != "sys" {
			t.Fatalf("starting history %+v", h)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		synctest.Wait()
		func() {
			defer func() {
				if recover() == nil {
					t.Error("Kernel did not panic while Run runs")
				}
			}()
			d.Kernel()
		}()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !d.Kernel().Quiescent() {
			t.Error("not quiescent after Run")
		}
	})
}

// TestTimerHeapOrder: due timers come out by deadline and, for equal
// deadlines, by op id (the order the kernel set them); a stopped timer is
// skipped, and nothing comes out before its deadline.
func TestTimerHeapOrder(t *testing.T) {
	tm := newTimers()
	for _, e := range []timerEntry{{5, 7}, {2, 9}, {8, 4}, {5, 3}} {
		tm.set(e.op, e.at)
	}
	tm.stop(9)
	if op, ok := tm.popDue(4); ok {
		t.Fatalf("timer %d fired at 4, before its deadline", op)
	}
	var got []kernel.OpID
	for {
		op, ok := tm.popDue(8)
		if !ok {
			break
		}
		got = append(got, op)
	}
	if want := []kernel.OpID{3, 7, 4}; !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if _, ok := tm.next(); ok || len(tm.live) != 0 {
		t.Errorf("timers left after all fired: %v", tm.live)
	}
}
