package live

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// manyCalls answers the first request with n tool calls, named by name(i),
// and every later one with "done".
func manyCalls(n int, name func(i int) string) *script {
	return &script{answer: func(req ports.Request) []chunk {
		if last(req).Role == kernel.RoleTool {
			return []chunk{{text: "done"}}
		}
		out := make([]chunk, n)
		for i := range out {
			out[i] = chunk{call: &kernel.CallDelta{Index: i, ID: fmt.Sprintf("c%d", i), Name: name(i), Args: `{}`}}
		}
		return out
	}}
}

// TestThousandsOfToolsStartedAndCancelled: 2,000 tool calls in one message,
// half of them ignoring their cancel. A cancel ends the turn at cancel +
// grace; the driver then holds no op context and no timer (live or dead),
// lists exactly the stubborn half as abandoned, returns from Run at once on
// shutdown, and forgets each abandoned goroutine when it returns.
func TestThousandsOfToolsStartedAndCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 2000
		g := newGate(t)
		var started, stubborn, acked atomic.Int64
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			started.Add(1)
			if c.Name == "stubborn" {
				stubborn.Add(1)
				<-g.c
				return ports.ToolResult{Status: kernel.ToolOK}
			}
			<-ctx.Done()
			acked.Add(1)
			return ports.ToolResult{Status: kernel.ToolCancelled}
		})
		m := manyCalls(n, func(i int) string { return [...]string{"polite", "stubborn"}[i%2] })
		rec := newRecorder()
		d := newDriver(t, m, tools, rec, func(c *kernel.Config) {
			c.Grace = 2 * time.Second
			c.MaxCalls = n
		})
		r := runDriver(t, d)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		if started.Load() == 0 {
			t.Fatal("no tool started")
		}
		if err := d.Cancel(t.Context(), kernel.Root, 1); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeInterrupted || end.At != 3*time.Second {
			t.Errorf("turn ended %s at %v, want interrupted at cancel + grace (3s)", end.Outcome, end.At)
		}
		t.Logf("%d tools started, %d stubborn", started.Load(), stubborn.Load())
		if got := int64(len(rec.abandoned())); got != stubborn.Load() {
			t.Errorf("%d ops abandoned, want the %d stubborn tools", got, stubborn.Load())
		}
		if acked.Load()+stubborn.Load() != started.Load() {
			t.Errorf("%d polite tools saw their cancel, want %d", acked.Load(), started.Load()-stubborn.Load())
		}
		if s := d.state(t); s.ops != 0 || s.liveTimers != 0 || s.heap > compactSlack {
			t.Errorf("after the turn the driver holds %d op contexts, %d live timers, %d heap entries; want 0, 0, ≤%d", s.ops, s.liveTimers, s.heap, compactSlack)
		}
		if got := int64(d.procCount()); got != stubborn.Load() {
			t.Errorf("%d goroutine records, want the %d abandoned ones", got, stubborn.Load())
		}
		if took := r.shutdown(t); took != 0 {
			t.Errorf("Run returned %v after the shutdown, want at once", took)
		}
		if got := int64(len(d.Abandoned())); got != stubborn.Load() {
			t.Errorf("Abandoned() lists %d, want %d", got, stubborn.Load())
		}
		g.open()
		synctest.Wait()
		if got := d.procCount(); got != 0 {
			t.Errorf("%d goroutine records after every tool returned", got)
		}
	})
}

// TestManyToolResultsLeaveNothingBehind: a thousand tools that complete
// leave no op context and no timer entry behind: each result releases its
// context, and the tool deadlines their results stopped do not stay in the
// timer heap until they would have fired — not even behind a live timer
// that is due first (the first call's tool, still running).
func TestManyToolResultsLeaveNothingBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 1000
		slow := make(chan struct{})
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			if c.ID == "c0" {
				<-slow
			}
			return ports.ToolResult{Status: kernel.ToolOK, Content: "ok"}
		})
		rec := newRecorder()
		d := newDriver(t, manyCalls(n, func(int) string { return "read_file" }), tools, rec, nil)
		stop := start(t, d)
		defer stop()
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // every tool but the first has returned
		if s := d.state(t); s.ops != 1 || s.heap > 2*s.liveTimers+compactSlack {
			t.Errorf("with one of %d tools running the driver holds %d op contexts (want 1) and %d timer entries for %d live timers", n, s.ops, s.heap, s.liveTimers)
		}
		close(slow)
		if end := <-rec.ended; end.Outcome != kernel.OutcomeCompleted || end.Text != "done" {
			t.Fatalf("turn ended %s %q", end.Outcome, end.Text)
		}
		if s := d.state(t); s.ops != 0 || s.heap > 2*s.liveTimers+compactSlack {
			t.Errorf("after the turn the driver holds %d op contexts and %d timer entries for %d live timers", s.ops, s.heap, s.liveTimers)
		}
		synctest.Wait()
		if got := d.procCount(); got != 0 {
			t.Errorf("%d goroutine records after every tool returned", got)
		}
	})
}

// TestTimerHeapCompacts: setting and stopping many timers keeps the heap
// within twice the live timers plus the slack, and the survivors still fire
// in order.
func TestTimerHeapCompacts(t *testing.T) {
	tm := newTimers()
	const n = 10000
	for i := range n {
		tm.set(kernel.OpID(i+1), time.Hour+time.Duration(n-i))
	}
	for i := range n {
		if i%1000 != 0 {
			tm.stop(kernel.OpID(i + 1))
		}
		if limit := 2*len(tm.live) + compactSlack; len(tm.heap) > limit {
			t.Fatalf("after %d stops the heap holds %d entries for %d live timers (limit %d)", i+1, len(tm.heap), len(tm.live), limit)
		}
	}
	var got []kernel.OpID
	for {
		op, ok := tm.popDue(2 * time.Hour)
		if !ok {
			break
		}
		got = append(got, op)
	}
	want := []kernel.OpID{9001, 8001, 7001, 6001, 5001, 4001, 3001, 2001, 1001, 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("fired %v, want %v", got, want)
	}
}
