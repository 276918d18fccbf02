package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// fakeSpans records what a session asks of its span export.
type fakeSpans struct {
	mu      sync.Mutex
	calls   []string // in order: conversation, crash, replay, observe, flush, shutdown
	conv    string
	crashed time.Time
	steps   []kernel.EventKind // replayed, then observed
}

func (f *fakeSpans) note(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.calls); n == 0 || f.calls[n-1] != what {
		f.calls = append(f.calls, what) // runs of one call counted once
	}
}

func (f *fakeSpans) SetConversation(id string) { f.note("conversation"); f.conv = id }
func (f *fakeSpans) SetCrashTime(t time.Time)  { f.note("crash"); f.crashed = t }
func (f *fakeSpans) Replay(st ports.Step) {
	f.note("replay")
	f.mu.Lock()
	f.steps = append(f.steps, st.Event.Kind)
	f.mu.Unlock()
}
func (f *fakeSpans) Observe(ports.Step)             { f.note("observe") }
func (f *fakeSpans) Flush(context.Context) error    { f.note("flush"); return nil }
func (f *fakeSpans) Shutdown(context.Context) error { f.note("shutdown"); return nil }

func (f *fakeSpans) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// runTurn starts sess with cfg, runs its driver until the root's turn
// ends (submitting prompt first, unless it is empty: the recovered turn),
// and closes the session.
func runTurn(t *testing.T, sess *Session, cfg Config, prompt string) {
	t.Helper()
	ended := make(chan kernel.Lifecycle, 4)
	cfg.Observer = rootTurnEnds(ended)
	if err := sess.Start(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sess.Driver().Run(ctx) }()
	if prompt != "" {
		if err := sess.Driver().Submit(ctx, prompt); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the turn did not end")
	}
	cancel()
	runErr := <-done
	if err := sess.Close(runErr); err != nil {
		t.Fatal(err)
	}
}

func answering(text string) ports.Model {
	return ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		sink.Text(text)
		return nil
	})
}

var noTools = ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult { return ports.ToolResult{} })

// TestSpansFollowTheSession: a session's span export is named after the
// session before the first step — the same conversation when the session
// is resumed — sees every step, and is stopped when the session closes.
func TestSpansFollowTheSession(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	var convs []string
	for i := range 2 {
		var sess *Session
		var err error
		if i == 0 {
			sess, err = Create(path)
		} else {
			sess, err = Resume(path)
		}
		if err != nil {
			t.Fatal(err)
		}
		sp := &fakeSpans{}
		cfg := Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: answering("hi"), Tools: noTools, Spans: sp}
		sess.Seed(&cfg.Kernel)
		runTurn(t, sess, cfg, "hello")
		if got, want := sp.got(), []string{"conversation", "observe", "shutdown"}; !slices.Equal(got, want) {
			t.Errorf("run %d: the span export was told %v, want %v", i+1, got, want)
		}
		convs = append(convs, sp.conv)
	}
	if len(convs[0]) != 32 || convs[0] != convs[1] || convs[0] != Conversation(path) {
		t.Errorf("conversations %q; want one 32-digit id, the session's", convs)
	}
}

// TestSpansFollowARecovery: a session that recovers a killed run tells its
// span export when that run stopped (its log's last write) and replays
// every step of its log into it before the first live step, so the spans
// the killed run left open end in this one.
func TestSpansFollowARecovery(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	sess, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	streaming, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stall := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		sink.Text("half ")
		select {
		case <-release:
		case <-ctx.Done():
		}
		return ctx.Err()
	})
	sawChunk := func(st ports.Step) {
		if st.Event.Kind == kernel.EvLLMDelta {
			once.Do(func() { close(streaming) })
		}
	}
	// The killed run: its session file and log copied while its model
	// stalls mid-stream, the log quiet.
	crashed := filepath.Join(dir, "crashed.jsonl")
	err = sess.Start(Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: stall, Tools: noTools, Observer: sawChunk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sess.Driver().Run(ctx) }()
	if err := sess.Driver().Submit(ctx, "hello"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-streaming:
	case <-time.After(20 * time.Second):
		t.Fatal("no chunk")
	}
	for _, suffix := range []string{"", LogSuffix} {
		data, err := os.ReadFile(path + suffix)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(crashed+suffix, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	cancel()
	sess.Close(<-done)
	stopped := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(crashed+LogSuffix, stopped, stopped); err != nil {
		t.Fatal(err)
	}

	rec, err := Resume(crashed)
	if err != nil {
		t.Fatal(err)
	}
	sp := &fakeSpans{}
	runTurn(t, rec, Config{Model: answering("done"), Tools: noTools, Spans: sp}, "")
	if got, want := sp.got(), []string{"crash", "replay", "conversation", "observe", "shutdown"}; !slices.Equal(got, want) {
		t.Errorf("the span export was told %v, want %v", got, want)
	}
	if !sp.crashed.Equal(stopped) {
		t.Errorf("crash time %v, want the log's last write %v", sp.crashed, stopped)
	}
	if !slices.Equal(sp.steps, []kernel.EventKind{kernel.EvSubmit, kernel.EvLLMDelta}) {
		t.Errorf("replayed %v; want the killed run's steps from its submission to its chunk", sp.steps)
	}
}

var errRefused = errors.New("refused")

// refusing is a trace nobody can write.
type refusing struct{}

func (refusing) Write([]byte) (int, error) { return 0, errRefused }

// TestFailedStartStopsSpans: a Start that fails stops the span export it
// was handed (the session owned it); a session that was never started
// leaves it to its host.
func TestFailedStartStopsSpans(t *testing.T) {
	s, err := Create(filepath.Join(t.TempDir(), "s.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	sp := &fakeSpans{}
	err = s.Start(Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: answering("x"), Tools: noTools, Spans: sp, Trace: refusing{}})
	if !errors.Is(err, errRefused) {
		t.Fatalf("Start: %v, want the trace's error", err)
	}
	if got := sp.got(); !slices.Equal(got, []string{"shutdown"}) {
		t.Errorf("the span export was told %v, want [shutdown]", got)
	}
}
