package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/toolset"
	"github.com/escapement/escapement/kernel"
)

// newAgent builds an agent and closes it at the end of the test.
func newAgent(t *testing.T, cfg Config) *Agent {
	t.Helper()
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

// TestRunStreamsAndResults: a turn's events carry the answer as it
// streams, and its Result the whole answer, the outcome and the usage
// summed over its requests.
func TestRunStreamsAndResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			if req.Messages[len(req.Messages)-1].Role == kernel.RoleTool {
				sink.Text("It is ")
				sink.Text("noon.")
				sink.Usage(kernel.Usage{PromptTokens: 20, CompletionTokens: 3})
				return nil
			}
			sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "now", Args: "{}"})
			sink.Usage(kernel.Usage{PromptTokens: 10, CompletionTokens: 2})
			return nil
		})
		tools, err := toolset.New()
		if err != nil {
			t.Fatal(err)
		}
		if err := tools.AddFunc(ports.ToolSpec{Name: "now", Description: "the time"}, func(context.Context, json.RawMessage) (string, error) { return "12:00", nil }); err != nil {
			t.Fatal(err)
		}
		a := newAgent(t, Config{Model: model, Tools: tools})
		turn := a.Run(t.Context(), "what time is it?")
		var streamed strings.Builder
		kinds := map[kernel.LifeKind]int{}
		for ev := range turn.Events() {
			streamed.WriteString(ev.Answer())
			kinds[ev.Kind]++
		}
		res, err := turn.Result()
		if err != nil {
			t.Fatal(err)
		}
		if streamed.String() != "It is noon." || res.Answer != "It is noon." || !res.Completed() || res.Err() != nil || res.Turn != 1 {
			t.Errorf("streamed %q, result %+v", streamed.String(), res)
		}
		if !res.UsageKnown || res.Usage != (kernel.Usage{PromptTokens: 30, CompletionTokens: 5, Requests: 2}) {
			t.Errorf("usage %+v (known %v), want the two requests' sum, both reported", res.Usage, res.UsageKnown)
		}
		if kinds[kernel.LifeToolStarted] != 1 || kinds[kernel.LifeTurnEnded] != 1 || kinds[kernel.LifeTurnStarted] != 1 {
			t.Errorf("events by kind %v: want one tool start, one turn start and one turn end", kinds)
		}
		// The events stay: ranging again yields them all again.
		n := 0
		for range turn.Events() {
			n++
		}
		if want := sum(kinds); n != want {
			t.Errorf("ranging again: %d events, want %d", n, want)
		}
	})
}

