package wal

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reply is one scripted answer: text chunks (100ms apart), then tool calls;
// hang stops after the text and waits for the cancel (a stream the crash
// cuts).
type reply struct {
	text  []string
	calls []kernel.CallDelta
	hang  bool
}

// model answers requests by a function of the agent path and how many
// requests that agent has made (1-based), and records every request.
type model struct {
	mu     sync.Mutex
	reqs   []ports.Request
	per    map[string]int
	answer func(path string, n int, req ports.Request) reply
	hung   chan ports.Request // a hanging request is announced here
}

func newModel(answer func(path string, n int, req ports.Request) reply) *model {
	return &model{per: map[string]int{}, answer: answer, hung: make(chan ports.Request, 16)}
}

func (m *model) Stream(ctx context.Context, req ports.Request, sink ports.Sink) error {
	m.mu.Lock()
	m.reqs = append(m.reqs, req)
	m.per[req.Path]++
	r := m.answer(req.Path, m.per[req.Path], req)
	m.mu.Unlock()
	for _, t := range r.text {
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		sink.Text(t)
	}
	if r.hang {
		m.hung <- req
		<-ctx.Done()
		return ctx.Err()
	}
	for _, c := range r.calls {
		sink.Call(c)
	}
	return nil
}

func (m *model) requests() []ports.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]ports.Request(nil), m.reqs...)
}

// tools runs tools by name: each run is counted; a name in hang waits for
// its cancel after announcing itself on started; others take 1s.
type tools struct {
	mu      sync.Mutex
	runs    map[string]int
	hang    map[string]bool
	started chan ports.Call
	// check, when set, runs first in every call (on the tool's goroutine).
	check func(ports.Call)
}

func newTools(hang ...string) *tools {
	t := &tools{runs: map[string]int{}, hang: map[string]bool{}, started: make(chan ports.Call, 16)}
	for _, h := range hang {
		t.hang[h] = true
	}
	return t
}

func (t *tools) Run(ctx context.Context, c ports.Call) ports.ToolResult {
	if t.check != nil {
		t.check(c)
	}
	t.mu.Lock()
	t.runs[c.Name]++
	hang := t.hang[c.Name]
	t.mu.Unlock()
	if hang {
		t.started <- c
		<-ctx.Done()
		return ports.ToolResult{Status: kernel.ToolCancelled}
	}
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return ports.ToolResult{Status: kernel.ToolCancelled}
	}
	return ports.ToolResult{Status: kernel.ToolOK, Content: c.Name + " says ok"}
}

func (t *tools) count(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs[name]
}

// run is a live driver writing a log, with a channel of root turn ends.
type run struct {
	d      *live.Driver
	w      *Writer
	f      *os.File
	ended  chan kernel.Lifecycle
	cancel context.CancelFunc
	errc   chan error
}

func kernelConfig() kernel.Config {
	cfg := kernel.Config{Limits: kernel.DefaultLimits(), Idempotent: []string{"read_file", "list_dir", "grep"}}
	cfg.MaxRequests = 10
	return cfg
}

func observeEnds(ended chan kernel.Lifecycle) func(ports.Step) {
	return func(s ports.Step) {
		for _, e := range s.Effects {
			if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded && e.Life.Agent == kernel.Root {
				ended <- e.Life
			}
		}
	}
}

// startRun creates a log at path and runs a driver that writes it.
func startRun(t *testing.T, path string, cfg kernel.Config, m ports.Model, tl ports.Tools) *run {
	t.Helper()
	w, f, err := Create(path, trace.HeaderOf(cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &run{w: w, f: f, ended: make(chan kernel.Lifecycle, 16)}
	if r.d, err = live.New(live.Config{Kernel: cfg, Model: m, Tools: tl, WriteAhead: w.Record, Observer: observeEnds(r.ended)}); err != nil {
		t.Fatal(err)
	}
	r.go_()
	return r
}

// resumeRun recovers the log at path and runs the resumed driver.
func resumeRun(t *testing.T, path string, m ports.Model, tl ports.Tools) (*run, *Log) {
	t.Helper()
	r := &run{ended: make(chan kernel.Lifecycle, 16)}
	res, err := Reopen(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.w, r.f = res.Writer, res.File
	if r.d, err = live.Resume(live.Config{Model: m, Tools: tl, Observer: observeEnds(r.ended), WriteAhead: res.Writer.Record}, res.Kernel); err != nil {
		t.Fatal(err)
	}
	r.go_()
	return r, res.Log
}

func (r *run) go_() {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.errc = cancel, make(chan error, 1)
	go func() { r.errc <- r.d.Run(ctx) }()
}

// stop shuts the driver down, closes the log cleanly and its file.
func (r *run) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := r.w.Close(r.d.Kernel().Now()); err != nil {
		t.Fatal(err)
	}
	r.f.Close()
}

// crash copies the log as it is on disk now — what a kill -9 at this
// instant leaves — to a new file, then stops the old run without closing
// its log (its later records are not in the copy).
func (r *run) crash(t *testing.T, path string) string {
	t.Helper()
	synctest.Wait() // every event sent so far has been stepped and logged
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	crashed := path + ".crashed"
	if err := os.WriteFile(crashed, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r.cancel()
	if err := <-r.errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.f.Close()
	return crashed
}

func logPath(t *testing.T) string { return filepath.Join(t.TempDir(), "session.jsonl.wal") }

func history(t *testing.T, d *live.Driver, agent kernel.AgentID) []kernel.Message {
	t.Helper()
	var h []kernel.Message
	if err := d.Inspect(t.Context(), func(k *kernel.Kernel) { h = k.Agent(agent).History() }); err != nil && !errors.Is(err, live.ErrStopped) {
		t.Fatal(err)
	}
	if h == nil {
		h = d.Kernel().Agent(agent).History()
	}
	return h
}

func countContent(h []kernel.Message, role kernel.Role, text string) int {
	n := 0
	for _, m := range h {
		if m.Role == role && strings.Contains(m.Content, text) {
			n++
		}
	}
	return n
}

// disk is a fake File: it keeps what was written and what was synced, and
// can fail or tear one write, or fail a sync.
type disk struct {
	mu      sync.Mutex
	data    bytes.Buffer
	synced  int // bytes durable at the last Sync
	writes  []string
	syncsAt []int // the number of writes done at each Sync
	// failWrite (1-based) fails that write; tear writes its first half first.
	failWrite int
	tear      bool
	failSync  int // 1-based
	nsync     int
}

var errDisk = errors.New("disk on fire")

func (d *disk) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.writes)+1 == d.failWrite {
		d.writes = append(d.writes, "")
		if d.tear {
			d.data.Write(p[:len(p)/2])
			return len(p) / 2, errDisk
		}
		return 0, errDisk
	}
	d.writes = append(d.writes, string(p))
	d.data.Write(p)
	return len(p), nil
}

func (d *disk) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nsync++
	if d.nsync == d.failSync {
		return errDisk
	}
	d.synced = d.data.Len()
	d.syncsAt = append(d.syncsAt, len(d.writes))
	return nil
}

// durable reports whether line (a fragment) is in the synced bytes, and
// whether it is in the written ones.
func (d *disk) holds(fragment string) (synced, written bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := d.data.Bytes()
	return bytes.Contains(b[:d.synced], []byte(fragment)), bytes.Contains(b, []byte(fragment))
}

func (d *disk) bytes() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]byte(nil), d.data.Bytes()...)
}
