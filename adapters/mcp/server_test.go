package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// roleEnv makes the test binary an MCP server on its stdin and stdout (a
// stdio server for the tests that need a real process).
const roleEnv = "MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) != "" {
		os.Exit(serveStdio())
	}
	goleak.VerifyTestMain(m)
}

func serveStdio() int {
	if role, ok := strings.CutPrefix(os.Getenv(roleEnv), rawRolePrefix); ok {
		return serveRaw(role)
	}
	fmt.Fprintln(os.Stderr, "test server starting")
	switch os.Getenv(roleEnv) {
	case "exit-at-start":
		fmt.Fprintln(os.Stderr, "fatal: no database configured")
		return 4
	case "leak-at-start":
		fmt.Fprintln(os.Stderr, "fatal: upstream refused token "+os.Getenv("UPSTREAM"))
		return 4
	}
	ts := newTestServer()
	if err := ts.build().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		return 1
	}
	return 0
}

// testServer is a go-sdk server with tools for every path of a call. The
// channels let an in-process test see what the server saw.
type testServer struct {
	mu sync.Mutex
	// cancels lists the request ids of every notifications/cancelled the
	// server received, in order.
	cancels []string
	// calls lists the tools called, in order.
	calls   []string
	methods []string

	inHandler   chan string   // a blocking tool's handler runs (its name)
	cancelled   chan string   // a blocking tool saw its context end
	release     chan struct{} // lets "ignore" return
	releaseOnce sync.Once
}

// finish lets every "ignore" call return.
func (ts *testServer) finish() { ts.releaseOnce.Do(func() { close(ts.release) }) }

func newTestServer() *testServer {
	return &testServer{inHandler: make(chan string, 16), cancelled: make(chan string, 16), release: make(chan struct{})}
}

var objectSchema = map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}

func (ts *testServer) build() *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			ts.mu.Lock()
			ts.methods = append(ts.methods, method)
			switch p := req.GetParams().(type) {
			case *sdk.CancelledParams:
				ts.cancels = append(ts.cancels, idText(p.RequestID))
			}
			ts.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	progress := func(ctx context.Context, req *sdk.CallToolRequest, n float64, msg string) {
		if tok := req.Params.GetProgressToken(); tok != nil {
			_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: n, Total: 3, Message: msg})
		}
	}
	// Annotations: echo only reads, pid may run twice, exit says it
	// destroys (and no more).
	destructive := true
	annotations := map[string]*sdk.ToolAnnotations{
		"echo": {ReadOnlyHint: true},
		"pid":  {IdempotentHint: true},
		"exit": {DestructiveHint: &destructive},
	}
	add := func(name string, h sdk.ToolHandler) {
		srv.AddTool(&sdk.Tool{Name: name, Description: "test tool " + name, InputSchema: objectSchema, Annotations: annotations[name]}, func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			ts.mu.Lock()
			ts.calls = append(ts.calls, name)
			ts.mu.Unlock()
			return h(ctx, req)
		})
	}
	args := func(req *sdk.CallToolRequest) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(req.Params.Arguments, &m)
		return m
	}
	add("echo", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text(fmt.Sprint(args(req)["text"])), nil
	})
	add("block", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		progress(ctx, req, 1, "blocking")
		ts.inHandler <- "block"
		<-ctx.Done()
		ts.cancelled <- "block"
		return nil, ctx.Err()
	})
	add("ignore", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		ts.inHandler <- "ignore"
		<-ts.release // the cancel is ignored
		return text("finished anyway"), nil
	})
	add("progress", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		for i := 1; i <= 3; i++ {
			progress(ctx, req, float64(i), fmt.Sprintf("step %d", i))
		}
		return text("done"), nil
	})
	add("flood", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		for i := 1; i <= 2000; i++ {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2000, Message: strings.Repeat("m", 1000)})
			}
		}
		return text("flooded"), nil
	})
	add("content", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return contentFor(fmt.Sprint(args(req)["text"])), nil
	})
	add("fail", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "text must be a string"}
	})
	add("env", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		env := os.Environ()
		sort.Strings(env)
		return text(strings.Join(env, "\n")), nil
	})
	add("spawn", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		// A grandchild in a session of its own, as a daemon would be.
		cmd := exec.Command("sleep", "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		return text(fmt.Sprint(cmd.Process.Pid)), nil
	})
	add("pid", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		ts.inHandler <- "pid"
		return text(fmt.Sprint(os.Getpid())), nil
	})
	add("leak", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return text("the token is " + os.Getenv("UPSTREAM")), nil
	})
	add("leak-exit", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "fatal: upstream refused token "+os.Getenv("UPSTREAM"))
		os.Exit(3)
		return nil, nil
	})
	add("exit", func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		fmt.Fprintln(os.Stderr, "panic: the tool crashed")
		os.Exit(3)
		return nil, nil
	})
	return srv
}

// contentFor builds a result of the kind named.
func contentFor(kind string) *sdk.CallToolResult {
	size := int64(2048)
	switch kind {
	case "text":
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "one"}, &sdk.TextContent{Text: "two"}}}
	case "error":
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such file"}}}
	case "structured":
		return &sdk.CallToolResult{StructuredContent: map[string]any{"sum": 3, "ok": true}}
	case "structured+text":
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"ok": true, "sum": 3}`}}, StructuredContent: map[string]any{"sum": 3, "ok": true}}
	case "structured+other":
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "the sum is 3"}}, StructuredContent: map[string]any{"sum": 3}}
	case "media":
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "here:"},
			&sdk.ImageContent{Data: make([]byte, 1234), MIMEType: "image/png"},
			&sdk.AudioContent{Data: make([]byte, 10), MIMEType: "audio/wav"},
			&sdk.ResourceLink{URI: "file:///a.txt", Name: "a.txt", MIMEType: "text/plain", Size: &size},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://notes", MIMEType: "text/markdown", Text: "# notes"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://blob", MIMEType: "application/zip", Blob: make([]byte, 99)}},
		}}
	case "empty":
		return &sdk.CallToolResult{Content: []sdk.Content{}}
	case "huge":
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("x", 100<<10)}}}
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "unknown kind " + kind}}}
}

// snapshot returns what the server saw.
func (ts *testServer) snapshot() (calls, cancels, methods []string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]string(nil), ts.calls...), append([]string(nil), ts.cancels...), append([]string(nil), ts.methods...)
}
