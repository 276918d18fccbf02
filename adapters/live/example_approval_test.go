package live_test

import (
	"context"
	"fmt"
	"log"
	"strings"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// branchModel asks to delete a branch, then reports the tool's result.
type branchModel struct{ branch string }

func (m branchModel) Stream(ctx context.Context, req ports.Request, sink ports.Sink) error {
	last := req.Messages[len(req.Messages)-1]
	if last.Role != kernel.RoleTool {
		sink.Call(kernel.CallDelta{Index: 0, ID: "call_1", Name: "delete_branch", Args: `{"branch":"` + m.branch + `"}`})
		return nil
	}
	sink.Text("Result: " + last.Content)
	return nil
}

// Example_approval is a call that waits for a person (docs/semantics.md,
// "Approvals"): Kernel.Ask names the tool; the Policy hook decides what the
// host can decide by itself (here: never the main branch) and leaves the
// rest to a person, whose decision Decide steps — naming the call and the
// digest of the arguments the person saw. The tool runs only after the
// approval.
func Example_approval() {
	asked := make(chan kernel.Lifecycle, 1)
	ended := make(chan kernel.Lifecycle, 1)
	tools := ports.ToolsFunc(func(ctx context.Context, call ports.Call) ports.ToolResult {
		fmt.Println("tool: delete_branch", call.Arguments)
		return ports.ToolResult{Status: kernel.ToolOK, Content: "deleted"}
	})
	d, err := live.New(live.Config{
		Kernel: kernel.Config{Limits: kernel.DefaultLimits(), Ask: []string{"delete_branch"}},
		Model:  branchModel{branch: "old-feature"},
		Tools:  tools,
		Policy: func(r live.ApprovalRequest) (live.Decision, bool) {
			if strings.Contains(r.Args, `"main"`) {
				return live.Decision{Verdict: kernel.VerdictDeny, Note: "never the main branch"}, true
			}
			return live.Decision{}, false // a person decides
		},
		Observer: func(s ports.Step) {
			for _, e := range s.Effects {
				switch {
				case e.Kind != kernel.EffEmit:
				case e.Life.Kind == kernel.LifeApprovalRequested:
					asked <- e.Life
				case e.Life.Kind == kernel.LifeTurnEnded && e.Life.Agent == kernel.Root:
					ended <- e.Life
				}
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	if err := d.Submit(ctx, "Delete my old feature branch."); err != nil {
		log.Fatal(err)
	}
	req := <-asked // shown to the person: the tool and its arguments
	fmt.Printf("approve %s %s? y\n", req.Name, req.Text)
	if err := d.Decide(ctx, req.Agent, req.CallID, req.Digest, kernel.VerdictApprove, ""); err != nil {
		log.Fatal(err)
	}
	end := <-ended
	fmt.Printf("turn %s: %s\n", end.Outcome, end.Text)

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// approve delete_branch {"branch":"old-feature"}? y
	// tool: delete_branch {"branch":"old-feature"}
	// turn completed: Result: deleted
}
