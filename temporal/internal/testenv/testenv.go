// Package testenv starts what the Temporal module's end-to-end tests run
// against: a real Temporal server inside the test process
// (go.temporal.io/server/temporaltest: SQLite in memory, loopback), and
// escapement workers — in the test process, or in a child process (the
// test binary run again) that a test can kill outright, as a machine dies.
//
// A worker's model is the OpenAI adapter pointed at a loopback
// OpenAI-protocol server (internal/fakeopenai) the test scripts; its tools
// are the workspace tools with the shell, and two of the test's own: bump,
// which appends a line to a counter file and then runs until it is
// cancelled (not idempotent), and noop, which answers at once.
package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/server/temporaltest"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/adapters/toolset"
	"github.com/escapement/escapement/temporal/host"
)

// Server starts a Temporal server for t, stopped when t ends.
func Server(t *testing.T) *temporaltest.TestServer {
	t.Helper()
	return temporaltest.NewServer(temporaltest.WithT(t), temporaltest.WithBaseClientOptions(client.Options{Logger: QuietLogger()}))
}

// QuietLogger is the SDK's logger in tests: errors only, on stderr (a
// test that stops a worker or the server makes the SDK warn).
func QuietLogger() tlog.Logger {
	return tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// WorkerConfig configures a test worker; it travels to a child process in
// its environment.
type WorkerConfig struct {
	HostPort  string `json:"host_port"`
	Namespace string `json:"namespace"`
	TaskQueue string `json:"task_queue"`
	// BaseURL is the fake model server's.
	BaseURL string `json:"base_url"`
	// Workspace is the tools' directory; Counter the bump tool's file.
	Workspace string `json:"workspace"`
	Counter   string `json:"counter"`
	// Role limits the worker to workflows (RoleWorkflows) or to
	// activities (RoleActivities); both when empty.
	Role string `json:"role,omitempty"`
}

// Worker roles.
const (
	RoleWorkflows  = "workflows"
	RoleActivities = "activities"
)

// envVar carries a child worker's WorkerConfig (as JSON).
const envVar = "ESCAPEMENT_TEMPORAL_TEST_WORKER"

// Worker is a running test worker.
type Worker struct {
	w    worker.Worker
	c    client.Client
	once sync.Once
}

// Stop stops the worker (gracefully: what it runs is told through the
// worker's stop channel) and closes its client. Later calls do nothing.
func (w *Worker) Stop() {
	w.once.Do(func() {
		w.w.Stop()
		w.c.Close()
	})
}

// StartWorker starts a worker in this process, stopped when t ends. A
// panic in the workflow's code (which the SDK reports, and the service
// retries) fails t.
func StartWorker(t *testing.T, cfg WorkerConfig) *Worker {
	t.Helper()
	w, err := startWorker(cfg, panicLogger{t: t, Logger: QuietLogger()}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// panicLogger fails its test on the SDK's report of a workflow panic.
type panicLogger struct {
	tlog.Logger
	t *testing.T
}

// Error fails the test when the panic's stack runs through this
// project's code (a bug in the workflow or the kernel). The SDK also
// reports, as a workflow panic, a cached workflow whose state no longer
// matches the history it is handed (seen here only on a saturated machine,
// around a workflow task that timed out on its sticky queue); it then
// replays the workflow from its history and goes on, and replayAll in the
// tests checks that history replays cleanly.
func (l panicLogger) Error(msg string, keyvals ...any) {
	if msg == "Workflow panic" && strings.Contains(fmt.Sprint(keyvals...), "github.com/escapement/escapement") {
		l.t.Errorf("workflow panic: %v", keyvals)
	}
	l.Logger.Error(msg, keyvals...)
}

func startWorker(cfg WorkerConfig, logger tlog.Logger, sticky time.Duration) (*Worker, error) {
	c, err := client.Dial(client.Options{HostPort: cfg.HostPort, Namespace: cfg.Namespace, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("testenv: dial: %w", err)
	}
	acts, err := activities(cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	w := worker.New(c, cfg.TaskQueue, host.WorkerOptions(worker.Options{
		StickyScheduleToStartTimeout: sticky,
		DisableWorkflowWorker:        cfg.Role == RoleActivities,
		LocalActivityWorkerOnly:      cfg.Role == RoleWorkflows,
	}))
	if cfg.Role != RoleActivities {
		host.RegisterWorkflow(w)
	}
	if cfg.Role != RoleWorkflows {
		host.RegisterActivities(w, acts)
	}
	if err := w.Start(); err != nil {
		c.Close()
		return nil, fmt.Errorf("testenv: worker: %w", err)
	}
	return &Worker{w: w, c: c}, nil
}

// activities are the test worker's model and tools.
func activities(cfg WorkerConfig) (*host.Activities, error) {
	box, err := tools.New(tools.Config{Workspace: cfg.Workspace, AllowShell: true, KillGrace: 500 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	set, err := toolset.New(box)
	if err != nil {
		return nil, err
	}
	err = set.AddFunc(ports.ToolSpec{Name: "bump", Description: "count a run, then work until cancelled"},
		func(ctx context.Context, _ json.RawMessage) (string, error) {
			f, err := os.OpenFile(cfg.Counter, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return "", err
			}
			_, err = f.WriteString("ran\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return "", err
			}
			<-ctx.Done()
			return "", ctx.Err()
		})
	if err != nil {
		return nil, err
	}
	err = set.AddFunc(ports.ToolSpec{Name: "noop", Description: "answer at once"},
		func(context.Context, json.RawMessage) (string, error) { return "ok", nil })
	if err != nil {
		return nil, err
	}
	m, err := openai.New(openai.Config{BaseURL: cfg.BaseURL, Model: "test-model", Tools: set.Specs()})
	if err != nil {
		return nil, err
	}
	return &host.Activities{Model: m, Tools: set, Specs: set.Specs(), Idempotent: box.Idempotent()}, nil
}

// Process is a worker in a child process.
type Process struct {
	cmd  *exec.Cmd
	once sync.Once
}

// StartProcess runs a worker in a child process: this test binary again,
// whose TestMain calls MaybeServe. It is killed when t ends.
func StartProcess(t *testing.T, cfg WorkerConfig) *Process {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envVar+"="+string(raw))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{cmd: cmd}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("child worker's output:\n%s", out.String())
		}
	})
	return p
}

// Kill kills the child worker outright (SIGKILL, as a machine dies) and
// waits for it.
func (p *Process) Kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	})
}

// MaybeServe is for TestMain: in a child process StartProcess started, it
// runs the worker until the process is killed and never returns.
func MaybeServe() {
	raw := os.Getenv(envVar)
	if raw == "" {
		return
	}
	var cfg WorkerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(2)
	}
	// A workflow this worker cached is handed to another worker a second
	// after this one is killed (the default is 5s).
	if _, err := startWorker(cfg, QuietLogger(), time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "testenv: worker started")
	select {}
}
