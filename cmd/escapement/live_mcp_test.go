package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/internal/fakeopenai"
)

// everythingJSON writes an --mcp-config file for the MCP reference server
// installed under adapters/mcp/testdata (docs/mcp.md's example runs it with
// npx; the tests run the installed copy with node, without the network).
func everythingJSON(t *testing.T, dir string) string {
	t.Helper()
	script, err := filepath.Abs("../../adapters/mcp/testdata/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	node, nerr := exec.LookPath("node")
	_, serr := os.Stat(script)
	if nerr != nil || serr != nil {
		msg := "the MCP reference server is not installed: run `npm ci --prefix adapters/mcp/testdata/everything` (needs Node.js 20+; .ci/run does it)"
		if os.Getenv("ESCAPEMENT_REQUIRE_MCP_E2E") != "" {
			t.Fatalf("%s: %v %v", msg, nerr, serr)
		}
		t.Skip(msg)
	}
	cfg := map[string]any{"mcpServers": map[string]any{"everything": map[string]any{"command": node, "args": []string{script, "stdio"}}}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "everything.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMCPRunEverything: `escapement run --mcp-config everything.json` as
// docs/mcp.md shows it: the reference server's tools are offered to the model
// beside the workspace tools, a call reaches the server and its answer the
// model; the server is stopped at exit.
func TestMCPRunEverything(t *testing.T) {
	dir := t.TempDir()
	cfg := everythingJSON(t, dir)
	srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("The tool says: "+r.Body.Last().Content, 3)
			return
		}
		_ = w.Call(0, "c1", "mcp__everything__get-sum", `{"a": 2, "b": 3}`, 2)
		_ = w.End("tool_calls")
	})
	c := startCLI(t, []string{"run", "add 2 and 3 with the get-sum tool", "--mcp-config", cfg, "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir})
	if code := c.wait(60 * time.Second); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, c.errb)
	}
	if got := c.out.String(); !strings.Contains(got, "The tool says: The sum of 2 and 3 is 5") {
		t.Errorf("stdout %q", got)
	}
	mustHave(t, c.errb.String(), "escapement: MCP server everything: 13 tools", `[main] mcp__everything__get-sum {"a": 2, "b": 3}`, "[main] ← mcp__everything__get-sum ok")
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	var offered []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(reqs[0].Body.Tools, &offered); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, o := range offered {
		names[o.Function.Name] = string(o.Function.Parameters)
	}
	if _, ok := names["read_file"]; !ok {
		t.Errorf("the workspace tools are gone: %v", names)
	}
	if p := names["mcp__everything__get-sum"]; !strings.Contains(p, `"a"`) || !strings.Contains(p, `"b"`) {
		t.Errorf("get-sum offered with parameters %s", p)
	}
}

