package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// TestKill9DuringIdempotentMCPToolReruns: kill -9 while an MCP tool that
// its server annotates idempotentHint runs; the resume runs the call again
// (docs/durable.md, "Recovery") and the model gets its result, not
// tool_lost. The server counts the calls: the first one stays until the
// process dies, the second answers at once.
func TestKill9DuringIdempotentMCPToolReruns(t *testing.T) {
	bin := buildBinary(t)
	var calls atomic.Int32
	server := sdk.NewServer(&sdk.Implementation{Name: "kb", Version: "1"}, nil)
	server.AddTool(&sdk.Tool{Name: "lookup", Description: "looks a word up", InputSchema: map[string]any{"type": "object"},
		Annotations: &sdk.ToolAnnotations{IdempotentHint: true}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			if calls.Add(1) == 1 {
				<-ctx.Done() // until the killed process's connection closes
				return nil, ctx.Err()
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found: escapement"}}}, nil
		})
	web := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	defer web.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"kb": map[string]any{"url": web.URL + "/mcp"}}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var got atomic.Value
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if last := r.Body.Last(); last.Role == "tool" {
			got.Store(last.Content)
			_ = w.Answer("Looked it up.", 4)
			return
		}
		_ = w.Call(0, "call_kb", "mcp__kb__lookup", `{}`, 5)
		_ = w.End("tool_calls")
	})
	t.Cleanup(srv.Close)
	sess := filepath.Join(dir, "s.jsonl")
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--workspace", dir, "--mcp-config", cfg)
	if _, err := p.stdin.Write([]byte("look it up\n")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the tool's first call", func() bool { return calls.Load() == 1 })
	p.kill9(t)

	r := resumeNoInput(t, bin, srv, dir, sess, "--mcp-config", cfg)
	if code := r.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, r.stderr)
	}
	if content, _ := got.Load().(string); !strings.Contains(content, "found: escapement") {
		t.Fatalf("the model got %q for the call; want the re-run's result", content)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the tool was called %d times, want 2 (once before the crash, once after)", n)
	}
	if n := countMessages(messages(readSession(t, sess)), func(m kernel.Message) bool {
		return m.Role == kernel.RoleTool && m.ToolCallID == "call_kb"
	}); n != 1 {
		t.Fatalf("%d results for the call in the session, want 1", n)
	}
}