func sum(m map[kernel.LifeKind]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestCancelledContextIsEsc: cancelling the turn's context while the model
// streams ends the turn as the user's Esc does — interrupted, user_cancel,
// the streamed text kept as the answer — and no request follows.
func TestCancelledContextIsEsc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var requests atomic.Int32
		model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			requests.Add(1)
			for ctx.Err() == nil {
				sink.Text("tick ")
				time.Sleep(10 * time.Millisecond)
			}
			return ctx.Err()
		})
		a := newAgent(t, Config{Model: model})
		ctx, cancel := context.WithCancel(t.Context())
		turn := a.Run(ctx, "count")
		time.Sleep(35 * time.Millisecond)
		cancel()
		res, err := turn.Result()
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != kernel.OutcomeInterrupted || res.Reason != kernel.ReasonUserCancel || !errors.Is(res.Err(), ErrInterrupted) {
			t.Fatalf("result %+v, want interrupted by user_cancel", res)
		}
		if !strings.HasPrefix(res.Answer, "tick tick") {
			t.Errorf("answer %q: want the text streamed before the cancel", res.Answer)
		}
		time.Sleep(time.Minute) // anything the kernel would still send
		if n := requests.Load(); n != 1 {
			t.Errorf("%d requests, want 1: a request followed the cancel", n)
		}
		// The agent takes the next turn.
		if _, err := a.Run(t.Context(), "again").Result(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDelegateOffered: the delegate tool is offered with the agent's own
// tools when the agent may delegate (MaxDepth > 0, the default), and not
// when it may not; a delegation runs a sub-agent whose result reaches the
// root.
func TestDelegateOffered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		offered := map[string][]string{} // by agent path
		model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			var names []string
			for _, s := range req.Tools {
				names = append(names, s.Name)
			}
			mu.Lock()
			offered[req.Path] = names
			mu.Unlock()
			last := req.Messages[len(req.Messages)-1]
			switch {
			case req.Agent != kernel.Root:
				sink.Text("child done")
			case last.Role == kernel.RoleTool:
				sink.Text("the child said: " + last.Content)
			default:
				sink.Call(kernel.CallDelta{Index: 0, ID: "d1", Name: "delegate", Args: `{"task":"look","name":"scout"}`})
			}
			return nil
		})
		tools, _ := toolset.New()
		if err := tools.AddFunc(ports.ToolSpec{Name: "noop", Description: "nothing"}, func(context.Context, json.RawMessage) (string, error) { return "", nil }); err != nil {
			t.Fatal(err)
		}
		a := newAgent(t, Config{Model: model, Tools: tools})
		res, err := a.Run(t.Context(), "delegate it").Result()
		if err != nil || !res.Completed() || !strings.Contains(res.Answer, "child done") {
			t.Fatalf("result %+v, %v: want the child's result in the answer", res, err)
		}
		if got := fmt.Sprint(offered["main"]); got != "[noop delegate]" {
			t.Errorf("the root was offered %s, want [noop delegate]", got)
		}
		limits := kernel.DefaultLimits()
		limits.MaxDepth = 0
		b := newAgent(t, Config{Model: model, Tools: tools, Limits: limits})
		b.Run(t.Context(), "delegate it").Result()
		if got := fmt.Sprint(offered["main"]); got != "[noop]" {
			t.Errorf("an agent that may not delegate was offered %s, want [noop]", got)
		}
	})
}

// TestToolNamedDelegateRefused: an agent that may delegate refuses a tool
// of the delegation tool's name (the kernel would run its calls itself).
func TestToolNamedDelegateRefused(t *testing.T) {
	tools, _ := toolset.New()
	if err := tools.AddFunc(ports.ToolSpec{Name: "delegate", Description: "mine"}, func(context.Context, json.RawMessage) (string, error) { return "", nil }); err != nil {
		t.Fatal(err)
	}
	model := ports.ModelFunc(func(context.Context, ports.Request, ports.Sink) error { return nil })
	if _, err := New(Config{Model: model, Tools: tools}); err == nil || !strings.Contains(err.Error(), `"delegate"`) {
		t.Fatalf("New: %v, want a refusal naming the tool", err)
	}
}

// TestOneTurnAtATime: a turn asked while one runs is refused (ErrBusy),
// and a turn asked of a closed agent too (ErrClosed); a running turn that
// Close shuts down ends interrupted by shutdown.
func TestOneTurnAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			<-ctx.Done()
			return ctx.Err()
		})
		a, err := New(Config{Model: model})
		if err != nil {
			t.Fatal(err)
		}
		first := a.Run(t.Context(), "one")
		if _, err := a.Run(t.Context(), "two").Result(); !errors.Is(err, ErrBusy) {
			t.Fatalf("a second turn: %v, want ErrBusy", err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		res, err := first.Result()
		if err != nil || res.Outcome != kernel.OutcomeInterrupted || res.Reason != kernel.ReasonShutdown {
			t.Fatalf("the running turn: %+v, %v; want interrupted by shutdown", res, err)
		}
		if _, err := a.Run(t.Context(), "three").Result(); !errors.Is(err, ErrClosed) {
			t.Fatalf("a turn after Close: %v, want ErrClosed", err)
		}
	})
}

