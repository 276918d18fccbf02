package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// TestPersistQueuedTurn: a line typed while an interrupted tree settles is
// queued and starts the next turn in the very Step that ends the
// interrupted one; the session file still closes the interrupted turn at
// its marker, before the new turn's message, so both turns resume intact.
// (In virtual time: a tool that ignores its cancel for a second.)
func TestPersistQueuedTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		sess, err := createSession(path, "m", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		lr := &liveRun{a: &app{}, redact: func(s string) string { return s }, out: &lockedWriter{w: &out}, errw: &lockedWriter{w: &errb}, session: sess, notify: make(chan struct{}, 1)}
		model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			if len(req.Messages) == 1 {
				sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "slow", Args: "{}"})
			} else {
				sink.Text("ok")
			}
			return nil
		})
		tools := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
			time.Sleep(time.Second) // ignores its cancel, answers within the grace
			return ports.ToolResult{Status: kernel.ToolOK, Content: "late"}
		})
		d, err := live.New(live.Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: model, Tools: tools, Observer: lr.observe})
		if err != nil {
			t.Fatal(err)
		}
		lr.driver = d
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		if err := d.Say(ctx, "first"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if err := d.Cancel(ctx, kernel.Root, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if err := d.Say(ctx, "second"); err != nil { // queued: the tree is settling
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		if _, _, ended, last := lr.state.get(); ended != 2 || last.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("%d turns ended, last %s", ended, last.Outcome)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := sess.close(); err != nil {
			t.Fatal(err)
		}
		ls, err := loadSession(path)
		if err != nil {
			t.Fatal(err)
		}
		if ls.turns != 2 || ls.discarded != 0 {
			t.Fatalf("turns %d, discarded %d", ls.turns, ls.discarded)
		}
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		var kinds []string
		for _, l := range lines[1:] {
			var r sessionRecord
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			switch {
			case r.Type == "turn_end":
				kinds = append(kinds, "end:"+r.Outcome.String())
			case r.Message.Marker:
				kinds = append(kinds, "marker")
			default:
				kinds = append(kinds, string(r.Message.Role))
			}
		}
		want := "[user assistant tool marker end:interrupted user assistant end:completed]"
		if got := "[" + strings.Join(kinds, " ") + "]"; got != want {
			t.Errorf("session records %v, want %s", kinds, want)
		}
		if !strings.Contains(errb.String(), kernel.UIInterrupted) {
			t.Errorf("no UI text on stderr: %q", errb.String())
		}
	})
}
