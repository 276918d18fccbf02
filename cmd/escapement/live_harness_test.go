package main

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/internal/protocheck"
	"github.com/escapement/escapement/kernel"
)

// cli is one in-process run of the CLI with its stdin a pipe, its signals
// and its hard exit injected: the test sends signals and sees exits
// without the test binary being signalled or ending.
type cli struct {
	t      *testing.T
	stdin  *os.File // the write end; closed by endInput
	sigs   chan os.Signal
	exits  chan int
	out    *syncBuffer
	errb   *syncBuffer
	code   chan int
	result *int
}

// startCLI starts runWith(args) in a goroutine the test owns: cleanup
// waits (boundedly) for it to return.
func startCLI(t *testing.T, args []string, opts ...func(*app)) *cli {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &cli{t: t, stdin: w, sigs: make(chan os.Signal), exits: make(chan int, 4), out: &syncBuffer{}, errb: &syncBuffer{}, code: make(chan int, 1)}
	go func() { // owned: the cleanup below receives from code
		c.code <- runWith(context.Background(), args, streams{in: r, out: c.out, err: c.errb},
			func(code int) { c.exits <- code },
			func() (<-chan os.Signal, func()) { return c.sigs, func() {} }, opts...)
	}()
	t.Cleanup(func() {
		if c.result == nil {
			w.Close()
			select {
			case <-c.code:
			case <-time.After(30 * time.Second):
				t.Errorf("%v never returned\nstderr: %s", args, c.errb)
			}
		}
		r.Close()
		w.Close()
	})
	return c
}

func (c *cli) say(line string) {
	c.t.Helper()
	if _, err := c.stdin.WriteString(line + "\n"); err != nil {
		c.t.Fatal(err)
	}
}

// signal delivers sig (the command reads signals all its life: a signal
// that is not taken within a generous bound is the bug).
func (c *cli) signal(sig os.Signal) {
	c.t.Helper()
	select {
	case c.sigs <- sig:
	case <-time.After(10 * time.Second):
		c.t.Fatalf("the command did not read %v\nstderr: %s", sig, c.errb)
	}
}

// wait returns the exit code, failing when the command has not returned
// within bound (a hang catcher, not a speed check).
func (c *cli) wait(bound time.Duration) int {
	c.t.Helper()
	if c.result != nil {
		return *c.result
	}
	select {
	case code := <-c.code:
		c.result = &code
		return code
	case <-time.After(bound):
		c.t.Fatalf("still running %v later\nstdout: %s\nstderr: %s", bound, c.out, c.errb)
		return 0
	}
}

// jsonEvents validates every line of --json stdout against the protocol's
// JSON Schema (docs/protocol.md) and decodes it: every test that reads
// --json output goes through here, so a line any of them prints that
// breaks the protocol fails it. A whole run's output opens with started
// and closes with result.
func jsonEvents(t *testing.T, out string) []protocol.Event {
	t.Helper()
	evs := protocheck.Lines(t, out)
	if len(evs) > 0 && evs[0].Type != protocol.TypeStarted {
		t.Errorf("--json opens with %s, want started", evs[0].Type)
	}
	return evs
}

// jsonRun is jsonEvents of a run that has ended: its last line is the
// result.
func jsonRun(t *testing.T, out string) []protocol.Event {
	t.Helper()
	evs := jsonEvents(t, out)
	if len(evs) == 0 || evs[len(evs)-1].Type != protocol.TypeResult {
		t.Fatalf("--json output does not end with a result:\n%s", out)
	}
	return evs
}

// lastOf is the last event of type typ (of the agent at path, when not
// ""), and whether there is one.
func lastOf(evs []protocol.Event, typ, path string) (protocol.Event, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == typ && (path == "" || evs[i].Agent == path) {
			return evs[i], true
		}
	}
	return protocol.Event{}, false
}

// stuckTools is a toolBox whose only tool, "stuck", ignores its context
// and blocks until the test ends (as grep did opening a FIFO).
type stuckTools struct {
	release chan struct{}
	started chan struct{}
	once    sync.Once
}

func newStuckTools(t *testing.T) *stuckTools {
	s := &stuckTools{release: make(chan struct{}), started: make(chan struct{})}
	t.Cleanup(func() { close(s.release) })
	return s
}

func (s *stuckTools) inject(a *app) {
	a.newTools = func(tools.Config) (toolBox, error) { return s, nil }
}

func (s *stuckTools) Run(ctx context.Context, c ports.Call) ports.ToolResult {
	s.once.Do(func() { close(s.started) })
	<-s.release // ctx is ignored on purpose
	return ports.ToolResult{Status: kernel.ToolOK, Content: "too late"}
}

func (s *stuckTools) Specs() []ports.ToolSpec {
	return []ports.ToolSpec{{Name: "stuck", Description: "never returns", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
}

func (s *stuckTools) KillAll()     {}
func (s *stuckTools) Close() error { return nil }
