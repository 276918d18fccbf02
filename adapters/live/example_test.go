package live_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// scriptedModel is a Model that answers without a network: it asks for the
// weather tool, then answers from the tool's result. A real host uses
// adapters/openai here.
type scriptedModel struct{}

func (scriptedModel) Stream(ctx context.Context, req ports.Request, sink ports.Sink) error {
	last := req.Messages[len(req.Messages)-1]
	if last.Role != kernel.RoleTool {
		// Tool calls stream in fragments, as OpenAI's API sends them.
		sink.Call(kernel.CallDelta{Index: 0, ID: "call_1", Name: "weather", Args: `{"city":`})
		sink.Call(kernel.CallDelta{Index: 0, Args: `"Oslo"}`})
		return nil
	}
	for _, word := range strings.Fields("It is " + last.Content + " in Oslo.") {
		if ctx.Err() != nil {
			return ctx.Err() // cancelled: stop at once
		}
		sink.Text(word + " ")
	}
	return nil
}

// weatherTools is a Tools with one tool. Run must return promptly once ctx
// is cancelled (a user's interrupt, a timeout): after the grace period the
// call is abandoned and its late result dropped.
type weatherTools struct{}

func (weatherTools) Run(ctx context.Context, call ports.Call) ports.ToolResult {
	if call.Name != "weather" {
		return ports.ToolResult{Status: kernel.ToolError, Content: "unknown tool " + call.Name}
	}
	var args struct{ City string }
	if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil {
		return ports.ToolResult{Status: kernel.ToolError, Content: "bad arguments: " + err.Error()}
	}
	fmt.Printf("tool: weather(%s) for %s\n", args.City, call.Path)
	return ports.ToolResult{Status: kernel.ToolOK, Content: "4°C and snowing"}
}

// Example runs a live.Driver with a custom Model and custom Tools: Run owns
// the kernel on its own goroutine, Submit starts a turn, the Observer sees
// every step, and ending Run's context shuts the tree down.
func Example() {
	ended := make(chan kernel.Lifecycle, 1)
	d, err := live.New(live.Config{
		Kernel: kernel.Config{Limits: kernel.DefaultLimits(), System: "You are terse."},
		Model:  scriptedModel{},
		Tools:  weatherTools{},
		Observer: func(s ports.Step) {
			for _, e := range s.Effects {
				if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded && e.Life.Agent == kernel.Root {
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

	if err := d.Submit(ctx, "Weather in Oslo?"); err != nil {
		log.Fatal(err)
	}
	end := <-ended
	fmt.Printf("turn %d %s: %q\n", end.Turn, end.Outcome, strings.TrimSpace(end.Text))

	stop() // shut down: Run returns once the tree is quiescent
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// tool: weather(Oslo) for main
	// turn 1 completed: "It is 4°C and snowing in Oslo."
}

// Example_cancel is Esc (or Ctrl-C) while a tool runs: Cancel cancels the
// tool's context, the tool answers within the grace period, and the turn
// ends interrupted with a typed reason; the model is not asked again (F1).
func Example_cancel() {
	started := make(chan struct{})
	slowTool := ports.ToolsFunc(func(ctx context.Context, call ports.Call) ports.ToolResult {
		close(started)
		<-ctx.Done() // a long job that honours its cancel
		fmt.Println("tool: cancelled")
		return ports.ToolResult{Status: kernel.ToolCancelled, Content: "stopped"}
	})
	ended := make(chan kernel.Lifecycle, 1)
	d, err := live.New(live.Config{
		Kernel: kernel.Config{Limits: kernel.DefaultLimits()},
		Model:  scriptedModel{},
		Tools:  slowTool,
		Observer: func(s ports.Step) {
			for _, e := range s.Effects {
				if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded && e.Life.Agent == kernel.Root {
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

	if err := d.Submit(ctx, "Weather in Oslo?"); err != nil {
		log.Fatal(err)
	}
	<-started
	if err := d.Cancel(ctx, kernel.Root, 1); err != nil { // bound to turn 1
		log.Fatal(err)
	}
	end := <-ended
	fmt.Println("turn", end.Turn, end.Outcome, end.Reason)

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// tool: cancelled
	// turn 1 interrupted user_cancel
}
