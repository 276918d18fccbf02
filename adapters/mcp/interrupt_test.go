package mcp

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/kernel"
)

// TestCancelSendsNotification: the kernel's cancel of an MCP call reaches
// the server as notifications/cancelled naming the call's request (the
// go-sdk server cancels exactly that handler), the server's answer to the
// ping after it acknowledges the cancel at once (virtual time: the turn
// ends at the cancel's instant, no grace waited), the op ends cancelled,
// not abandoned, and the model is not asked again (F1).
func TestCancelSendsNotification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		ev := newEvents()
		c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}, Observer: ev.add, PingTimeout: 5 * time.Second})
		m := &callModel{name: "mcp__srv__block", args: `{}`}
		d, rec, start, stop := drive(t, m, c, 2*time.Second)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		<-ms.ts.inHandler
		time.Sleep(time.Second)
		cancelAt := time.Since(start)
		if err := d.Cancel(t.Context(), kernel.Root, 0); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeInterrupted || end.Reason != kernel.ReasonUserCancel {
			t.Fatalf("turn ended %s/%s", end.Outcome, end.Reason)
		}
		if end.At != cancelAt {
			t.Errorf("turn ended at %v, want at the cancel (%v): the acknowledgement is one round trip", end.At, cancelAt)
		}
		if got := <-ms.ts.cancelled; got != "block" {
			t.Errorf("cancelled handler %q", got)
		}
		op := rec.toolOp(t)
		if ends := rec.toolEnds(op); !slices.Equal(ends, []kernel.OpEnd{kernel.OpCancelled}) {
			t.Errorf("tool op ended %v, want [cancelled]", ends)
		}
		sent := ev.of(EventCancelSent)
		if len(sent) != 1 || sent[0].Op != op || sent[0].Tool != "mcp__srv__block" {
			t.Fatalf("cancel_sent events %+v", sent)
		}
		_, cancels, methods := ms.ts.snapshot()
		if !slices.Equal(cancels, []string{sent[0].RequestID}) {
			t.Errorf("server received cancels for %v, want [%s] (the call's request)", cancels, sent[0].RequestID)
		}
		if i, j := slices.Index(methods, "notifications/cancelled"), slices.Index(methods, "ping"); i < 0 || j < i {
			t.Errorf("server saw %v: want the cancel, then the acknowledging ping", methods)
		}
		if n := m.requests.Load(); n != 1 {
			t.Errorf("%d model requests, want 1 (F1)", n)
		}
		stop()
		c.Close()
	})
}

// TestIgnoredCancelLateResultRecorded: a server that reads the cancel but
// goes on with the call (and answers pings meanwhile) acknowledges at once;
// its answer, when it comes, is dropped by the client and recorded as a
// late result, and never reaches the model.
func TestIgnoredCancelLateResultRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		ev := newEvents()
		c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}, Observer: ev.add})
		m := &callModel{name: "mcp__srv__ignore", args: `{}`}
		d, rec, _, stop := drive(t, m, c, 2*time.Second)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		<-ms.ts.inHandler
		if err := d.Cancel(t.Context(), kernel.Root, 0); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeInterrupted {
			t.Fatalf("turn ended %s", end.Outcome)
		}
		op := rec.toolOp(t)
		if ends := rec.toolEnds(op); !slices.Equal(ends, []kernel.OpEnd{kernel.OpCancelled}) {
			t.Errorf("tool op ended %v, want [cancelled]", ends)
		}
		ms.ts.finish() // the server finishes the call anyway
		late := ev.next(t, EventLateResult)
		if late.Op != op || late.RequestID == "" || late.RequestID != ev.of(EventCancelSent)[0].RequestID {
			t.Errorf("late result event %+v", late)
		}
		stop()
		for _, l := range rec.lifes {
			if strings.Contains(l.Text, "finished anyway") {
				t.Errorf("the late answer reached the kernel: %+v", l)
			}
		}
		if n := m.requests.Load(); n != 1 {
			t.Errorf("%d model requests, want 1", n)
		}
		c.Close()
	})
}

