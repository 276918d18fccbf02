package mcp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// memServer serves a testServer in process: each session the client opens
// is a new go-sdk server over an in-memory pipe. A session can be frozen:
// the server then reads nothing more (a hung process whose stdin fills up).
type memServer struct {
	ts    *testServer
	dials atomic.Int32

	mu    sync.Mutex
	gates []*gate
}

// newMemServer returns a server whose sessions are let go (thawed, every
// blocked call released) when the test ends, also when it fails.
func newMemServer(t *testing.T) *memServer {
	m := &memServer{ts: newTestServer()}
	t.Cleanup(func() {
		m.thaw()
		m.ts.finish()
	})
	return m
}

func (m *memServer) config(name string) ServerConfig {
	return ServerConfig{Name: name, File: "test.json", Type: TypeStdio, dial: m.dial}
}

func (m *memServer) dial(ctx context.Context, sess *session) (sdk.Transport, error) {
	m.dials.Add(1)
	st, ct := sdk.NewInMemoryTransports()
	g := newGate()
	m.mu.Lock()
	m.gates = append(m.gates, g)
	m.mu.Unlock()
	if _, err := m.ts.build().Connect(context.Background(), &gateTransport{inner: st, gate: g}, nil); err != nil {
		return nil, err
	}
	return &tapTransport{inner: ct, tap: sess.tap, got: func(c *tapConn) { sess.conn = c }}, nil
}

// freeze stops the latest session's server from reading.
func (m *memServer) freeze() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gates[len(m.gates)-1].close()
}

// thaw lets every frozen server read again (so its goroutines can end).
func (m *memServer) thaw() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range m.gates {
		g.open()
	}
}

// gate blocks a server's reads while closed.
type gate struct {
	mu sync.Mutex
	ch chan struct{} // closed while the gate is open
}

func newGate() *gate {
	ch := make(chan struct{})
	close(ch)
	return &gate{ch: ch}
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
		g.ch = make(chan struct{})
	default:
	}
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
	default:
		close(g.ch)
	}
}

func (g *gate) wait() {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	<-ch
}

type gateTransport struct {
	inner sdk.Transport
	gate  *gate
}

func (t *gateTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &gateConn{Connection: c, gate: t.gate}, nil
}

type gateConn struct {
	sdk.Connection
	gate *gate
}

// Read holds every message that arrives while the gate is closed: the
// server no longer handles anything.
func (c *gateConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	c.gate.wait()
	return msg, err
}

// events collects the client's events.
type events struct {
	mu  sync.Mutex
	all []Event
	ch  chan Event
}

func newEvents() *events { return &events{ch: make(chan Event, 256)} }

func (e *events) add(ev Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
	select {
	case e.ch <- ev:
	default:
	}
}

func (e *events) of(kind EventKind) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Event
	for _, ev := range e.all {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// next waits for the next event of kind, at most an hour (virtual time
// under synctest: a bound that fails a broken client rather than spinning
// its ticker forever).
func (e *events) next(t *testing.T, kind EventKind) Event {
	t.Helper()
	limit := time.After(time.Hour)
	for {
		select {
		case ev := <-e.ch:
			if ev.Kind == kind {
				return ev
			}
		case <-limit:
			t.Fatalf("no %s event within an hour", kind)
		}
	}
}

// callModel asks for one tool call on the first request and answers "ok"
// to every later one.
type callModel struct {
	name, args string
	requests   atomic.Int32
}

func (m *callModel) Stream(ctx context.Context, req ports.Request, sink ports.Sink) error {
	if m.requests.Add(1) == 1 {
		sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: m.name, Args: m.args})
		return nil
	}
	sink.Text("ok: " + req.Messages[len(req.Messages)-1].Content)
	return nil
}

// recorder keeps the lifecycle events of a live run.
type recorder struct {
	mu    sync.Mutex
	lifes []kernel.Lifecycle
	ended chan kernel.Lifecycle
}

func newRecorder() *recorder { return &recorder{ended: make(chan kernel.Lifecycle, 4)} }

func (r *recorder) observe(s ports.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range s.Effects {
		if e.Kind != kernel.EffEmit {
			continue
		}
		r.lifes = append(r.lifes, e.Life)
		if e.Life.Kind == kernel.LifeTurnEnded && e.Life.Agent == kernel.Root {
			r.ended <- e.Life
		}
	}
}

func (r *recorder) of(kind kernel.LifeKind) []kernel.Lifecycle {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []kernel.Lifecycle
	for _, l := range r.lifes {
		if l.Kind == kind {
			out = append(out, l)
		}
	}
	return out
}

// toolEnds lists how each tool op ended.
func (r *recorder) toolEnds(tool kernel.OpID) []kernel.OpEnd {
	var out []kernel.OpEnd
	for _, l := range r.of(kernel.LifeOpEnded) {
		if l.Op == tool {
			out = append(out, l.End)
		}
	}
	return out
}

// toolOp is the op of the first tool call.
func (r *recorder) toolOp(t *testing.T) kernel.OpID {
	t.Helper()
	for _, l := range r.of(kernel.LifeCallFinished) {
		return l.Op
	}
	t.Fatal("no tool call finished")
	return 0
}

// drive runs a driver over tools with the given grace; stop shuts it down
// and waits for Run.
func drive(t *testing.T, m ports.Model, tools ports.Tools, grace time.Duration) (*live.Driver, *recorder, time.Time, func()) {
	t.Helper()
	rec := newRecorder()
	cfg := kernel.Config{Limits: kernel.DefaultLimits()}
	cfg.Limits.Grace = grace
	d, err := live.New(live.Config{Kernel: cfg, Model: m, Tools: tools, Observer: rec.observe})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- d.Run(ctx) }()
	var once sync.Once
	return d, rec, start, func() {
		once.Do(func() {
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// startClient starts a client on in-process servers; pings off unless the
// options say otherwise.
func startClient(t *testing.T, opts Options) *Client {
	t.Helper()
	if opts.PingInterval == 0 {
		opts.PingInterval = -1
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func call(name, args string) ports.Call {
	return ports.Call{Op: 7, Agent: kernel.Root, Path: "main", ToolCall: kernel.ToolCall{ID: "c1", Name: name, Arguments: args}}
}

func mustContain(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s %q does not contain %q", what, got, w)
		}
	}
}

var _ = fmt.Sprint

// resultOf passes a result between goroutines.
type resultOf struct {
	mu sync.Mutex
	r  ports.ToolResult
}

func (r *resultOf) set(v ports.ToolResult) { r.mu.Lock(); r.r = v; r.mu.Unlock() }
func (r *resultOf) get() ports.ToolResult  { r.mu.Lock(); defer r.mu.Unlock(); return r.r }
