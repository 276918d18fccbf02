package main

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/spf13/pflag"

	"github.com/escapement/escapement/adapters/mcp"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/toolset"
	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/internal/termtext"
)

// registerMCPFlags adds --mcp-config to run and chat.
func registerMCPFlags(fl *pflag.FlagSet, f *liveFlags) {
	fl.StringArrayVar(&f.mcpConfigs, "mcp-config", nil, "start the MCP servers of `FILE` (the .mcp.json shape: {\"mcpServers\": {NAME: {\"command\", \"args\", \"env\"} or {\"type\": \"http\", \"url\"}}}) and offer their tools as mcp__NAME__TOOL; repeatable; never read from the workspace by itself")
}

// mcpView routes the MCP client's events (from its goroutines) to the live
// run once it exists; before that (while the servers start) they go to the
// log.
type mcpView struct {
	a *app
	// red is the run's redactor: the API key, and once withMCP has read
	// the configurations, every secret they hold (mcp.ServerConfig's
	// SecretValues). The run redacts everything it prints or writes with
	// it.
	red *redact.Redactor
	lr  atomic.Pointer[liveRun]
}

func (v *mcpView) redact(s string) string { return v.red.Redact(s) }

// mcpConfigs are the servers of every --mcp-config file.
type mcpConfigs []mcp.ServerConfig

// loadMCP reads every --mcp-config file (before the tools are made: the
// variables the files expand into secrets are withheld from the shell,
// secretVars). A file that does not parse is a usage error (exit 2) naming
// it.
func loadMCP(f *liveFlags) (mcpConfigs, error) {
	servers, err := headless.LoadMCP(f.mcpConfigs)
	if err != nil {
		return nil, usageErr("%w", err)
	}
	return servers, nil
}

// secretVars names the variables whose values the files expanded into
// secrets: they go to the servers the files say, and to no other process.
func (m mcpConfigs) secretVars() []string { return mcp.SecretVars(m) }

// withMCP starts servers (loadMCP's) and returns box and them as one set
// of tools. Nothing starts without --mcp-config. Every secret the
// configurations hold is added to view's redactor before any server
// starts. A server that does not start is a usage error (exit 2) naming
// the file and the server; servers already started are stopped first.
func (a *app) withMCP(f *liveFlags, servers mcpConfigs, box toolBox, view *mcpView) (toolBox, error) {
	if len(servers) == 0 {
		return box, nil
	}
	for i := range servers {
		view.red = view.red.With(servers[i].SecretValues()...)
	}
	client, err := mcp.Start(context.Background(), mcp.Options{
		Servers: servers,
		PassEnv: f.toolEnv,
		// As for the shell: a stopping server has half the grace before the
		// kill; a cancelled call that the server does not acknowledge
		// within the grace (when the kernel abandons it) gets its server
		// killed, to be restarted on its next use.
		KillGrace:   f.limits.Grace / 2,
		PingTimeout: f.limits.Grace,
		Observer:    view.show,
	})
	if err != nil {
		return nil, usageErr("--mcp-config: %s", termtext.Text(view.redact(err.Error())))
	}
	set, err := toolset.New(box, client)
	if err != nil {
		client.Close()
		return nil, usageErr("--mcp-config: %v", err)
	}
	return set, nil
}

func newMCPView(a *app, red *redact.Redactor) *mcpView {
	return &mcpView{a: a, red: red}
}

// show renders one MCP event: progress and server ends to the run (the
// console, or a protocol line with --json); a server's stderr, the lines
// of its stdout that are not JSON-RPC, and everything before the run
// exists, in the debug log.
func (v *mcpView) show(e mcp.Event) {
	lr := v.lr.Load()
	if log := v.a.logger; log != nil {
		log.Debug("mcp", "server", e.Server, "event", string(e.Kind), "tool", termtext.Line(e.Tool), "op", e.Op, "line", termtext.Line(v.redact(e.Message)), "detail", termtext.Line(v.redact(e.Detail)))
	}
	if e.Kind == mcp.EventStderr || e.Kind == mcp.EventStdoutNoise || lr == nil {
		if lr == nil && e.Kind == mcp.EventStarted {
			fmt.Fprintf(v.a.err, "escapement: MCP server %s: %s\n", termtext.Line(e.Server), termtext.Line(v.redact(e.Detail)))
		}
		return
	}
	var progress *float64
	if e.Kind == mcp.EventProgress {
		progress = &e.Progress
	}
	lr.emit(protocol.Event{Type: protocol.TypeMCP, MCPEvent: string(e.Kind), Server: e.Server, Agent: e.Path, Tool: e.Tool, Op: uint64(e.Op),
		Progress: progress, Total: e.Total, Message: e.Message, Detail: e.Detail, RequestID: e.RequestID})
}