// TestUnresponsiveServerAbandonedKilledRestarted: a server that stops
// reading (a hung process: the cancel notification cannot even be written)
// does not acknowledge; the kernel abandons the call exactly one grace
// after the cancel, the client kills the session at PingTimeout after the
// cancel, and the next call starts a new session that works.
func TestUnresponsiveServerAbandonedKilledRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		ev := newEvents()
		c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}, Observer: ev.add, PingTimeout: 3 * time.Second})
		m := &callModel{name: "mcp__srv__ignore", args: `{}`}
		d, rec, start, stop := drive(t, m, c, 2*time.Second)
		if err := d.Submit(t.Context(), "go"); err != nil {
			t.Fatal(err)
		}
		<-ms.ts.inHandler
		ms.freeze()
		time.Sleep(time.Second)
		cancelAt := time.Since(start)
		if err := d.Cancel(t.Context(), kernel.Root, 0); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		if end.Outcome != kernel.OutcomeInterrupted {
			t.Fatalf("turn ended %s", end.Outcome)
		}
		if want := cancelAt + 2*time.Second; end.At != want {
			t.Errorf("turn ended at %v, want cancel + grace = %v", end.At, want)
		}
		op := rec.toolOp(t)
		if ends := rec.toolEnds(op); !slices.Equal(ends, []kernel.OpEnd{kernel.OpAbandoned}) {
			t.Errorf("tool op ended %v, want [abandoned]", ends)
		}
		if ab := d.Abandoned(); len(ab) != 1 || ab[0].Op != op {
			t.Errorf("Abandoned() = %+v", ab)
		}
		stopped := ev.next(t, EventStopped)
		if at := time.Since(start); at != cancelAt+3*time.Second {
			t.Errorf("session killed at %v, want cancel + PingTimeout = %v", at, cancelAt+3*time.Second)
		}
		mustContain(t, "stop detail", stopped.Detail, "did not acknowledge the cancel of mcp__srv__ignore within 3s")
		if _, _, methods := ms.ts.snapshot(); slices.Contains(methods, "notifications/cancelled") {
			t.Errorf("the frozen server handled the cancel: %v", methods)
		}
		stop()

		r := c.Run(t.Context(), call("mcp__srv__echo", `{"text":"again"}`))
		if r.Status != kernel.ToolOK || r.Content != "again" {
			t.Errorf("call after the kill: %+v", r)
		}
		if n := ms.dials.Load(); n != 2 {
			t.Errorf("%d sessions, want 2 (restarted on next use)", n)
		}
		started := ev.of(EventStarted)
		if len(started) != 2 {
			t.Fatalf("started events %+v", started)
		}
		mustContain(t, "restart detail", started[1].Detail, "restarted after", "did not acknowledge")
		ms.thaw()
		ms.ts.finish()
		c.Close()
		if n := m.requests.Load(); n != 1 {
			t.Errorf("%d model requests, want 1", n)
		}
	})
}

// TestPingFailureKillsAndRestarts: a server that stops answering while
// idle is found by the keepalive ping (PingInterval), killed once its ping
// is PingTimeout late, and started again on its next use. A call running
// on it when it is killed ends as an error saying why.
func TestPingFailureKillsAndRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := newMemServer(t)
		ev := newEvents()
		c := startClient(t, Options{Servers: []ServerConfig{ms.config("srv")}, Observer: ev.add, PingInterval: 10 * time.Second, PingTimeout: time.Second})
		start := time.Now()
		done := make(chan struct{})
		var r resultOf
		go func() {
			defer close(done)
			r.set(c.Run(t.Context(), call("mcp__srv__ignore", `{}`)))
		}()
		<-ms.ts.inHandler
		ms.freeze()
		stopped := ev.next(t, EventStopped)
		if at := time.Since(start); at != 11*time.Second {
			t.Errorf("killed at %v, want the first ping (10s) + its timeout (1s)", at)
		}
		mustContain(t, "stop detail", stopped.Detail, "no answer to a ping within 1s")
		<-done
		got := r.get()
		if got.Status != kernel.ToolError {
			t.Errorf("running call ended %v: %q", got.Status, got.Content)
		}
		mustContain(t, "result", got.Content, "error: mcp__srv__ignore:", `MCP server "srv" (test.json) stopped during the call`, "no answer to a ping", "restarted on the next call")

		again := c.Run(t.Context(), call("mcp__srv__echo", `{"text":"back"}`))
		if again.Status != kernel.ToolOK || again.Content != "back" {
			t.Errorf("call after the restart: %+v", again)
		}
		if n := ms.dials.Load(); n != 2 {
			t.Errorf("%d sessions, want 2", n)
		}
		ms.thaw()
		ms.ts.finish()
		c.Close()
	})
}
