package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// callingShell asks for the shell once per turn, then answers.
var callingShell = ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
	if req.Messages[len(req.Messages)-1].Role == kernel.RoleTool {
		sink.Text("done")
		return nil
	}
	sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "shell", Args: `{"command":"make"}`})
	return nil
})

// TestResumeKeepsGrants: "approve for this session" outlives the process:
// the session file records the grant, and a session resumed after a clean
// exit asks no call the grant covers (docs/durable.md, "Approvals across
// a crash").
func TestResumeKeepsGrants(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	var ran atomic.Int32
	tools := ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult {
		ran.Add(1)
		return ports.ToolResult{Status: kernel.ToolOK, Content: "ok"}
	})
	var asked []string
	for i := range 2 {
		var sess *Session
		var err error
		if i == 0 {
			sess, err = Create(path)
		} else {
			sess, err = Resume(path)
		}
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits(), Ask: []string{"shell"}}, Model: callingShell, Tools: tools,
			Policy: func(r live.ApprovalRequest) (live.Decision, bool) {
				asked = append(asked, r.CallID)
				return live.Decision{Verdict: kernel.VerdictApproveTool}, true
			}}
		sess.Seed(&cfg.Kernel)
		runTurn(t, sess, cfg, "build")
	}
	if len(asked) != 1 || ran.Load() != 2 {
		t.Fatalf("asked %v, ran %d: the resumed session should ask nothing and run the call", asked, ran.Load())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `{"type":"grant","grant":{"tool":"shell"}}`); n != 1 {
		t.Errorf("%d grant records, want 1:\n%s", n, b)
	}
}
