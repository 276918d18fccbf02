package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/toolset"
	"github.com/escapement/escapement/kernel"
)

// TestAskAndDecide: Config.Ask makes a tool's calls wait; the turn's
// events show the request, Driver().Decide approves it, and the tool runs
// once; Config.Policy denies another tool's call at once, with a note the
// model reads.
func TestAskAndDecide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var read []string
		model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			if last := req.Messages[len(req.Messages)-1]; last.Role == kernel.RoleTool {
				for _, m := range req.Messages {
					if m.Role == kernel.RoleTool {
						read = append(read, m.Content)
					}
				}
				sink.Text("ok")
				return nil
			}
			sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "deploy", Args: `{"env":"staging"}`})
			sink.Call(kernel.CallDelta{Index: 1, ID: "c2", Name: "drop_table", Args: `{}`})
			return nil
		})
		tools, err := toolset.New()
		if err != nil {
			t.Fatal(err)
		}
		ran := 0
		for _, name := range []string{"deploy", "drop_table"} {
			if err := tools.AddFunc(ports.ToolSpec{Name: name}, func(context.Context, json.RawMessage) (string, error) { ran++; return "done", nil }); err != nil {
				t.Fatal(err)
			}
		}
		a := newAgent(t, Config{Model: model, Tools: tools, Ask: []string{"*"},
			Policy: func(r live.ApprovalRequest) (live.Decision, bool) {
				if r.Tool == "drop_table" {
					return live.Decision{Verdict: kernel.VerdictDeny, Note: "never in a script"}, true
				}
				return live.Decision{}, false
			}})
		turn := a.Run(t.Context(), "ship it")
		for ev := range turn.Events() {
			if ev.Kind == kernel.LifeApprovalRequested && ev.Name == "deploy" {
				if err := a.Driver().Decide(t.Context(), ev.Agent, ev.CallID, ev.Digest, kernel.VerdictApprove, ""); err != nil {
					t.Fatal(err)
				}
			}
		}
		res, err := turn.Result()
		if err != nil || !res.Completed() {
			t.Fatalf("result %+v, %v", res, err)
		}
		if ran != 1 || len(read) != 2 {
			t.Fatalf("ran %d, the model read %q", ran, read)
		}
		if all := strings.Join(read, " "); !strings.Contains(all, "never in a script") {
			t.Errorf("the model read %q", read)
		}
	})
}
