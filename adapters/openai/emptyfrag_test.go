package openai_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// TestEmptyFragmentsMeetTheStallWatchdog: a server that names a tool call
// and then streams fragments that add nothing — only an index, an empty
// function, empty arguments, a null id — as fast as it can is silent to
// the watchdogs: the turn ends stall_timeout (not at the turn deadline),
// and the write-ahead log the driver keeps (every step, as adapters/wal
// writes it) stays a few kilobytes (docs/semantics.md, "Deadlines").
func TestEmptyFragmentsMeetTheStallWatchdog(t *testing.T) {
	empty := []string{
		`{"index":0}`,
		`{"index":0,"function":{}}`,
		`{"index":0,"function":{"arguments":""}}`,
		`{"index":0,"id":null,"type":"function","function":{"name":"","arguments":null}}`,
	}
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.CallStart(0, "c1", "read_file")
		for i := 0; ctx.Err() == nil; i++ {
			frag := empty[i%len(empty)]
			if w.Raw(fmt.Sprintf(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[%s]},"finish_reason":null}]}`, frag)) != nil {
				return
			}
		}
	})
	defer srv.Close()
	m := newModel(t, srv, nil)

	var logBytes, steps atomic.Int64
	ended := make(chan kernel.Lifecycle, 1)
	cfg := kernel.Config{Limits: kernel.DefaultLimits()}
	cfg.StallTimeout = 500 * time.Millisecond
	cfg.TurnTimeout = 10 * time.Second
	tw := trace.NewWriter(countingWriter{&logBytes}, trace.HeaderOf(cfg))
	d, err := live.New(live.Config{Kernel: cfg, Model: m, Tools: noTools{},
		WriteAhead: func(s ports.Step) error {
			steps.Add(1)
			tw.Step(s.Kernel, s.Event, s.Target, s.Before, s.Effects)
			return tw.Flush()
		},
		Observer: func(s ports.Step) {
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
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}()
	if err := d.Submit(ctx, "read it"); err != nil {
		t.Fatal(err)
	}
	var end kernel.Lifecycle
	select {
	case end = <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn did not end")
	}
	if end.Outcome != kernel.OutcomeTimedOut || end.Reason != kernel.ReasonStallTimeout {
		t.Errorf("turn %s (%s) after %v, want a stall timeout", end.Outcome, end.Reason, end.At)
	}
	if n, b := steps.Load(), logBytes.Load(); n > 20 || b > 16<<10 {
		t.Errorf("the log holds %d steps, %d bytes: empty fragments reached it", n, b)
	}
}

// countingWriter counts what is written to it.
type countingWriter struct{ n *atomic.Int64 }

func (w countingWriter) Write(p []byte) (int, error) { w.n.Add(int64(len(p))); return len(p), nil }

// noTools answers every call with an error (the test's calls never run).
type noTools struct{}

func (noTools) Run(context.Context, ports.Call) ports.ToolResult {
	return ports.ToolResult{Status: kernel.ToolError, Content: "no tools"}
}
