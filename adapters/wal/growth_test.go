package wal

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// streamedLog records one turn whose answer streams size bytes in chunks of
// chunk bytes (a token is about four), the way the live driver would, and
// returns the log and how many of its bytes the stream's steps took (from
// the first chunk to the stream's end).
func streamedLog(tb testing.TB, size, chunk int) (log []byte, streamBytes int) {
	tb.Helper()
	cfg := kernelConfig()
	cfg.MaxMessageBytes = size + 1
	k := kernel.MustNew(cfg)
	var f memFile
	w, err := NewWriter(&f, trace.HeaderOf(cfg))
	if err != nil {
		tb.Fatal(err)
	}
	var at time.Duration
	var req kernel.OpID
	feed := func(ev kernel.Event) {
		at += time.Millisecond
		ev.At = at
		target := k.Target(ev)
		before := k.AgentState(target)
		effs := k.Step(ev)
		for _, e := range effs {
			if e.Kind == kernel.EffStartLLM {
				req = e.Op
			}
		}
		if err := w.Record(ports.Step{Kernel: k, Event: ev, Target: target, Before: before, Effects: effs}); err != nil {
			tb.Fatal(err)
		}
	}
	feed(kernel.Submit(0, "write a long answer"))
	start := f.Len()
	text := strings.Repeat("abcdefghij", size/10+1)[:size]
	n := uint32(0)
	for i := 0; i < len(text); i += chunk {
		n++
		feed(kernel.TextDelta(0, req, n, text[i:min(i+chunk, len(text))]))
	}
	feed(kernel.LLMEnd(0, req))
	return f.Bytes(), f.Len() - start
}

// maxChunkOverhead bounds what a log spends on one streamed text chunk
// besides its text: a delta record's framing (its time, op and keys).
const maxChunkOverhead = 64

// TestLogGrowsWithTheText: the log of a streamed answer grows linearly with
// the text — its text once, plus at most maxChunkOverhead bytes per chunk —
// whatever the answer's length; and the log still rebuilds, every chunk
// replayed.
func TestLogGrowsWithTheText(t *testing.T) {
	for _, size := range []int{25_000, 100_000, 400_000} {
		const chunk = 4
		log, n := streamedLog(t, size, chunk)
		chunks := (size + chunk - 1) / chunk
		if bound := size + maxChunkOverhead*chunks + 2048; n > bound {
			t.Errorf("%d bytes in %d-byte chunks: the stream took %d log bytes (%.1f per byte of text), over %d", size, chunk, n, float64(n)/float64(size), bound)
		}
		l, err := Parse("log", log)
		if err != nil {
			t.Fatal(err)
		}
		k, err := l.Rebuild(nil)
		if err != nil {
			t.Fatal(err)
		}
		hist := k.Agent(kernel.Root).History()
		if got := hist[len(hist)-1].Content; len(got) != size || l.Steps() != chunks+2 {
			t.Fatalf("rebuilt answer of %d bytes from %d steps, want %d from %d", len(got), l.Steps(), size, chunks+2)
		}
	}
}

// BenchmarkLogBytesPerStreamedByte reports how many log bytes each byte of
// streamed answer text costs (logB/textB), and per chunk (logB/chunk), for a
// 400 KB answer in chunks of one token (about 4 bytes) and of 20 bytes.
func BenchmarkLogBytesPerStreamedByte(b *testing.B) {
	for _, chunk := range []int{4, 20} {
		b.Run(fmt.Sprintf("chunk=%d", chunk), func(b *testing.B) {
			const size = 400_000
			var n int
			for b.Loop() {
				_, n = streamedLog(b, size, chunk)
			}
			b.ReportMetric(float64(n)/size, "logB/textB")
			b.ReportMetric(float64(n)/float64((size+chunk-1)/chunk), "logB/chunk")
		})
	}
}

// TestDeltaRecordOnlyForPlainChunks: a chunk whose step did more than echo
// its text — here the one that takes the answer past max_message_bytes and
// ends the stream — is logged as a full step line, so the rebuild checks
// what it did; and a step is plain only with exactly the one echo.
func TestDeltaRecordOnlyForPlainChunks(t *testing.T) {
	cfg := kernelConfig()
	cfg.MaxMessageBytes = 10
	k := kernel.MustNew(cfg)
	var f memFile
	w, err := NewWriter(&f, trace.HeaderOf(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var req kernel.OpID
	var steps []ports.Step
	feed := func(ev kernel.Event) {
		ev.At = time.Duration(len(steps)+1) * time.Millisecond
		target := k.Target(ev)
		before := k.AgentState(target)
		effs := k.Step(ev)
		for _, e := range effs {
			if e.Kind == kernel.EffStartLLM {
				req = e.Op
			}
		}
		s := ports.Step{Kernel: k, Event: ev, Target: target, Before: before, Effects: effs}
		steps = append(steps, s)
		if err := w.Record(s); err != nil {
			t.Fatal(err)
		}
	}
	feed(kernel.Submit(0, "go"))
	feed(kernel.TextDelta(0, req, 1, "12345"))

	// The plain chunk's step (the kernel as it left it), changed in each way
	// a plain step cannot be.
	plain := steps[1]
	enc := continueEncoder(0)
	if !enc.plain(plain) {
		t.Fatal("the first chunk is not plain")
	}
	echo := plain.Effects[0]
	for name, change := range map[string]func(s *ports.Step){
		"another effect": func(s *ports.Step) {
			s.Effects = append([]kernel.Effect{echo}, kernel.Effect{Kind: kernel.EffStopTimer, Op: 3})
		},
		"echo of other":    func(s *ports.Step) { e := echo; e.Life.Text = "x"; s.Effects = []kernel.Effect{e} },
		"echo with detail": func(s *ports.Step) { e := echo; e.Life.Detail = "x"; s.Effects = []kernel.Effect{e} },
		"state changed":    func(s *ports.Step) { s.Before = fsm.Idle },
		"out of sequence":  func(s *ports.Step) { s.Event.Chunk = 5 },
		"not a delta":      func(s *ports.Step) { s.Event.Kind = kernel.EvToolResult },
	} {
		s := plain
		change(&s)
		if enc.plain(s) {
			t.Errorf("%s: taken for a plain chunk", name)
		}
	}

	feed(kernel.TextDelta(0, req, 2, "67890abc")) // past the cap
	lines := strings.Split(strings.TrimSuffix(f.String(), "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], deltaPrefix) || !strings.HasPrefix(lines[3], `{"type":"step",`) {
		t.Fatalf("want a delta record, then a step line for the chunk past the cap:\n%s", f.String())
	}
	l, err := Parse("log", f.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Rebuild(nil); err != nil {
		t.Fatal(err)
	}
}
