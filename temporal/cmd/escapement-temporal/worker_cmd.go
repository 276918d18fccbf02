package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/escapement/escapement/adapters/mcp"
	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/otel"
	"github.com/escapement/escapement/adapters/ports"
	toolproc "github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/adapters/toolset"
	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/host"
	"github.com/escapement/escapement/temporal/protocol"
)

// defaultModel is used when neither --model nor $OPENAI_MODEL names one
// (the escapement CLI's default).
const defaultModel = "gpt-4o-mini"

// connFlags say where the Temporal service is; every command has them.
type connFlags struct {
	hostPort  string
	namespace string
	taskQueue string
}

func (c *connFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&c.hostPort, "temporal", "", "the Temporal frontend's `HOST:PORT` (required)")
	fl.StringVar(&c.namespace, "namespace", "default", "the Temporal namespace")
	fl.StringVar(&c.taskQueue, "task-queue", protocol.DefaultTaskQueue, "the task queue workers poll and trees run on")
}

// dial connects to the service, the SDK logging warnings and errors to
// stderr.
func (c *connFlags) dial(a *app) (client.Client, error) {
	if c.hostPort == "" {
		return nil, usageErr("--temporal HOST:PORT is required")
	}
	logger := tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(a.err, &slog.HandlerOptions{Level: slog.LevelWarn})))
	cl, err := client.Dial(client.Options{HostPort: c.hostPort, Namespace: c.namespace, Logger: logger})
	if err != nil {
		return nil, &exitError{Code: exitCheckFailed, Err: fmt.Errorf("--temporal %s: %w", c.hostPort, err)}
	}
	return cl, nil
}

// workerFlags are the worker's: where the model is and which tools run,
// with the escapement CLI's names. The API key comes from
// $OPENAI_API_KEY and stays in the worker.
type workerFlags struct {
	conn       connFlags
	workspace  string
	allowShell bool
	toolEnv    []string
	mcpConfigs []string
	model      string
	baseURL    string
	killGrace  time.Duration
}

func newWorkerCmd(a *app) *cobra.Command {
	f := &workerFlags{}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run trees' workflows, model requests and tool calls",
		Long: `Run a worker: it polls the task queue for escapement's workflow (one per
agent tree) and its activities — model requests against an OpenAI-compatible
endpoint and tool calls in the workspace. Every worker of a task queue must
be configured alike (the same model, tools and workspace contents): a tree's
requests and calls run on whichever worker picks them up.

The endpoint comes from --base-url or $OPENAI_BASE_URL, the key from
$OPENAI_API_KEY (never a flag, never sent to the service). Ctrl-C or
SIGTERM stops the worker: the requests and tool calls it runs are cancelled
and reported lost, and the trees they belong to recover them on another
worker (a request restarts, an idempotent tool runs again, any other call is
answered tool_lost). It exits 130.

When OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
set, the worker exports the trees' OpenTelemetry spans over OTLP with the
standard OTEL_* configuration, as a live run does: every activity worker of
a task queue should be configured alike.`,
		Example: `  escapement-temporal worker --temporal localhost:7233 --model llama3.1 --base-url http://localhost:11434/v1 --workspace ./repo`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWorker(cmd.Context(), a, f)
		},
	}
	f.conn.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.workspace, "workspace", ".", "directory the tools work in; paths that leave it are refused")
	fl.BoolVar(&f.allowShell, "allow-shell", false, "enable the shell tool (bash -c in the workspace, killed with its process group on cancel)")
	fl.StringArrayVar(&f.toolEnv, "tool-env", nil, "pass the environment variable `NAME` to tools although its name looks secret; repeatable; never OPENAI_API_KEY")
	fl.StringArrayVar(&f.mcpConfigs, "mcp-config", nil, "start the MCP servers of `FILE` (the .mcp.json shape) and offer their tools as mcp__NAME__TOOL; repeatable")
	fl.StringVar(&f.model, "model", "", "model name (default $OPENAI_MODEL, else "+defaultModel+")")
	fl.StringVar(&f.baseURL, "base-url", "", "OpenAI-compatible API root (default $OPENAI_BASE_URL, else "+openai.DefaultBaseURL+")")
	fl.DurationVar(&f.killGrace, "kill-grace", kernel.DefaultLimits().Grace/2, "how long a cancelled shell's process group has between SIGINT and SIGKILL; keep it under the trees' --grace")
	return cmd
}

