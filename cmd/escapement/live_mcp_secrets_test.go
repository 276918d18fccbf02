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
	"time"

	"github.com/escapement/escapement/internal/fakeopenai"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpToken is a credential an MCP configuration expands from the
// environment; the variable's name does not look secret, so only its
// expansion into the configuration makes it one.
const mcpToken = "upstream-cred-5b8e1d0c4a97"

// shMCPServer is a stdio MCP server in sh: it answers the handshake, lists
// one tool, "login", and when it is called prints the token it was given
// to stderr and dies (a server whose upstream refused it).
const shMCPServer = `while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
  *'"method":"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id" ;;
  *'"method":"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"login","description":"logs in upstream","inputSchema":{"type":"object"}}]}}\n' "$id" ;;
  *'"method":"ping"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" ;;
  *'"method":"tools/call"'*) echo "login failed: upstream refused token $UPSTREAM" >&2; exit 3 ;;
  esac
done
`

// callThenAnswer asks for tool once, then answers with what it returned.
func callThenAnswer(tool string) fakeopenai.Handler {
	return func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("the tool said: "+r.Body.Last().Content, 3)
			return
		}
		_ = w.Call(0, "c1", tool, `{}`, 2)
		_ = w.End("tool_calls")
	}
}

// noMCPToken fails the test for each output that holds mcpToken or a
// 12-byte run of it, and returns whether the outputs hold a redaction.
func noMCPToken(t *testing.T, outputs map[string]string) {
	t.Helper()
	for name, text := range outputs {
		for i := 0; i+12 <= len(mcpToken); i++ {
			if strings.Contains(text, mcpToken[i:i+12]) {
				t.Errorf("%s holds the MCP configuration's token: %q", name, text)
				break
			}
		}
	}
}

// modelSaw is every tool result the model was sent.
func modelSaw(srv *fakeopenai.Server) string {
	var b strings.Builder
	for _, r := range srv.Requests() {
		if r.Body.Last().Role == "tool" {
			b.WriteString(r.Body.Last().Content + "\n")
		}
	}
	return b.String()
}

// TestMCPSecretsStayPut: a token an --mcp-config file expands into a stdio
// server's env, printed by the server on its stderr as it dies in a call,
// reaches neither the model (the call's result quotes the stderr's tail),
// nor stdout, stderr (debug log included), the session or the trace: the
// CLI redacts every value the configuration expanded, as it does the API
// key.
func TestMCPSecretsStayPut(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "server.sh")
	if err := os.WriteFile(script, []byte(shMCPServer), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"leaky": map[string]any{
		"command": "/bin/sh", "args": []string{script}, "env": map[string]string{"UPSTREAM": "${UPSTREAM_CRED}"}}}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("UPSTREAM_CRED", mcpToken)
	srv := endpoint(t, callThenAnswer("mcp__leaky__login"))
	session, trace := filepath.Join(dir, "s.jsonl"), filepath.Join(dir, "t.jsonl")
	c := startCLI(t, []string{"--log-level", "debug", "run", "log in", "--mcp-config", cfg, "--session", session, "--trace", trace, "--workspace", dir})
	if code := c.wait(60 * time.Second); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, c.errb)
	}
	saw := modelSaw(srv)
	mustHave(t, saw, "stopped during the call", "upstream refused token [redacted]")
	outputs := map[string]string{"the model's tool result": saw, "stdout": c.out.String(), "stderr": c.errb.String()}
	for _, f := range []string{session, trace} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		outputs[f] = string(b)
	}
	noMCPToken(t, outputs)
}

// TestMCPURLSecretStaysPut: an HTTP server whose URL carries the token
// (?api_key=${…}) and that drops the connection during a call: Go's
// transport error quotes the whole URL, and the model, stdout, the --json
// events, the session and the trace get it redacted.
func TestMCPURLSecretStaysPut(t *testing.T) {
	var down atomic.Bool
	var web *httptest.Server
	server := sdk.NewServer(&sdk.Implementation{Name: "web", Version: "1"}, nil)
	server.AddTool(&sdk.Tool{Name: "fetch", Description: "drops the connection", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			down.Store(true)
			web.CloseClientConnections()
			<-ctx.Done()
			return nil, ctx.Err()
		})
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	web = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		handler.ServeHTTP(w, r)
	}))
	defer web.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"web": map[string]any{"url": web.URL + "/mcp?api_key=${WEB_CRED}"}}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WEB_CRED", mcpToken)
	srv := endpoint(t, callThenAnswer("mcp__web__fetch"))
	session, trace := filepath.Join(dir, "s.jsonl"), filepath.Join(dir, "t.jsonl")
	c := startCLI(t, []string{"--log-level", "debug", "run", "fetch", "--json", "--mcp-config", cfg, "--session", session, "--trace", trace, "--workspace", dir})
	if code := c.wait(60 * time.Second); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, c.errb)
	}
	saw := modelSaw(srv)
	mustHave(t, saw, "stopped during the call", "api_key=[redacted]")
	outputs := map[string]string{"the model's tool result": saw, "stdout": c.out.String(), "stderr": c.errb.String()}
	for _, f := range []string{session, trace} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		outputs[f] = string(b)
	}
	noMCPToken(t, outputs)
}

// TestMCPSecretVarsWithheldFromShell: the variable an --mcp-config file
// expanded into a server's token goes to that server only: the shell tool
// does not inherit it, though nothing about its name looks secret, unless
// --tool-env passes it.
func TestMCPSecretVarsWithheldFromShell(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "server.sh")
	if err := os.WriteFile(script, []byte(shMCPServer), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"leaky": map[string]any{
		"command": "/bin/sh", "args": []string{script}, "env": map[string]string{"UPSTREAM": "${UPSTREAM_CRED}"}}}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("UPSTREAM_CRED", mcpToken)
	t.Setenv("PLAIN_SETTING", "plain")
	for _, tc := range []struct {
		name string
		more []string
		want string
	}{
		{"withheld", nil, "cred=[] plain=[plain]"},
		// Passed by name, it is the user's to give: the shell gets it and
		// prints it; what reaches the model is redacted at the kernel's
		// edge as every tool result is (docs/durable.md, "Secrets").
		{"passed", []string{"--tool-env", "UPSTREAM_CRED"}, "cred=[[redacted]] plain=[plain]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"command": `echo "cred=[$UPSTREAM_CRED] plain=[$PLAIN_SETTING]"`})
			srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				if r.Body.Last().Role == "tool" {
					_ = w.Answer("done", 1)
					return
				}
				_ = w.Call(0, "c1", "shell", string(args), 8)
				_ = w.End("tool_calls")
			})
			c := startCLI(t, append([]string{"run", "echo", "--allow-shell", "--mcp-config", cfg, "--session", filepath.Join(t.TempDir(), "s.jsonl"), "--workspace", dir}, tc.more...))
			if code := c.wait(60 * time.Second); code != exitOK {
				t.Fatalf("exit %d\nstderr: %s", code, c.errb)
			}
			mustHave(t, modelSaw(srv), tc.want)
		})
	}
}
