package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/kernel"
	"golang.org/x/time/rate"
)

// ProtocolVersion is the MCP protocol version the client asks for: the
// version every current server speaks, with ping (how an unresponsive
// server is found) and notifications/cancelled. A server that answers
// with an older supported version gets that one.
const ProtocolVersion = "2025-11-25"

// Defaults of Options.
const (
	DefaultKillGrace    = time.Second
	DefaultStartTimeout = 30 * time.Second
	DefaultPingInterval = 30 * time.Second
	DefaultPingTimeout  = 5 * time.Second
	DefaultOutputLimit  = 64 << 10
)

// Options configures Start.
type Options struct {
	// Servers are the servers to start (LoadConfig's, possibly of several
	// files). Their names must differ.
	Servers []ServerConfig
	// PassEnv names variables a stdio server gets although their names look
	// secret (the CLI's --tool-env), beside those its config's "env" sets;
	// see proc.EnvPolicy. OPENAI_API_KEY is refused.
	PassEnv []string
	// KillGrace is how long a stdio server has to exit after its stdin is
	// closed when the client closes, before it and every process it started
	// are killed; DefaultKillGrace when 0.
	KillGrace time.Duration
	// StartTimeout bounds starting one server: the process (or the HTTP
	// connection), the initialize handshake and listing its tools;
	// DefaultStartTimeout when 0.
	StartTimeout time.Duration
	// PingInterval is how often each live server is pinged; one that does
	// not answer within PingTimeout is killed and restarted on its next use.
	// DefaultPingInterval when 0; no pings when negative.
	PingInterval time.Duration
	// PingTimeout is how long a ping may go unanswered, and how long a
	// cancelled call waits for the server to acknowledge its cancel (its
	// answer to a ping sent after notifications/cancelled) before the
	// server is declared unresponsive and killed. The CLI uses the kernel's
	// grace, so a server that is abandoned is also killed.
	// DefaultPingTimeout when 0.
	PingTimeout time.Duration
	// OutputLimit caps the bytes of one result; DefaultOutputLimit when 0.
	OutputLimit int
	// Observer, when set, receives progress notifications and server
	// lifecycle events. It is called from the client's goroutines, possibly
	// several at once, and must not block.
	Observer func(Event)
	// HTTPClient carries HTTP servers' requests; http.DefaultClient's
	// transport when nil.
	HTTPClient *http.Client
}

// EventKind says what an Event reports.
type EventKind string

// Event kinds.
const (
	// EventProgress: a server's notifications/progress for a running call
	// (Progress, Total, Message).
	EventProgress EventKind = "progress"
	// EventCancelSent: notifications/cancelled for a call went out.
	EventCancelSent EventKind = "cancel_sent"
	// EventLateResult: a server answered a call after its cancel went out;
	// the answer was dropped.
	EventLateResult EventKind = "late_result"
	// EventStarted: a server started (Detail: how many tools; on a restart,
	// why the previous one ended).
	EventStarted EventKind = "server_started"
	// EventStopped: a server ended while in use — it crashed, closed its
	// connection, or was killed for not answering (Detail says which).
	EventStopped EventKind = "server_stopped"
	// EventToolsChanged: a server said its tool list changed
	// (notifications/tools/list_changed). The tools offered stay those
	// listed at start (see the package documentation).
	EventToolsChanged EventKind = "tools_changed"
	// EventStderr: a line a stdio server wrote to its stderr (Message).
	EventStderr EventKind = "stderr"
	// EventStdoutNoise: a line a stdio server wrote to its stdout that is
	// not a JSON-RPC message (a banner, a log line), skipped (Message: the
	// line, cut to 200 bytes); also an HTTP server's event that was
	// dropped (not a message, or over the bound without a request to
	// answer).
	EventStdoutNoise EventKind = "stdout_noise"
)

