package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/fakeopenai"
)

// hostileText is what a server, a model or a tool may send to take over a
// terminal: clear the screen, retitle the window (OSC ... BEL), a C1 CSI,
// a bidirectional override, and a CR that makes the rest of the line
// overwrite what came before it.
const hostileText = "\x1b[2J\x1b]0;pwned\x07 \u009b31m \u202eevil\rforged"

// rawControls lists the control bytes and characters found in s that a
// terminal would act on (newlines allowed where lines is set; a CR only
// before a newline, as a terminal's line discipline writes it).
func rawControls(s string, lines bool) []string {
	var found []string
	for i, r := range s {
		switch {
		case (r == '\n' || r == '\t') && lines:
		case r == '\r' && lines && strings.HasPrefix(s[i+1:], "\n"):
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e):
			found = append(found, string(r))
		}
	}
	return found
}

// TestStderrEscapesOutsideText: a tool name, its arguments and a server's
// error message holding ESC, BEL, CR, C1 and bidi controls are shown on
// stderr escaped (`\x1b[2J`, `\r`), on the activity lines and in the
// turn's failure; stdout, not a terminal here, gets the answer's bytes as
// they are (a script's exact text).
func TestStderrEscapesOutsideText(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "bad request " + hostileText}})
			w.Status(http.StatusBadRequest, string(b))
			return
		}
		_ = w.Text("answer " + hostileText + "\n")
		args, _ := json.Marshal(map[string]string{"path": hostileText})
		call, _ := json.Marshal(map[string]any{"index": 0, "id": "c1", "type": "function",
			"function": map[string]string{"name": "list_dir" + hostileText, "arguments": string(args)}})
		_ = w.Raw(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"fake","choices":[{"index":0,"delta":{"tool_calls":[` + string(call) + `]},"finish_reason":null}]}`)
		_ = w.End("tool_calls")
	})
	dir := t.TempDir()
	c := startCLI(t, []string{"run", "go", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir})
	if code := c.wait(30 * time.Second); code != exitCheckFailed {
		t.Fatalf("exit %d, want 1\nstderr: %q", code, c.errb)
	}
	stderr := c.errb.String()
	if raw := rawControls(stderr, true); len(raw) > 0 {
		t.Errorf("stderr holds raw controls %q:\n%q", raw, stderr)
	}
	mustHave(t, stderr, `[main] list_dir\x1b[2J\x1b]0;pwned\x07 \u009b31m \u202eevil\rforged {"path":`, `bad request \x1b[2J\x1b]0;pwned\x07 \u009b31m \u202eevil\rforged`)
	if !strings.Contains(c.out.String(), "answer "+hostileText) {
		t.Errorf("stdout (a pipe) does not hold the answer's exact text: %q", c.out)
	}
}

// TestMCPStartErrorEscaped: an HTTP MCP server that refuses to start
// with terminal controls in its answer's body has them escaped in the
// error escapement prints.
func TestMCPStartErrorEscaped(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("unreachable", 1) })
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "database is down "+hostileText, http.StatusInternalServerError)
	}))
	defer web.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"evil": map[string]any{"url": web.URL}}})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c := startCLI(t, []string{"run", "go", "--mcp-config", cfg, "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir})
	if code := c.wait(30 * time.Second); code != exitUsage {
		t.Fatalf("exit %d, want 2\nstderr: %q", code, c.errb)
	}
	stderr := c.errb.String()
	if raw := rawControls(stderr, true); len(raw) > 0 {
		t.Errorf("stderr holds raw controls %q:\n%q", raw, stderr)
	}
	mustHave(t, stderr, `HTTP 500 Internal Server Error: database is down \x1b[2J\x1b]0;pwned\x07`)
}
