package mcp

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/proctest"
	"github.com/escapement/escapement/kernel"
)

// stdioConfig runs this test binary as a stdio MCP server.
func stdioConfig(t *testing.T, name, role string) ServerConfig {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return ServerConfig{Name: name, File: "stdio.json", Type: TypeStdio, Command: exe, Args: []string{"-test.run=^$"}, Env: map[string]string{roleEnv: role}}
}

// liveSession is the server's current session (white box).
func liveSession(t *testing.T, c *Client, i int) *session {
	t.Helper()
	s := c.servers[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil {
		t.Fatal("no session")
	}
	return s.sess
}

// TestStdioCrashMidCall: the server process is killed (SIGKILL, from
// outside) while a call runs: the call ends at once as an error result
// that says the server stopped, how (the signal) and what it last wrote to
// stderr; the next call starts a new process and works.
func TestStdioCrashMidCall(t *testing.T) {
	ev := newEvents()
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{stdioConfig(t, "srv", "serve")}, Observer: ev.add, PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first := liveSession(t, c, 0).proc.Pid()
	done := make(chan struct{})
	var r resultOf
	go func() {
		defer close(done)
		r.set(c.Run(t.Context(), call("mcp__srv__block", `{}`)))
	}()
	ev.next(t, EventProgress) // the call runs in the server
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	got := r.get()
	if got.Status != kernel.ToolError {
		t.Fatalf("crashed call: %v %q", got.Status, got.Content)
	}
	mustContain(t, "result", got.Content, `error: mcp__srv__block: MCP server "srv" (stdio.json) stopped during the call`, "killed by signal killed", `its stderr ended with: "test server starting"`, "restarted on the next call")
	stopped := ev.next(t, EventStopped)
	mustContain(t, "stopped event", stopped.Detail, "killed by signal killed")

	again := c.Run(t.Context(), call("mcp__srv__echo", `{"text":"back"}`))
	if again.Status != kernel.ToolOK || again.Content != "back" {
		t.Fatalf("call after the crash: %+v", again)
	}
	if second := liveSession(t, c, 0).proc.Pid(); second == first || !proctest.Alive(second) {
		t.Errorf("no new server process (%d, was %d)", second, first)
	}
}

// TestStdioToolExits: a tool that makes its server exit gives an error
// result with the exit status and the server's last stderr line.
func TestStdioToolExits(t *testing.T) {
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{stdioConfig(t, "srv", "serve")}, PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := c.Run(t.Context(), call("mcp__srv__exit", `{}`))
	if r.Status != kernel.ToolError {
		t.Fatalf("%v %q", r.Status, r.Content)
	}
	mustContain(t, "result", r.Content, "stopped during the call", "exit status 3", "panic: the tool crashed")
}

// TestStdioEnvPolicy: a server gets escapement's environment through the
// tools' policy: never OPENAI_API_KEY, no secret-looking variable unless
// PassEnv (--tool-env) names it; the config's env reaches it, secret-looking
// names included (the value of one is a secret of the configuration: the
// result that shows it has it redacted).
func TestStdioEnvPolicy(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
	t.Setenv("MY_SECRET", "s3")
	t.Setenv("GITHUB_TOKEN", "ghp_pass")
	t.Setenv("PLAIN_VAR", "plain")
	cfg := stdioConfig(t, "srv", "serve")
	cfg.Env["DB_PASSWORD"] = "from-config-7d3e9a1b" // a value shorter than 12 bytes is no secret (redact.Weak)
	c, err := Start(t.Context(), Options{Servers: []ServerConfig{cfg}, PassEnv: []string{"GITHUB_TOKEN"}, PingInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := c.Run(t.Context(), call("mcp__srv__env", `{}`))
	env := "\n" + r.Content + "\n"
	for _, gone := range []string{"OPENAI_API_KEY=", "MY_SECRET=", "sk-test-0123456789abcdef"} {
		if strings.Contains(env, gone) {
			t.Errorf("the server's environment holds %q", gone)
		}
	}
	for _, kept := range []string{"\nGITHUB_TOKEN=ghp_pass\n", "\nPLAIN_VAR=plain\n", "\nDB_PASSWORD=[redacted]\n"} {
		if !strings.Contains(env, kept) {
			t.Errorf("the server's environment lacks %q", strings.TrimSpace(kept))
		}
	}
	if _, err := Start(t.Context(), Options{PassEnv: []string{"OPENAI_API_KEY"}}); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY cannot be passed") {
		t.Errorf("PassEnv OPENAI_API_KEY: %v", err)
	}
}

// TestStdioCloseKillsDescendants: Close ends the server and everything it
// started, a daemon in a session of its own included; KillAll does the same
// without waiting.
func TestStdioCloseKillsDescendants(t *testing.T) {
	for _, hard := range []bool{false, true} {
		c, err := Start(t.Context(), Options{Servers: []ServerConfig{stdioConfig(t, "srv", "serve")}, PingInterval: -1, KillGrace: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		server := liveSession(t, c, 0).proc.Pid()
		r := c.Run(t.Context(), call("mcp__srv__spawn", `{}`))
		daemon, err := strconv.Atoi(r.Content)
		if err != nil {
			t.Fatalf("spawn: %+v", r)
		}
		if !proctest.Alive(daemon) {
			t.Fatalf("daemon %d not running", daemon)
		}
		if hard {
			c.KillAll()
		}
		c.Close()
		for _, pid := range []int{server, daemon} {
			if proctest.Alive(pid) {
				t.Errorf("hard=%v: process %d outlived Close", hard, pid)
			}
		}
	}
}

// TestStartFailures: a server that cannot start is reported naming its
// file and name, with the cause and what it wrote to stderr.
func TestStartFailures(t *testing.T) {
	missing := ServerConfig{Name: "ghost", File: "cfg.json", Type: TypeStdio, Command: "/nonexistent/mcp-server"}
	exits := stdioConfig(t, "early", "exit-at-start")
	silent := ServerConfig{Name: "mute", File: "cfg.json", Type: TypeStdio, Command: "sleep", Args: []string{"30"}}
	for _, tc := range []struct {
		cfg  ServerConfig
		opts Options
		want []string
	}{
		{missing, Options{}, []string{`MCP server "ghost" (cfg.json): start /nonexistent/mcp-server:`, "no such file or directory"}},
		{exits, Options{}, []string{`MCP server "early" (stdio.json): initialize:`, "the server process: exit status 4", `its stderr ended with: "test server starting | fatal: no database configured"`}},
		{silent, Options{StartTimeout: 300 * time.Millisecond}, []string{`MCP server "mute" (cfg.json): initialize: no answer within the start timeout`}},
		{ServerConfig{Name: "web", File: "cfg.json", Type: TypeHTTP, URL: "http://127.0.0.1:1/mcp"}, Options{}, []string{`MCP server "web" (cfg.json): initialize:`, "connection refused"}},
	} {
		tc.opts.Servers = []ServerConfig{tc.cfg}
		tc.opts.PingInterval = -1
		c, err := Start(context.Background(), tc.opts)
		if err == nil {
			c.Close()
			t.Errorf("%s started", tc.cfg.Name)
			continue
		}
		mustContain(t, "error", err.Error(), tc.want...)
	}
}
