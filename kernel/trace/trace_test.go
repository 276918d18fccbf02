package trace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
)

// TestEventRoundTrip: every event shape survives the trace encoding, so a
// recorded live session can be fed back into a kernel.
func TestEventRoundTrip(t *testing.T) {
	evs := []kernel.Event{
		kernel.Submit(time.Second, "hi \"there\""),
		kernel.Interject(2*time.Second, "also"),
		kernel.CancelTurn(3*time.Second, 2, 5),
		kernel.Shutdown(4 * time.Second),
		kernel.TextDelta(5, 7, 3, "tok"),
		kernel.CallFragment(6, 7, 4, kernel.CallDelta{Index: 1, ID: "c", Name: "grep", Args: `{"a"`}),
		kernel.LLMEnd(7, 7),
		kernel.LLMError(8, 7, kernel.FailureRateLimit, "429"),
		kernel.LLMRetry(9, 7, 2, time.Second, "429"),
		kernel.ToolResult(10, 9, kernel.ToolCancelled, ""),
		kernel.TimerFired(11, 12),
		kernel.Approve(12, 3, "call_1", "ad1686665270a1d1"),
		kernel.Deny(13, 0, "c#2", "use \"staging\""),
		kernel.Decide(14, 1, "c", "ffff", kernel.VerdictApproveTool, ""),
	}
	k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
	for _, ev := range evs {
		var buf bytes.Buffer
		w := NewWriter(&buf, Header{Source: "live", Name: "round-trip"})
		w.Step(k, ev, kernel.NoAgent, 0, nil)
		if _, err := w.Close(0); err != nil {
			t.Fatal(err)
		}
		line := bytes.Split(buf.Bytes(), []byte("\n"))[1] // after the header
		r, err := ReadRecord(line)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if !reflect.DeepEqual(*r.Event, ev) {
			t.Fatalf("round trip\n got %#v\nwant %#v", *r.Event, ev)
		}
	}
}

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestWriterGolden: a short live-shaped run (submit, cancel) writes exactly
// the recorded bytes of testdata/writer.golden, and its hash is the SHA-256
// of those bytes. The format is a contract (replay compares bytes): a change
// to it must be deliberate (go test ./kernel/trace -run WriterGolden -update).
func TestWriterGolden(t *testing.T) {
	var buf bytes.Buffer
	k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
	w := NewWriter(&buf, Header{Source: "sim", Name: "t", Seed: 3, Options: map[string]string{"b": "2", "a": "1"}, Limits: kernel.DefaultLimits()})
	for _, ev := range []kernel.Event{kernel.Submit(0, "hi"), kernel.Cancel(time.Second, kernel.Root)} {
		target := k.Target(ev)
		before := k.Agent(target).State()
		w.Step(k, ev, target, before, k.Step(ev))
	}
	w.Note(time.Second, "a note")
	sum, err := w.Close(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(buf.Bytes()); sum != hex.EncodeToString(want[:]) {
		t.Fatalf("hash %s is not the SHA-256 of the bytes written", sum)
	}
	golden := filepath.Join("testdata", "writer.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("trace bytes changed; run `go test ./kernel/trace -run WriterGolden -update` if intended\n got:\n%s\nwant:\n%s", buf.Bytes(), want)
	}
}

func TestAppendDuration(t *testing.T) {
	vals := []time.Duration{0, 1, 999, 1000, 1500, 999999, time.Millisecond, 1234567, time.Second, 1500 * time.Millisecond,
		59*time.Second + 1, time.Minute, 61 * time.Second, time.Hour + 2*time.Minute + 3*time.Second + 4*time.Millisecond,
		-5 * time.Second, -1, 1<<63 - 1, -1 << 63, 2337 * time.Millisecond}
	for i := 0; i < 2000; i++ {
		vals = append(vals, time.Duration(int64(i)*int64(i)*int64(i)*7919+int64(i)))
	}
	for i := 0; i < 70000; i += 7 { // whole milliseconds: the fast path and its edges
		vals = append(vals, time.Duration(i)*time.Millisecond, time.Duration(i)*time.Millisecond+1)
	}
	for _, d := range vals {
		if got := string(appendDuration(nil, d)); got != d.String() {
			t.Fatalf("%d: got %q want %q", int64(d), got, d.String())
		}
	}
}

// TestSmallNumbers: the encoder's short path for numbers writes what
// strconv does, across its edges.
func TestSmallNumbers(t *testing.T) {
	for _, v := range []int64{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 1001, 9999, 10000, 10001, 123456789, -1, -10, -10000, 1<<63 - 1, -1 << 63} {
		e := enc{}
		e.i64(v)
		if got, want := string(e.b), strconv.FormatInt(v, 10); got != want {
			t.Errorf("i64(%d) = %q, want %q", v, got, want)
		}
		if v >= 0 {
			e = enc{}
			e.u64(uint64(v))
			if got, want := string(e.b), strconv.FormatUint(uint64(v), 10); got != want {
				t.Errorf("u64(%d) = %q, want %q", v, got, want)
			}
		}
	}
	for v := uint64(0); v < 20000; v++ {
		if got, want := string(appendSmallUint(nil, v%10000)), strconv.FormatUint(v%10000, 10); got != want {
			t.Fatalf("appendSmallUint(%d) = %q, want %q", v%10000, got, want)
		}
	}
}

// TestFlushWritesEveryStep: after Flush the sink holds the header and every
// step so far as whole lines (a live run's file survives a kill), and
// flushing changes neither the bytes nor the hash.
func TestFlushWritesEveryStep(t *testing.T) {
	run := func(flush bool) ([]byte, string) {
		var buf bytes.Buffer
		k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
		w := NewWriter(&buf, Header{Source: "live", Name: "flush", Limits: kernel.DefaultLimits()})
		for i, ev := range []kernel.Event{kernel.Submit(0, "hi"), kernel.Cancel(time.Second, kernel.Root)} {
			target := k.Target(ev)
			before := k.Agent(target).State()
			w.Step(k, ev, target, before, k.Step(ev))
			if flush {
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				if lines := bytes.Count(buf.Bytes(), []byte("\n")); lines != i+2 || buf.Bytes()[buf.Len()-1] != '\n' {
					t.Fatalf("after step %d and Flush: %d whole lines in %q", i+1, lines, buf.Bytes())
				}
			}
		}
		sum, err := w.Close(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return buf.Bytes(), sum
	}
	b1, h1 := run(true)
	b2, h2 := run(false)
	if !bytes.Equal(b1, b2) || h1 != h2 {
		t.Fatalf("flushing changed the trace:\n%s\n%s", b1, b2)
	}
}

// TestContinueWriter: a trace written in two parts — the second by a
// ContinueWriter on the file the first left — has exactly the bytes of one
// writer's trace (step numbers continue), which is how a write-ahead log is
// appended to after a recovery.
func TestContinueWriter(t *testing.T) {
	evs := []kernel.Event{kernel.Submit(0, "hi"), kernel.TextDelta(time.Second, 1, 1, "a"), kernel.Cancel(2*time.Second, kernel.Root)}
	record := func(split int) []byte {
		var buf bytes.Buffer
		k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
		w := NewWriter(&buf, Header{Source: "live", Name: "two parts"})
		for i, ev := range evs {
			if i == split {
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				w = ContinueWriter(&buf, split)
			}
			target := k.Target(ev)
			before := k.AgentState(target)
			w.Step(k, ev, target, before, k.Step(ev))
		}
		if _, err := w.Close(2 * time.Second); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	whole := record(-1)
	for split := 1; split < len(evs); split++ {
		if got := record(split); !bytes.Equal(got, whole) {
			t.Fatalf("split at %d:\n%s\nwant\n%s", split, got, whole)
		}
	}
}

// TestHeaderConfigRoundTrip: every configuration setting that shapes the
// effects survives HeaderOf, the header's encoding and Config.
func TestHeaderConfigRoundTrip(t *testing.T) {
	cfg := kernel.Config{Limits: kernel.DefaultLimits(), RootName: "boss", System: "sys", ChildSystem: "child",
		History:    []kernel.Message{{Role: kernel.RoleUser, Content: "hi"}, {Role: kernel.RoleAssistant, Content: "hello"}},
		Idempotent: []string{"read_file", "grep"}, Turns: 3, DelegateTool: "spawn", Ask: []string{"grep", "write_file"},
		Grants: []kernel.Grant{{Tool: "grep"}, {Tool: "write_file", Args: `{"path":"a"}`, Exact: true}},
		Profiles: []kernel.Profile{{Name: "lead", Description: "leads", System: "You lead.", Tools: []string{"grep"}, Delegates: []string{"lead", "any"}, MaxRequests: 3, MaxChildren: 2, MaxDepth: 1},
			{Name: "any", AllTools: true}},
		RootProfile: "lead"}
	cfg.MaxRequests, cfg.MaxAgents, cfg.MaxParallelRequests = 7, 9, 3
	var buf bytes.Buffer
	w := NewWriter(&buf, HeaderOf(cfg))
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	hdr, err := ReadHeader(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	if err != nil {
		t.Fatal(err)
	}
	if got := hdr.Config(); !reflect.DeepEqual(got, cfg) {
		t.Fatalf("config round trip\n got %+v\nwant %+v", got, cfg)
	}
	// Defaults are not written.
	plain := HeaderOf(kernel.Config{Limits: kernel.DefaultLimits(), DelegateTool: kernel.DefaultDelegateTool})
	if plain.DelegateTool != "" {
		t.Fatalf("defaults recorded: %+v", plain)
	}
}

// TestHeaderLimitsDefault: a limit a header does not name — one written
// before the limit existed, or edited out — reads as its (bounded) default.
func TestHeaderLimitsDefault(t *testing.T) {
	hdr, err := ReadHeader([]byte(`{"type":"header","format":` + strconv.Itoa(FormatVersion) + `,"source":"live","name":"old","limits":{"grace":5}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := kernel.DefaultLimits()
	want.Grace = 5
	if hdr.Limits != want {
		t.Fatalf("limits %+v, want the defaults but grace", hdr.Limits)
	}
}
