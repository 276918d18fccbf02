// Command embed is the README's "Embed it" example, kept here so CI builds
// and runs it (main_test.go): one agent turn with a tool of the program's own
// against any OpenAI-compatible endpoint (OPENAI_BASE_URL, OPENAI_API_KEY,
// OPENAI_MODEL), its answer streamed to stdout; Ctrl-C cancels the turn
// (exit 130), a second Ctrl-C kills the process.
//
//	go run ./examples/embed "What time is it in UTC?"
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/toolset"
	"github.com/escapement/escapement/kernel"
)

// embed:begin
func main() {
	tools, _ := toolset.New() // add tools.New(...) boxes and mcp.Client servers here too
	err := tools.AddFunc(ports.ToolSpec{Name: "utc_now", Description: "The current time in UTC."},
		func(ctx context.Context, args json.RawMessage) (string, error) {
			return time.Now().UTC().Format(time.RFC3339), nil
		})
	if err != nil {
		log.Fatal(err)
	}
	model, err := openai.New(openai.Config{BaseURL: os.Getenv("OPENAI_BASE_URL"), APIKey: os.Getenv("OPENAI_API_KEY"),
		Model: cmp.Or(os.Getenv("OPENAI_MODEL"), "gpt-4o-mini"), Tools: tools.Specs()})
	if err != nil {
		log.Fatal(err)
	}
	ended := make(chan kernel.Lifecycle, 1)
	d, err := live.New(live.Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()}, Model: model, Tools: tools,
		Observer: func(s ports.Step) { // on the kernel's goroutine, after every step
			for _, e := range s.Effects {
				switch l := e.Life; {
				case e.Kind != kernel.EffEmit || l.Agent != kernel.Root:
				case l.Kind == kernel.LifeDelta:
					fmt.Print(l.Text) // the answer as it streams
				case l.Kind == kernel.LifeTurnEnded:
					ended <- l
				}
			}
		}})
	if err != nil {
		log.Fatal(err)
	}
	ctx, shutdown := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	if err := d.Submit(ctx, strings.Join(os.Args[1:], " ")); err != nil {
		log.Fatal(err)
	}
	var end kernel.Lifecycle
	select {
	case end = <-ended:
	case <-sigs: // Ctrl-C cancels the turn: tools and stream get their cancel, then a grace
		signal.Stop(sigs)                 // a second Ctrl-C kills the process
		_ = d.Cancel(ctx, kernel.Root, 1) // bound to turn 1: it cannot cut a later one
		end = <-ended
	}
	shutdown() // Run returns once nothing runs (at most the grace period)
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	fmt.Println()
	if end.Reason == kernel.ReasonUserCancel {
		os.Exit(130)
	} else if end.Outcome != kernel.OutcomeCompleted {
		log.Fatalf("turn %s: %s: %s", end.Outcome, end.Reason, end.Detail) // Detail: the cause (status, server's message)
	}
}

// embed:end
