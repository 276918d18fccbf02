package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const apiKey = "sk-test-SECRET-0123456789"

// sink records what a stream produced.
type sink struct {
	mu      sync.Mutex
	text    strings.Builder
	calls   []kernel.CallDelta
	retries []string
	delays  []time.Duration
	usage   *kernel.Usage
	// progress counts Progress calls: output that is no answer text (a
	// reasoning model's thinking) but shows the server is producing.
	progress int
	first    chan struct{}
	once     sync.Once
	retried  chan struct{} // closed at the first Retry
	once2    sync.Once
}

func newSink() *sink { return &sink{first: make(chan struct{}), retried: make(chan struct{})} }

func (s *sink) Text(t string) {
	s.mu.Lock()
	s.text.WriteString(t)
	s.mu.Unlock()
	s.once.Do(func() { close(s.first) })
}
func (s *sink) Call(d kernel.CallDelta) {
	s.mu.Lock()
	s.calls = append(s.calls, d)
	s.mu.Unlock()
}
func (s *sink) Retry(attempt int, delay time.Duration, cause string) {
	s.mu.Lock()
	s.retries = append(s.retries, fmt.Sprintf("%d %s", attempt, cause))
	s.delays = append(s.delays, delay)
	s.mu.Unlock()
	s.once2.Do(func() { close(s.retried) })
}
func (s *sink) Usage(u kernel.Usage) { s.mu.Lock(); s.usage = &u; s.mu.Unlock() }
func (s *sink) Progress()            { s.mu.Lock(); s.progress++; s.mu.Unlock() }

// assembled concatenates call fragments the way the kernel does.
func (s *sink) assembled() []kernel.ToolCall {
	var out []kernel.ToolCall
	for _, d := range s.calls {
		for len(out) <= d.Index {
			out = append(out, kernel.ToolCall{})
		}
		c := &out[d.Index]
		if d.ID != "" {
			c.ID = d.ID
		}
		if d.Name != "" {
			c.Name = d.Name
		}
		c.Arguments += d.Args
	}
	return out
}

// clock is the adapter's time in tests: Sleep records the wait and moves
// Now on at once, so no test sleeps through a backoff or a Retry-After.
type clock struct {
	mu    sync.Mutex
	now   time.Time
	slept []time.Duration
}

func newClock() *clock { return &clock{now: time.Date(2015, 10, 21, 7, 28, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock on (a server "taking" d to answer).
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.slept = append(c.slept, d)
	c.mu.Unlock()
	return nil
}

func (c *clock) Slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.slept)
}

// newModel builds a model for srv with a pinned jitter and a fake clock.
func newModel(t *testing.T, srv *fakeopenai.Server, mutate func(*openai.Config)) *openai.Model {
	t.Helper()
	m, _ := newModelClock(t, srv, mutate)
	return m
}

func newModelClock(t *testing.T, srv *fakeopenai.Server, mutate func(*openai.Config)) (*openai.Model, *clock) {
	t.Helper()
	clk := newClock()
	box, err := tools.New(tools.Config{Workspace: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close() })
	cfg := openai.Config{APIKey: apiKey, BaseURL: srv.BaseURL(), Model: "fake-model", Tools: box.Specs(),
		RetryBase: 10 * time.Millisecond, Jitter: func() float64 { return 0.5 }, Now: clk.Now, Sleep: clk.Sleep}
	if mutate != nil {
		mutate(&cfg)
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, clk
}

func request(msgs ...kernel.Message) ports.Request {
	if len(msgs) == 0 {
		msgs = []kernel.Message{{Role: kernel.RoleUser, Content: "hi"}}
	}
	return ports.Request{Op: 1, Path: "main", Messages: msgs}
}

func failure(err error) kernel.Failure {
	var fe *ports.FailureError
	if errors.As(err, &fe) {
		return fe.Failure
	}
	return kernel.FailureNone
}

// runTurn runs one turn through the live driver and returns the root's
// turn end and the kernel (after Run returned).
func runTurn(t *testing.T, m ports.Model, tl ports.Tools, prompt string, mutate ...func(*kernel.Config)) (kernel.Lifecycle, *kernel.Kernel) {
	t.Helper()
	return runTurnObserved(t, m, tl, prompt, nil, mutate...)
}

// runTurnObserved is runTurn with an observer of every step (which reads
// children before they are freed).
func runTurnObserved(t *testing.T, m ports.Model, tl ports.Tools, prompt string, observe func(ports.Step), mutate ...func(*kernel.Config)) (kernel.Lifecycle, *kernel.Kernel) {
	t.Helper()
	ended := make(chan kernel.Lifecycle, 1)
	cfg := kernel.Config{Limits: kernel.DefaultLimits()}
	for _, f := range mutate {
		f(&cfg)
	}
	d, err := live.New(live.Config{Kernel: cfg, Model: m, Tools: tl, Observer: func(s ports.Step) {
		if observe != nil {
			observe(s)
		}
		for _, e := range s.Effects {
			if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded && e.Life.Agent == kernel.Root {
				ended <- e.Life
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	if err := d.Submit(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	var end kernel.Lifecycle
	select {
	case end = <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("turn did not end")
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return end, d.Kernel()
}

// providerStream reads a recorded provider response from the shared
// recordings beside the checkout (shared/provider-streams in a parent
// directory: read in place, never copied into the repository). A machine
// without them skips the test, saying so.
func providerStream(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "shared", "provider-streams", name)); err == nil {
			return string(b)
		}
		if filepath.Dir(d) == d {
			t.Skipf("no shared/provider-streams/%s above %s: the recordings are not on this machine", name, dir)
		}
	}
}

// bodyOf decodes a recorded request's raw body into a generic value.
func bodyOf(t *testing.T, r fakeopenai.Request) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Raw, &v); err != nil {
		t.Fatalf("request %d body: %v", r.N, err)
	}
	return v
}

// messagesOf is a decoded body's messages.
func messagesOf(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	raw, _ := body["messages"].([]any)
	out := make([]map[string]any, len(raw))
	for i, m := range raw {
		out[i], _ = m.(map[string]any)
	}
	return out
}
