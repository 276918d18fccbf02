package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
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
	}
	for _, ev := range evs {
		b, err := json.Marshal(Record{Type: "step", Event: &ev})
		if err != nil {
			t.Fatal(err)
		}
		r, err := ReadRecord(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(*r.Event, ev) {
			t.Fatalf("round trip\n got %#v\nwant %#v", *r.Event, ev)
		}
	}
}

// TestWriterDeterministic: the same steps give the same bytes and hash.
func TestWriterDeterministic(t *testing.T) {
	run := func() (string, []byte) {
		var buf bytes.Buffer
		k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
		w := NewWriter(&buf, Header{Source: "sim", Name: "t", Limits: kernel.DefaultLimits()})
		for _, ev := range []kernel.Event{kernel.Submit(0, "hi"), kernel.Cancel(time.Second, kernel.Root)} {
			target := k.Target(ev)
			before := k.Agent(target).State()
			w.Step(k, ev, target, before, k.Step(ev))
		}
		sum, err := w.Close(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return sum, buf.Bytes()
	}
	s1, b1 := run()
	s2, b2 := run()
	if s1 != s2 || !bytes.Equal(b1, b2) {
		t.Fatal("trace not deterministic")
	}
	sc := bufio.NewScanner(bytes.NewReader(b1))
	sc.Scan()
	if _, err := ReadHeader(sc.Bytes()); err != nil {
		t.Fatal(err)
	}
	n := 0 // lines and the effects nested in them
	for sc.Scan() {
		rec, err := ReadRecord(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		n += 1 + len(rec.Effects)
	}
	if n < 5 {
		t.Fatalf("only %d records", n)
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
