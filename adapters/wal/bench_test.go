package wal

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// memFile is a File in memory whose Sync does nothing.
type memFile struct{ bytes.Buffer }

func (*memFile) Sync() error { return nil }

// syntheticLog records a chat of at least n events the way the live driver
// would: turns of a streamed answer (20 chunks), a read_file call, its
// result, and a second streamed answer; the last turn is cut mid-stream, so
// a recovery has a request to restart.
func syntheticLog(tb testing.TB, n int) []byte {
	tb.Helper()
	cfg := kernelConfig()
	cfg.MaxRequests = 50
	k := kernel.MustNew(cfg)
	var f memFile
	w, err := NewWriter(&f, trace.HeaderOf(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	var at time.Duration
	var req, tool kernel.OpID
	events := 0
	feed := func(ev kernel.Event) {
		at += 50 * time.Millisecond
		ev.At = at
		target := k.Target(ev)
		before := k.AgentState(target)
		effs := k.Step(ev)
		for _, e := range effs {
			switch e.Kind {
			case kernel.EffStartLLM:
				req = e.Op
			case kernel.EffStartTool:
				tool = e.Op
			case kernel.EffError:
				tb.Fatalf("%s: %s", ev.Describe(), e.Detail)
			}
		}
		if err := w.Record(ports.Step{Kernel: k, Event: ev, Target: target, Before: before, Effects: effs}); err != nil {
			tb.Fatal(err)
		}
		events++
	}
	stream := func() bool {
		for c := uint32(1); c <= 20; c++ {
			feed(kernel.TextDelta(0, req, c, fmt.Sprintf("word%d ", c)))
			if events >= n {
				return false
			}
		}
		return true
	}
	for turn := 1; ; turn++ {
		feed(kernel.Submit(0, fmt.Sprintf("question %d: what does the file say?", turn)))
		if !stream() {
			break
		}
		feed(kernel.CallFragment(0, req, 21, kernel.CallDelta{Index: 0, ID: fmt.Sprintf("call-%d", turn), Name: "read_file", Args: `{"path":"a.txt"}`}))
		feed(kernel.LLMEnd(0, req))
		feed(kernel.ToolResult(0, tool, kernel.ToolOK, "package a // a file of some length, as read_file returns it"))
		if !stream() {
			break
		}
		feed(kernel.LLMEnd(0, req))
	}
	return f.Bytes()
}

// BenchmarkRecover10k: reading a 10,000-event log, rebuilding the kernel
// (every step checked against its record) and stepping Recover — what a
// resume costs before the first new request.
func BenchmarkRecover10k(b *testing.B) {
	data := syntheticLog(b, 10000)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		l, err := Parse("bench", data)
		if err != nil {
			b.Fatal(err)
		}
		k, err := l.Rebuild(nil)
		if err != nil {
			b.Fatal(err)
		}
		if out := k.Step(kernel.Recover(k.Now())); len(out) == 0 {
			b.Fatal("no recovery")
		}
	}
}

// TestSyntheticLogRecovers: the benchmark's log is what it claims: 10,000
// events, rebuilt without a mismatch, with a request to restart.
func TestSyntheticLogRecovers(t *testing.T) {
	l, err := Parse("synthetic", syntheticLog(t, 10000))
	if err != nil {
		t.Fatal(err)
	}
	k, err := l.Rebuild(nil)
	if err != nil {
		t.Fatal(err)
	}
	out := k.Step(kernel.Recover(k.Now()))
	starts := 0
	for _, e := range out {
		if e.Kind == kernel.EffStartLLM {
			starts++
		}
	}
	if l.Steps() != 10000 || starts != 1 {
		t.Fatalf("%d steps, %d restarted requests", l.Steps(), starts)
	}
}