// TestSessionKeepsHistory: an agent with a session writes its turns there;
// a new agent on the file resumes it — the model sees the earlier turn —
// and a clean Close leaves no write-ahead log behind.
func TestSessionKeepsHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	var seen [][]kernel.Message
	model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		seen = append(seen, req.Messages)
		sink.Text(fmt.Sprintf("answer %d", len(seen)))
		return nil
	})
	for i, prompt := range []string{"first", "second"} {
		a, err := New(Config{Model: model, Session: path, System: "be brief"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := a.Run(t.Context(), prompt).Result()
		if err != nil || !res.Completed() || res.Turn != uint64(i+1) {
			t.Fatalf("turn %d: %+v, %v", i+1, res, err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(seen[1]); got != 4 || seen[1][2].Content != "answer 1" {
		t.Errorf("the resumed turn sent %d messages (%+v): want the system prompt, the first turn and the new prompt", got, seen[1])
	}
	if m, _ := filepath.Glob(path + ".*"); len(m) != 0 {
		t.Errorf("left beside the session: %v", m)
	}
}

// TestExitStatus: a program's end as the CLI's: 0, 130 for an interrupted
// turn, 1 for anything else.
func TestExitStatus(t *testing.T) {
	interrupted := Result{Turn: 1, Outcome: kernel.OutcomeInterrupted, Reason: kernel.ReasonUserCancel}.Err()
	failed := Result{Turn: 1, Outcome: kernel.OutcomeFailed, Reason: kernel.ReasonLLMError, Detail: "HTTP 404"}.Err()
	for err, want := range map[error]int{nil: 0, interrupted: 130, failed: 1, errors.Join(ErrClosed, interrupted): 130, ErrClosed: 1} {
		if got := report(err); got != want {
			t.Errorf("report(%v) = %d, want %d", err, got, want)
		}
	}
	if !strings.Contains(failed.Error(), "HTTP 404") || !errors.Is(failed, ErrFailed) {
		t.Errorf("a failed turn's error %q: want its detail, wrapping ErrFailed", failed)
	}
}

// TestEmptyPromptWithoutUnfinishedTurn: with no turn to take up, an empty
// prompt is the kernel's refusal.
func TestEmptyPromptWithoutUnfinishedTurn(t *testing.T) {
	model := ports.ModelFunc(func(context.Context, ports.Request, ports.Sink) error { return nil })
	a := newAgent(t, Config{Model: model})
	if _, err := a.Run(t.Context(), "").Result(); !errors.Is(err, kernel.ErrEmptyText) {
		t.Fatalf("an empty prompt: %v, want kernel.ErrEmptyText", err)
	}
}

// recordingSpans records what an agent asks of its span export.
type recordingSpans struct {
	mu    sync.Mutex
	calls []string // runs of one call noted once
	conv  string
}

func (r *recordingSpans) note(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.calls); n == 0 || r.calls[n-1] != what {
		r.calls = append(r.calls, what)
	}
}

func (r *recordingSpans) SetConversation(id string)      { r.note("conversation"); r.conv = id }
func (r *recordingSpans) SetCrashTime(time.Time)         { r.note("crash") }
func (r *recordingSpans) Replay(ports.Step)              { r.note("replay") }
func (r *recordingSpans) Observe(ports.Step)             { r.note("observe") }
func (r *recordingSpans) Flush(context.Context) error    { r.note("flush"); return nil }
func (r *recordingSpans) Shutdown(context.Context) error { r.note("shutdown"); return nil }

// TestSpansExported: an agent hands its span export every step, named
// after a conversation of its own (its session's, with one), and stops it
// at Close — with a session or without.
func TestSpansExported(t *testing.T) {
	model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		sink.Text("hi")
		return nil
	})
	for _, session := range []string{"", filepath.Join(t.TempDir(), "s.jsonl")} {
		sp := &recordingSpans{}
		a, err := New(Config{Model: model, Session: session, Spans: sp})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := a.Run(t.Context(), "hello").Result(); err != nil || !res.Completed() {
			t.Fatalf("session %q: %+v, %v", session, res, err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(sp.calls, " "); got != "conversation observe shutdown" || len(sp.conv) != 32 {
			t.Errorf("session %q: the span export was told %q (conversation %q), want conversation observe shutdown", session, got, sp.conv)
		}
	}
}