func runWorker(ctx context.Context, a *app, f *workerFlags) error {
	if err := (toolproc.EnvPolicy{Pass: f.toolEnv}).Validate(); err != nil {
		return usageErr("--tool-env: %v", err)
	}
	key := os.Getenv("OPENAI_API_KEY")
	box, err := tools.New(tools.Config{Workspace: f.workspace, AllowShell: f.allowShell, PassEnv: f.toolEnv, KillGrace: f.killGrace})
	if err != nil {
		return usageErr("--workspace: %v", err)
	}
	var run interface {
		ports.Tools
		Specs() []ports.ToolSpec
		Idempotent() []string
		Close() error
	} = box
	if len(f.mcpConfigs) > 0 {
		set, err := startMCP(a, f, box, key)
		if err != nil {
			box.Close()
			return err
		}
		run = set
	}
	defer run.Close()
	model := firstNonEmpty(f.model, os.Getenv("OPENAI_MODEL"), defaultModel)
	baseURL := firstNonEmpty(f.baseURL, os.Getenv("OPENAI_BASE_URL"), openai.DefaultBaseURL)
	m, err := openai.New(openai.Config{
		APIKey:  key,
		BaseURL: baseURL,
		Model:   model,
		Tools:   run.Specs(),
	})
	if err != nil {
		return usageErr("--base-url/--model: %v", err)
	}
	acts := &host.Activities{Model: m, Tools: run, Specs: run.Specs(), Idempotent: run.Idempotent()}
	exp, err := startSpans(a, key, model, baseURL)
	if err != nil {
		return err
	}
	if exp != nil {
		defer stopSpans(a, exp)
		acts.Spans = exp
	}
	cl, err := f.conn.dial(a)
	if err != nil {
		return err
	}
	defer cl.Close()
	w := worker.New(cl, f.conn.taskQueue, host.WorkerOptions(worker.Options{}))
	host.Register(w, acts)
	var names []string
	for _, s := range run.Specs() {
		names = append(names, s.Name)
	}
	fmt.Fprintf(a.err, "escapement: worker on task queue %s at %s (model %s; tools %s)\n", f.conn.taskQueue, f.conn.hostPort, model, strings.Join(names, ", "))
	sigs, stop := a.signals()
	defer stop()
	interrupted := make(chan any)
	signalled := false
	done := make(chan struct{})
	defer close(done)
	go func() { // owned: ends with the command (done) or on the first signal
		select {
		case <-sigs:
			signalled = true
			close(interrupted)
		case <-ctx.Done():
			close(interrupted)
		case <-done:
		}
	}()
	if err := w.Run(interrupted); err != nil {
		return &exitError{Code: exitCheckFailed, Err: fmt.Errorf("worker: %w", err)}
	}
	if signalled {
		return &exitError{Code: exitInterrupted}
	}
	return nil
}

// startSpans starts the OpenTelemetry export the standard OTEL_*
// variables ask for (nil: none, nothing started): the spans of the trees
// the worker's activities serve (docs/temporal.md, "OpenTelemetry"), with
// the API key redacted from every string they carry.
func startSpans(a *app, key, model, baseURL string) (*otel.Exporter, error) {
	exp, err := otel.NewFromEnv(context.Background(), os.Getenv, otel.Config{
		Model: model, BaseURL: baseURL, Redact: redact.New(key).Redact,
		OnError: func(err error) { fmt.Fprintf(a.err, "escapement: %v\n", err) },
	})
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return exp, nil
}

// stopSpans sends what the export still holds, once the worker has
// stopped: every batch its activities took.
func stopSpans(a *app, exp *otel.Exporter) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := exp.Shutdown(ctx); err != nil {
		fmt.Fprintf(a.err, "escapement: spans: %v\n", err)
	}
}

// startMCP starts the servers of every --mcp-config file and returns the
// workspace tools and theirs as one set.
func startMCP(a *app, f *workerFlags, box *tools.Box, key string) (*toolset.Set, error) {
	servers, err := headless.LoadMCP(f.mcpConfigs)
	if err != nil {
		return nil, usageErr("%w", err)
	}
	red := redact.New(key)
	c, err := mcp.Start(context.Background(), mcp.Options{
		Servers:   servers,
		PassEnv:   f.toolEnv,
		KillGrace: f.killGrace,
		Observer: func(e mcp.Event) {
			if e.Kind == mcp.EventStarted || e.Kind == mcp.EventStopped {
				fmt.Fprintln(a.err, red.Redact(fmt.Sprintf("escapement: MCP server %s %s: %s", e.Server, e.Kind, e.Detail)))
			}
		},
	})
	if err != nil {
		return nil, usageErr("--mcp-config: %s", red.Redact(err.Error()))
	}
	set, err := toolset.New(box, c)
	if err != nil {
		c.Close()
		return nil, usageErr("--mcp-config: %v", err)
	}
	return set, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}