// TestMCPCtrlCDuringLongCall: Ctrl-C during the reference server's long
// operation: notifications/cancelled goes out, the server acknowledges it
// (the op ends cancelled, not abandoned: the kernel abandons exactly at
// grace, so the turn ended within it), the model is not asked again, and
// escapement exits 130 — after the turn's end, only the server's stop
// (its stdin closed, grace/2 to exit, then the kill) stands between the
// cancel and the exit, so the exit comes within grace + grace/2. Progress
// reached --json as mcp_progress lines.
func TestMCPCtrlCDuringLongCall(t *testing.T) {
	dir := t.TempDir()
	cfg := everythingJSON(t, dir)
	srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("unreachable", 1)
			return
		}
		_ = w.Call(0, "c1", "mcp__everything__trigger-long-running-operation", `{"duration": 60, "steps": 120}`, 2)
		_ = w.End("tool_calls")
	})
	const grace = 2 * time.Second
	c := startCLI(t, []string{"run", "run the long operation", "--json", "--grace", grace.String(), "--mcp-config", cfg, "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir})
	eventually(t, "a progress notification", func() bool { return strings.Contains(c.out.String(), `"event":"progress"`) })
	c.signal(syscall.SIGINT)
	at := time.Now()
	if code := c.wait(30 * time.Second); code != exitInterrupted {
		t.Fatalf("exit %d, want 130\nstderr: %s", code, c.errb)
	}
	t.Logf("SIGINT → exit 130: %v (grace %v)", time.Since(at), grace)
	var (
		progress []protocol.Event
		sent     int
	)
	evs := jsonRun(t, c.out.String())
	for _, ev := range evs {
		switch {
		case ev.Type == protocol.TypeMCP && ev.MCPEvent == "progress":
			progress = append(progress, ev)
		case ev.Type == protocol.TypeMCP && ev.MCPEvent == "cancel_sent":
			sent++
		}
	}
	if len(progress) == 0 || progress[0].Tool != "mcp__everything__trigger-long-running-operation" || progress[0].Total != 120 || progress[0].Server != "everything" || progress[0].Agent != "main" || progress[0].Progress == nil {
		t.Errorf("progress lines %+v", progress)
	}
	if sent != 1 {
		t.Errorf("%d mcp cancel_sent lines, want 1", sent)
	}
	toolEnd, _ := lastOf(evs, protocol.TypeOpEnded, "main")
	for _, ev := range evs {
		if ev.Type == protocol.TypeOpEnded && ev.OpKind == protocol.OpTool {
			toolEnd = ev
		}
	}
	if toolEnd.OpKind != protocol.OpTool || toolEnd.End != "cancelled" {
		t.Errorf("the long call ended %+v, want cancelled (acknowledged before grace)", toolEnd)
	}
	if turnEnd, _ := lastOf(evs, protocol.TypeTurnEnded, "main"); turnEnd.Outcome != "interrupted" || turnEnd.Reason != "user_cancel" {
		t.Errorf("turn end %+v", turnEnd)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d model requests, want 1: none after the interrupt", n)
	}
}

// TestMCPConfigErrors: a bad --mcp-config, or a server that does not start,
// is a usage error (exit 2) naming the file (and line, field, server), and
// nothing is written: no session file.
func TestMCPConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.json", "{\"mcpServers\": {\"x\": {\"command\": \"y\", \"cwd\": \"/\"}}}")
	ghost := write("ghost.json", `{"mcpServers": {"ghost": {"command": "/nonexistent/server"}}}`)
	empty := write("empty.json", `{"mcpServers": {}}`)
	key := write("key.json", `{"mcpServers": {"k": {"command": "x", "env": {"OPENAI_API_KEY": "sk-x"}}}}`)
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("no", 1) })
	for _, tc := range []struct {
		file string
		want []string
	}{
		{bad, []string{"--mcp-config: " + bad + ":1:39: mcpServers.x.cwd: unknown field"}},
		{ghost, []string{`--mcp-config: MCP server "ghost" (` + ghost + `): start /nonexistent/server:`, "no such file or directory"}},
		{empty, []string{"--mcp-config " + empty + `: no servers under "mcpServers"`}},
		{key, []string{"mcpServers.k.env.OPENAI_API_KEY: OPENAI_API_KEY cannot be passed"}},
		{filepath.Join(dir, "missing.json"), []string{"--mcp-config: open " + filepath.Join(dir, "missing.json")}},
	} {
		session := filepath.Join(dir, "s-"+filepath.Base(tc.file)+".jsonl")
		c := startCLI(t, []string{"run", "hi", "--mcp-config", tc.file, "--session", session, "--workspace", dir})
		if code := c.wait(30 * time.Second); code != exitUsage {
			t.Errorf("%s: exit %d, want 2\nstderr: %s", tc.file, code, c.errb)
		}
		mustHave(t, c.errb.String(), tc.want...)
		if _, err := os.Stat(session); err == nil {
			t.Errorf("%s: a session file was written", tc.file)
		}
	}
}

func mustHave(t *testing.T, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%q does not contain %q", got, w)
		}
	}
}

// TestMCPProgressOnStderr: without --json, a long MCP call's progress shows
// on stderr beside the other activity lines, and its cancel as the call's
// end.
func TestMCPProgressOnStderr(t *testing.T) {
	dir := t.TempDir()
	cfg := everythingJSON(t, dir)
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Call(0, "c1", "mcp__everything__trigger-long-running-operation", `{"duration": 60, "steps": 120}`, 2)
		_ = w.End("tool_calls")
	})
	c := startCLI(t, []string{"run", "run the long operation", "--mcp-config", cfg, "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir})
	eventually(t, "a progress line", func() bool {
		return strings.Contains(c.errb.String(), "[main] mcp__everything__trigger-long-running-operation progress 1/120\n")
	})
	c.signal(syscall.SIGINT)
	if code := c.wait(30 * time.Second); code != exitInterrupted {
		t.Fatalf("exit %d, want 130\nstderr: %s", code, c.errb)
	}
	mustHave(t, c.errb.String(), "[main] ← mcp__everything__trigger-long-running-operation cancelled (user_cancel)")
	if c.out.String() != "" {
		t.Errorf("stdout %q: progress belongs on stderr", c.out)
	}
}

// closeCounting is a tool box that counts its Close calls.
type closeCounting struct {
	keyTools
	closed *int
}

func (c closeCounting) Close() error { *c.closed++; return nil }

// TestToolsClosedWhenMCPFails: when the MCP servers cannot be started,
// the workspace's tool box already opened is closed before the usage error.
func TestToolsClosedWhenMCPFails(t *testing.T) {
	dir := t.TempDir()
	ghost := filepath.Join(dir, "ghost.json")
	if err := os.WriteFile(ghost, []byte(`{"mcpServers": {"ghost": {"command": "/nonexistent/server"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("no", 1) })
	closed := 0
	inject := func(a *app) {
		a.newTools = func(tools.Config) (toolBox, error) { return closeCounting{keyTools{"k"}, &closed}, nil }
	}
	var out, errb bytes.Buffer
	code := runWith(context.Background(), []string{"run", "hi", "--mcp-config", ghost, "--workspace", dir},
		streams{in: strings.NewReader(""), out: &out, err: &errb}, func(int) {}, noSignals, inject)
	if code != exitUsage || closed != 1 {
		t.Fatalf("exit %d, the tool box closed %d time(s); want 2 and once\n%s", code, closed, errb.String())
	}
}
