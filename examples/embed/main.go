// Command embed is the README's "Embed it" example, kept here so CI builds
// and runs it (main_test.go): one agent turn with a tool of the program's own
// against any OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY,
// OPENAI_MODEL), its answer streamed to stdout. The agent keeps its session
// in embed-session.jsonl (in the working directory): each run is the next
// turn of it, and a run killed mid-turn (kill -9, a power cut) is continued
// by the next one, run without a prompt. Ctrl-C cancels the turn (exit
// 130), a second Ctrl-C kills the process.
//
//	go run ./examples/embed "What time is it in UTC?"
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/escapement/escapement/adapters/agent"
	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/toolset"
)

// embed:begin
func main() {
	tools, _ := toolset.New() // add tools.New(...) boxes and mcp.Client servers here too
	_ = tools.AddFunc(ports.ToolSpec{Name: "utc_now", Description: "The current time in UTC."},
		func(context.Context, json.RawMessage) (string, error) { return time.Now().UTC().String(), nil })
	model, errModel := openai.New(openai.Config{BaseURL: os.Getenv("OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY"),
		Model: cmp.Or(os.Getenv("OPENAI_MODEL"), "gpt-4o-mini")})
	ag, err := agent.New(agent.Config{Model: model, Tools: tools, Session: "embed-session.jsonl"}) // resumed if it exists
	if err = errors.Join(errModel, err); err != nil {
		log.Fatal(err)
	}
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt) // Ctrl-C cancels the turn, as Esc does
	turn := ag.Run(ctx, strings.Join(os.Args[1:], " "))                // no prompt: go on with a killed run's turn
	for ev := range turn.Events() {
		fmt.Print(ev.Answer()) // the answer as it streams
	}
	res, err := turn.Result()
	fmt.Println()
	agent.Exit(errors.Join(err, ag.Close(), res.Err())) // 0, or why not on stderr: 130 interrupted, 1 failed
}

// embed:end