// Event is something the CLI shows beside the kernel's lifecycle events.
// Call fields (Op, Agent, Path, Tool) are set for call events.
type Event struct {
	Kind   EventKind      `json:"kind"`
	Server string         `json:"server"`
	Tool   string         `json:"name,omitempty"` // the model-facing name
	Op     kernel.OpID    `json:"op,omitempty"`
	Agent  kernel.AgentID `json:"agent,omitempty"`
	Path   string         `json:"path,omitempty"`
	// Progress and Total are a progress notification's numbers (Total 0 when
	// the server does not know it).
	Progress float64 `json:"progress,omitempty"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
	Detail   string  `json:"detail,omitempty"`
	// RequestID is the call's JSON-RPC request id (as JSON) on
	// EventCancelSent and EventLateResult.
	RequestID string `json:"request_id,omitempty"`
}

// Client runs the MCP servers of a configuration and offers their tools to
// the model. It implements ports.Tools; Specs lists the tools. It is safe for
// concurrent use.
type Client struct {
	opts    Options
	servers []*server
	tools   map[string]*remoteTool // by model-facing name
	specs   []ports.ToolSpec
	calls   callTable
	tokens  atomic.Uint64
	// secrets removes every server's SecretValues from the results,
	// errors and events the client produces.
	secrets *redact.Redactor
	// secretVars are every server's SecretVars: no stdio server inherits
	// them.
	secretVars []string

	// life is the servers' lifetime: proc.Start's context for every stdio
	// server process, cancelled by Close and KillAll.
	life     context.Context
	stopLife context.CancelFunc

	closeOnce sync.Once
}

// remoteTool is one server tool as the model sees it.
type remoteTool struct {
	name   string // model-facing
	remote string // the server's own name for it
	server *server
	// readOnly: the server annotates the tool readOnlyHint: true (it
	// says the tool changes nothing; a hint, never verified).
	readOnly bool
	// idempotent: its annotations say a second call changes nothing more
	// (Idempotent).
	idempotent bool
}

// Start starts every server (in parallel), initializes each, and lists its
// tools. Any failure — a server that does not start, a handshake or tools
// listing that fails or exceeds StartTimeout, two servers of one name, two
// tools that map to one name — stops the servers already started and is
// returned naming the configuration file and the server, with the
// configuration's secrets removed from its text (ServerConfig.SecretValues).
func Start(ctx context.Context, opts Options) (*Client, error) {
	secrets := secretsOf(opts.Servers)
	c, err := start(ctx, opts, secrets)
	return c, redactError(secrets, err)
}

func start(ctx context.Context, opts Options, secrets *redact.Redactor) (*Client, error) {
	if err := (proc.EnvPolicy{Pass: opts.PassEnv}).Validate(); err != nil {
		return nil, fmt.Errorf("MCP server environment: %w", err)
	}
	for i := range opts.Servers {
		s := &opts.Servers[i]
		for _, prev := range opts.Servers[:i] {
			if prev.Name == s.Name {
				return nil, fmt.Errorf("two MCP servers are named %q: in %s and in %s; server names must differ", s.Name, prev.File, s.File)
			}
		}
		if s.Type != TypeStdio && s.Type != TypeHTTP {
			return nil, fmt.Errorf("%s: unknown type %q (set Type to TypeStdio, %q, or TypeHTTP, %q)", s.where(), s.Type, TypeStdio, TypeHTTP)
		}
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.PingTimeout <= 0 {
		opts.PingTimeout = DefaultPingTimeout
	}
	if opts.OutputLimit <= 0 {
		opts.OutputLimit = DefaultOutputLimit
	}
	c := &Client{opts: opts, tools: map[string]*remoteTool{}, calls: callTable{m: map[string]*pending{}}, secrets: secrets, secretVars: SecretVars(opts.Servers)}
	c.life, c.stopLife = context.WithCancel(context.WithoutCancel(ctx))
	for i := range opts.Servers {
		c.servers = append(c.servers, newServer(c, opts.Servers[i]))
	}

	// Start in parallel: npx-launched servers take seconds each.
	lists := make([][]offer, len(c.servers))
	errs := make([]error, len(c.servers))
	var wg sync.WaitGroup
	for i, s := range c.servers {
		wg.Go(func() { lists[i], errs[i] = s.startFirst(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	claims := map[string]claim{}
	for i, s := range c.servers {
		for _, o := range lists[i] {
			if prev, ok := claims[o.name]; ok {
				c.Close()
				return nil, &CollisionError{Name: o.name, First: prev.String(), Then: claim{&s.cfg, o.tool.Name}.String()}
			}
			claims[o.name] = claim{&s.cfg, o.tool.Name}
			c.tools[o.name] = &remoteTool{name: o.name, remote: o.tool.Name, server: s,
				readOnly: o.tool.Annotations != nil && o.tool.Annotations.ReadOnlyHint, idempotent: idempotent(o.tool)}
			c.specs = append(c.specs, c.redactSpec(o.spec))
		}
	}
	return c, nil
}

// Specs lists every server tool for the model: servers in configuration
// order, each server's tools in the order it listed them.
func (c *Client) Specs() []ports.ToolSpec { return slices.Clone(c.specs) }

// ReadOnly names the tools (model-facing names, in Specs' order) whose
// server annotates them readOnlyHint: true. A host that asks a person
// before every call that can change something (the CLI's --ask writes,
// docs/live.md) asks for the others.
func (c *Client) ReadOnly() []string {
	var out []string
	for _, s := range c.specs {
		if t := c.tools[s.Name]; t != nil && t.readOnly {
			out = append(out, s.Name)
		}
	}
	return out
}

// Idempotent names the server tools whose annotations say a second call
// has no further effect (idempotentHint or readOnlyHint), in Specs' order:
// a call of one in flight when the process crashed runs again after the
// recovery, as read_file's does; any other tool's call is answered
// tool_lost (kernel.Config.Idempotent, docs/durable.md). The annotations
// are the server's own hints, trusted as far as the configuration trusts
// the server.
func (c *Client) Idempotent() []string {
	var out []string
	for _, sp := range c.specs {
		if t := c.tools[sp.Name]; t != nil && t.idempotent {
			out = append(out, sp.Name)
		}
	}
	return out
}

// Run calls a server tool. See the package documentation for what a cancel,
// a crash or an unresponsive server does to the call. The result holds
// none of the configuration's secrets (ServerConfig.SecretValues): a
// server that echoes its token, or an error that quotes a URL with a key
// in it, reaches the model redacted.
func (c *Client) Run(ctx context.Context, call ports.Call) ports.ToolResult {
	r := c.run(ctx, call)
	r.Content = c.secrets.Redact(r.Content)
	return r
}

// redactSpec removes the secrets from a tool's description and schema (a
// server could put its token there, and specs go to the model). A schema
// that redaction would make invalid JSON is offered as the empty object
// schema.
func (c *Client) redactSpec(spec ports.ToolSpec) ports.ToolSpec {
	spec.Description = c.secrets.Redact(spec.Description)
	if params := c.secrets.Redact(string(spec.Parameters)); params != string(spec.Parameters) {
		spec.Parameters = json.RawMessage(params)
		if !json.Valid(spec.Parameters) {
			spec.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
	}
	return spec
}

func (c *Client) run(ctx context.Context, call ports.Call) ports.ToolResult {
	t, ok := c.tools[call.Name]
	if !ok {
		names := make([]string, 0, len(c.specs))
		for _, s := range c.specs {
			names = append(names, s.Name)
		}
		return toolError(call.Name, fmt.Sprintf("unknown tool %q (MCP tools: %s)", call.Name, strings.Join(names, ", ")))
	}
	args := json.RawMessage(strings.TrimSpace(call.Arguments))
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return toolError(call.Name, "the arguments must be a JSON object")
	}
	return t.server.call(ctx, t, call, args)
}

// Close stops every server: a stdio server's stdin is closed, and after
// KillGrace it and every process it started are killed; an HTTP session is
// ended. It returns once all are gone and every goroutine of the client
// has ended, except those of calls the kernel abandoned, which end as soon
// as their server is gone. Close is idempotent; it returns nil (it is an
// io.Closer so a toolset.Set closes it).
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, s := range c.servers {
			wg.Go(s.close)
		}
		wg.Wait()
		c.stopLife()
	})
	return nil
}

// KillAll kills every stdio server and everything it started at once, and
// cuts every HTTP connection, without waiting: the CLI's hard exit (a second
// Ctrl-C). On Linux each server's process helper finishes the kill even
// after this process has exited.
func (c *Client) KillAll() {
	for _, s := range c.servers {
		s.killNow(errors.New("killed on exit"))
	}
	c.stopLife()
}

// emit hands an event to the observer, without the configuration's
// secrets (a server's stderr line may print its token).
func (c *Client) emit(e Event) {
	if c.opts.Observer != nil {
		e.Message, e.Detail = c.secrets.Redact(e.Message), c.secrets.Redact(e.Detail)
		c.opts.Observer(e)
	}
}

// newToken returns a progress token unique in this client.
func (c *Client) newToken() string {
	return "escapement-" + strconv.FormatUint(c.tokens.Add(1), 10)
}

// callTable holds the running calls by progress token.
type callTable struct {
	mu sync.Mutex
	m  map[string]*pending
}

func (t *callTable) put(p *pending) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[p.token] = p
}

func (t *callTable) get(token string) *pending {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[token]
}

func (t *callTable) drop(p *pending) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, p.token)
}

// pending is one running call.
type pending struct {
	token string
	tool  *remoteTool
	call  ports.Call

	// Set by the tap: the request's id, and whether its write began.
	idMu    sync.Mutex
	id      string
	writing bool

	sent           chan struct{} // closed once the request was written
	sentOnce       sync.Once
	cancelSent     chan struct{} // closed once notifications/cancelled for it was written
	cancelSentOnce sync.Once
	cancelled      atomic.Bool // the kernel cancelled it: progress is no longer shown
	progressLimit  *rate.Limiter
}

func (p *pending) event(kind EventKind) Event {
	e := Event{Kind: kind, Server: p.tool.server.cfg.Name, Tool: p.tool.name, Op: p.call.Op, Agent: p.call.Agent, Path: p.call.Path}
	if kind == EventCancelSent || kind == EventLateResult {
		e.RequestID = p.requestID()
	}
	return e
}

// toolError is an error result for the model.
func toolError(name, msg string) ports.ToolResult {
	return ports.ToolResult{Status: kernel.ToolError, Content: "error: " + name + ": " + msg}
}
