package toolset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/adapters/toolset"
	"github.com/escapement/escapement/kernel"
)

// Example composes escapement's workspace tools with a Go function of the
// program's own into one ports.Tools, and runs one call of each the way the
// live driver does. MCP servers join the same way (toolset.New(box,
// mcpClient)); give set.Specs() to the model (openai.Config.Tools) and the
// set to live.Config.Tools.
func Example() {
	dir, err := os.MkdirTemp("", "toolset-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ship it on friday\n"), 0o644); err != nil {
		log.Fatal(err)
	}

	box, err := tools.New(tools.Config{Workspace: dir}) // files and grep; no shell unless AllowShell
	if err != nil {
		log.Fatal(err)
	}
	set, err := toolset.New(box)
	if err != nil {
		log.Fatal(err)
	}
	defer set.Close()

	err = set.AddFunc(ports.ToolSpec{
		Name:        "word_count",
		Description: "Counts the words of a text.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
	}, func(ctx context.Context, args json.RawMessage) (string, error) {
		var in struct{ Text string }
		if err := json.Unmarshal(args, &in); err != nil {
			return "", fmt.Errorf("arguments: %w", err) // an error result for the model
		}
		return fmt.Sprint(len(strings.Fields(in.Text))), nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// A second tool of the same name is refused when added, never shadowed.
	fmt.Println(set.AddFunc(ports.ToolSpec{Name: "word_count"}, func(context.Context, json.RawMessage) (string, error) {
		return "", nil
	}))

	var names []string
	for _, spec := range set.Specs() {
		names = append(names, spec.Name)
	}
	fmt.Println(strings.Join(names, " "))

	ctx := context.Background()
	call := func(name, args string) {
		res := set.Run(ctx, ports.Call{Path: "main", ToolCall: kernel.ToolCall{ID: "call_" + name, Name: name, Arguments: args}})
		fmt.Printf("%s: %s %q\n", name, res.Status, res.Content)
	}
	call("word_count", `{"text":"one two three"}`)
	call("word_count", `{"text":`)
	call("read_file", `{"path":"notes.txt"}`)
	call("nope", `{}`)
	// Output:
	// toolset: tool "word_count" of AddFunc is already in the set (from AddFunc); tool names must be unique
	// read_file write_file list_dir grep delegate word_count
	// word_count: ok "3"
	// word_count: error "error: word_count: arguments: unexpected end of JSON input"
	// read_file: ok "ship it on friday\n"
	// nope: error "error: unknown tool \"nope\" (available: read_file, write_file, list_dir, grep, delegate, word_count)"
}
