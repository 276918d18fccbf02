package session

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

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
		sess, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		ended := make(chan kernel.Lifecycle, 4)
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
		err = sess.Start(Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: model, Tools: tools, Observer: rootTurnEnds(ended)})
		if err != nil {
			t.Fatal(err)
		}
		d := sess.Driver()
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
		if n, last := len(ended), lastOf(ended); n != 2 || last.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("%d turns ended, last %s", n, last.Outcome)
		}
		cancel()
		runErr := <-done
		if runErr != nil {
			t.Fatal(runErr)
		}
		if err := sess.Close(runErr); err != nil {
			t.Fatal(err)
		}
		ls, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if ls.Turns != 2 || len(ls.Pending) != 0 {
			t.Fatalf("turns %d, discarded %d", ls.Turns, len(ls.Pending))
		}
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		var kinds []string
		for _, l := range lines[1:] {
			var r Record
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
	})
}

// rootTurnEnds is an observer that sends each root turn's end to ended.
func rootTurnEnds(ended chan<- kernel.Lifecycle) func(ports.Step) {
	return func(s ports.Step) {
		for _, e := range s.Effects {
			if e.Kind == kernel.EffEmit && e.Life.Agent == kernel.Root && e.Life.Kind == kernel.LifeTurnEnded {
				ended <- e.Life
			}
		}
	}
}

// lastOf drains ended and returns the last value (zero when empty).
func lastOf(ended chan kernel.Lifecycle) (last kernel.Lifecycle) {
	for {
		select {
		case l := <-ended:
			last = l
		default:
			return last
		}
	}
}
