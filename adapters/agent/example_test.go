package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/escapement/escapement/adapters/agent"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/toolset"
	"github.com/escapement/escapement/kernel"
)

// An agent with a tool of its own: the model (scripted here; adapters/openai
// in a program) calls the tool, then answers; the answer streams through
// the turn's events, and the Result says how the turn ended.
func Example() {
	model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		if last := req.Messages[len(req.Messages)-1]; last.Role == kernel.RoleTool {
			sink.Text("It is ")
			sink.Text(last.Content + ".")
			return nil
		}
		sink.Call(kernel.CallDelta{Index: 0, ID: "call_1", Name: "utc_now", Args: "{}"})
		return nil
	})
	tools, _ := toolset.New()
	_ = tools.AddFunc(ports.ToolSpec{Name: "utc_now", Description: "The current time in UTC."},
		func(context.Context, json.RawMessage) (string, error) { return "12:00 UTC", nil })

	ag, err := agent.New(agent.Config{Model: model, Tools: tools})
	if err != nil {
		panic(err)
	}
	defer ag.Close()
	turn := ag.Run(context.Background(), "What time is it?")
	for ev := range turn.Events() {
		fmt.Print(ev.Answer())
	}
	res, err := turn.Result()
	fmt.Printf("\n%s, %v\n", res.Outcome, err)
	// Output:
	// It is 12:00 UTC.
	// completed, <nil>
}

// Cancelling the turn's context is the user's Esc: the stream is cancelled,
// the turn ends interrupted (reason user_cancel) with what had streamed,
// and the model is not asked again.
func Example_cancel() {
	model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		sink.Text("Once upon a time")
		<-ctx.Done() // a long answer, cut by the cancel
		return ctx.Err()
	})
	ag, err := agent.New(agent.Config{Model: model})
	if err != nil {
		panic(err)
	}
	defer ag.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	res, _ := ag.Run(ctx, "Tell me a long story.").Result()
	fmt.Println(res.Outcome, res.Reason, res.Answer)
	fmt.Println(res.Err())
	// Output:
	// interrupted user_cancel Once upon a time
	// turn interrupted (turn 1 interrupted: user_cancel)
}

// With a session the agent keeps its transcript in a file (and a
// write-ahead log beside it while it runs); an agent built later on the
// same file goes on from its turns.
func Example_session() {
	dir, _ := os.MkdirTemp("", "agent-example-")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "work.jsonl")
	model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		sink.Text(fmt.Sprintf("I have seen %d message(s).", len(req.Messages)))
		return nil
	})
	for _, prompt := range []string{"Hello.", "Hello again."} {
		ag, err := agent.New(agent.Config{Model: model, Session: path})
		if err != nil {
			panic(err)
		}
		res, _ := ag.Run(context.Background(), prompt).Result()
		fmt.Printf("turn %d: %s\n", res.Turn, res.Answer)
		if err := ag.Close(); err != nil {
			panic(err)
		}
	}
	// Output:
	// turn 1: I have seen 1 message(s).
	// turn 2: I have seen 3 message(s).
}
