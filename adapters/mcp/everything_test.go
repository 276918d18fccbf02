package mcp

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/proctest"
	"github.com/escapement/escapement/kernel"
)

// requireE2E, when set (CI sets it), turns a missing Node.js or reference
// server into a failure instead of a skip.
const requireE2E = "ESCAPEMENT_REQUIRE_MCP_E2E"

// EverythingConfig is the reference server's configuration as the tests
// (and docs/mcp.md's example) run it: node on the npm-installed package,
// stdio transport.
func everythingConfig(t *testing.T) ServerConfig {
	t.Helper()
	script, err := filepath.Abs("testdata/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	node, nerr := exec.LookPath("node")
	_, serr := os.Stat(script)
	if nerr != nil || serr != nil {
		msg := "the MCP reference server is not installed: run `npm ci --prefix adapters/mcp/testdata/everything` (needs Node.js 20+; .ci/run does it)"
		if os.Getenv(requireE2E) != "" {
			t.Fatalf("%s: %v %v", msg, nerr, serr)
		}
		t.Skip(msg)
	}
	return ServerConfig{Name: "everything", File: "everything.json", Type: TypeStdio, Command: node, Args: []string{script, "stdio"}}
}

// pick returns the first of names the client offers (the reference
// server renamed its tools: trigger-long-running-operation was
// longRunningOperation, get-env was printEnv).
func pick(t *testing.T, c *Client, names ...string) string {
	t.Helper()
	for _, s := range c.Specs() {
		if slices.Contains(names, s.Name) {
			return s.Name
		}
	}
	t.Fatalf("the reference server offers none of %v", names)
	return ""
}

// TestEverythingCancelLongRunning: against the reference server, the
// kernel's cancel of its long-running operation, mid-way (after its first
// progress notification), sends notifications/cancelled for the call's
// request, is acknowledged (the op ends cancelled, not abandoned: the
// kernel abandons exactly at grace, so the turn ended within it), and the
// model is not asked again. Progress reported before the cancel reached
// the observer; none after.
func TestEverythingCancelLongRunning(t *testing.T) {
	cfg := everythingConfig(t)
	ev := newEvents()
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{cfg}, Observer: ev.add, PingTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pid := liveSession(t, c, 0).proc.Pid()
	name := pick(t, c, "mcp__everything__trigger-long-running-operation", "mcp__everything__longRunningOperation")
	m := &callModel{name: name, args: `{"duration": 60, "steps": 120}`}
	d, rec, _, stop := drive(t, m, c, 2*time.Second)
	defer stop()
	if err := d.Submit(t.Context(), "run the long operation"); err != nil {
		t.Fatal(err)
	}
	first := ev.next(t, EventProgress)
	if first.Tool != name || first.Progress != 1 || first.Total != 120 {
		t.Errorf("first progress %+v", first)
	}
	if err := d.Cancel(t.Context(), kernel.Root, 0); err != nil {
		t.Fatal(err)
	}
	end := <-rec.ended
	if end.Outcome != kernel.OutcomeInterrupted || end.Reason != kernel.ReasonUserCancel {
		t.Fatalf("turn ended %s/%s", end.Outcome, end.Reason)
	}
	op := rec.toolOp(t)
	if ends := rec.toolEnds(op); !slices.Equal(ends, []kernel.OpEnd{kernel.OpCancelled}) {
		t.Errorf("tool op ended %v, want [cancelled] (acknowledged within grace)", ends)
	}
	sent := ev.of(EventCancelSent)
	if len(sent) != 1 || sent[0].Op != op || sent[0].RequestID == "" {
		t.Fatalf("cancel_sent events %+v", sent)
	}
	calls := rec.of(kernel.LifeCallFinished)
	if len(calls) != 1 || calls[0].Status != kernel.CallCancelled {
		t.Errorf("call ends %+v", calls)
	}
	if n := m.requests.Load(); n != 1 {
		t.Errorf("%d model requests, want 1: no request after the cancel (F1)", n)
	}
	progressAtCancel := len(ev.of(EventProgress))
	// The reference server keeps notifying about the cancelled operation;
	// those notifications are not shown. A call afterwards still works.
	if r := c.Run(t.Context(), call(pick(t, c, "mcp__everything__echo"), `{"message":"still here"}`)); r.Status != kernel.ToolOK || !strings.Contains(r.Content, "still here") {
		t.Errorf("echo after the cancel: %+v", r)
	}
	if n := len(ev.of(EventProgress)); n != progressAtCancel {
		t.Errorf("%d progress events after the cancel", n-progressAtCancel)
	}
	stop()
	c.Close()
	if proctest.Alive(pid) {
		t.Errorf("the server process %d outlived Close", pid)
	}
}

// TestEverythingEnvHasNoKeys: the reference server's environment tool
// shows what a server gets: no OPENAI_API_KEY, no secret-looking variable,
// the rest of escapement's environment.
func TestEverythingEnvHasNoKeys(t *testing.T) {
	cfg := everythingConfig(t)
	const key = "sk-e2e-0123456789abcdefghij"
	t.Setenv("OPENAI_API_KEY", key)
	t.Setenv("PAYMENTS_SECRET", "secret-value-42")
	t.Setenv("E2E_PLAIN", "visible")
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{cfg}, PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := c.Run(t.Context(), call(pick(t, c, "mcp__everything__get-env", "mcp__everything__printEnv"), `{}`))
	if r.Status != kernel.ToolOK {
		t.Fatalf("env tool: %+v", r)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(r.Content), &env); err != nil {
		t.Fatalf("env tool output is not the JSON object expected: %v\n%s", err, r.Content)
	}
	for _, name := range []string{"OPENAI_API_KEY", "PAYMENTS_SECRET"} {
		if _, ok := env[name]; ok {
			t.Errorf("%s reached the server", name)
		}
	}
	for _, secret := range []string{key, "secret-value-42"} {
		if strings.Contains(r.Content, secret) {
			t.Errorf("the value %q reached the server", secret)
		}
	}
	if env["E2E_PLAIN"] != "visible" {
		t.Errorf("an ordinary variable did not reach the server: %v", env["E2E_PLAIN"])
	}
}
