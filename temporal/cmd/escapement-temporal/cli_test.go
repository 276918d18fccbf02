package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/internal/otlptest"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/internal/testenv"
	"github.com/escapement/escapement/temporal/protocol"
	"github.com/escapement/escapement/temporal/remote"
)

func TestMain(m *testing.M) {
	testenv.MaybeServe()
	os.Exit(m.Run())
}

// cliEnv is a Temporal server, a worker and the scripted model the CLI's
// commands run against.
type cliEnv struct {
	t    *testing.T
	cfg  testenv.WorkerConfig
	fake *fakeopenai.Server
}

func newCLIEnv(t *testing.T, h fakeopenai.Handler) *cliEnv {
	t.Helper()
	ts := testenv.Server(t)
	fake := fakeopenai.New(h)
	t.Cleanup(fake.Close)
	dir := t.TempDir()
	cfg := testenv.WorkerConfig{
		HostPort: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace(), TaskQueue: "cli-test",
		BaseURL: fake.BaseURL(), Workspace: dir, Counter: filepath.Join(dir, "counter"),
	}
	testenv.StartWorker(t, cfg)
	return &cliEnv{t: t, cfg: cfg, fake: fake}
}

// syncBuffer is a buffer the command's goroutines write and the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// result is one command's run.
type result struct {
	code     int
	out, err string
}

// cli runs a command in this process with the connection flags added, stdin
// from in, and signals from sigs.
func (e *cliEnv) cli(in string, sigs chan os.Signal, args ...string) result {
	e.t.Helper()
	var out, errw syncBuffer
	return e.cliTo(&out, &errw, in, sigs, args...)
}

// cliTo is cli writing to out and errw, which the test may read meanwhile.
func (e *cliEnv) cliTo(out, errw *syncBuffer, in string, sigs chan os.Signal, args ...string) result {
	return e.cliFrom(out, errw, strings.NewReader(in), sigs, args...)
}

// cliFrom is cliTo reading stdin from in.
func (e *cliEnv) cliFrom(out, errw *syncBuffer, in io.Reader, sigs chan os.Signal, args ...string) result {
	if sigs == nil {
		sigs = make(chan os.Signal)
	}
	args = append(args[:1:1], append([]string{"--temporal", e.cfg.HostPort, "--namespace", e.cfg.Namespace, "--task-queue", e.cfg.TaskQueue,
		"--heartbeat-timeout", "2s", "--chunk-every", "50ms", "--poll", "20ms"}, args[1:]...)...)
	exited := make(chan int, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := run(ctx, args, streams{in: in, out: out, err: errw},
		func(code int) { exited <- code }, func() (<-chan os.Signal, func()) { return sigs, func() {} })
	return result{code: code, out: out.String(), err: errw.String()}
}

// run streams the answer to stdout and exits 0; the workflow's id is on
// stderr, and a second run with it continues the conversation.
func TestRunAnswersAndContinues(t *testing.T) {
	e := newCLIEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Answer("you said "+req.Body.Last().Content, 3)
	})
	r := e.cli("", nil, "run", "hello")
	if r.code != 0 || r.out != "you said hello\n" {
		t.Fatalf("run: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	id := workflowID(t, r.err)
	r = e.cli("", nil, "run", "--workflow", id, "again")
	if r.code != 0 || r.out != "you said again\n" || !strings.Contains(r.err, "attached to workflow "+id) {
		t.Fatalf("second run: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	reqs := e.fake.Requests()
	if n := len(reqs[1].Body.Messages); n != 3 {
		t.Fatalf("the second turn sent %d messages, want the first turn's two and its own", n)
	}
}

// workflowID reads the id run printed on stderr.
func workflowID(t *testing.T, stderr string) string {
	t.Helper()
	const prefix = "escapement: workflow "
	for _, line := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return strings.Fields(rest)[0]
		}
	}
	t.Fatalf("no workflow id on stderr: %q", stderr)
	return ""
}

// Ctrl-C cancels the running turn through the workflow and run exits 130
// once the turn has ended (reason user_cancel); the model's stream is
// closed.
func TestRunCtrlCCancelsTheTurn(t *testing.T) {
	streaming := make(chan struct{})
	e := newCLIEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Text("partial")
		close(streaming)
		w.Stall(ctx)
	})
	sigs := make(chan os.Signal, 1)
	go func() {
		<-streaming
		sigs <- os.Interrupt
	}()
	r := e.cli("", sigs, "run", "--json", "talk")
	if r.code != exitInterrupted {
		t.Fatalf("run: exit %d, want 130; stderr %q", r.code, r.err)
	}
	if !strings.Contains(r.out, `"type":"turn_ended"`) || !strings.Contains(r.out, `"reason":"user_cancel"`) {
		t.Fatalf("the JSON lines do not end the turn with user_cancel:\n%s", r.out)
	}
	if err := e.fake.WaitFor(context.Background(), func(rs []fakeopenai.Request) bool { return !rs[0].Closed.IsZero() }); err != nil {
		t.Fatal(err)
	}
}

// A turn that fails exits 1 and says why on stderr: the server's status
// and message.
func TestRunFailedTurnExits1(t *testing.T) {
	e := newCLIEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(400, `{"error":{"message":"model does not exist","type":"invalid_request_error"}}`)
	})
	r := e.cli("", nil, "run", "hello")
	if r.code != exitCheckFailed || !strings.Contains(r.err, kernel.UIFailed) || !strings.Contains(r.err, "model does not exist") {
		t.Fatalf("run: exit %d, stderr %q; want 1 with the server's message", r.code, r.err)
	}
}

// The flags that belong to the worker, or have no counterpart, are refused
// with exit 2 and say where they belong.
func TestRunRefusesWorkerFlags(t *testing.T) {
	var out, errw syncBuffer
	for _, tc := range []struct{ flag, want string }{
		{"--model=x", "--model is the worker's flag"},
		{"--allow-shell", "--allow-shell is the worker's flag"},
		{"--session=f", "--session has no counterpart"},
	} {
		code := run(context.Background(), []string{"run", "--temporal", "localhost:1", tc.flag, "hi"}, streams{in: strings.NewReader(""), out: &out, err: &errw},
			func(int) {}, func() (<-chan os.Signal, func()) { return nil, func() {} })
		if code != exitUsage || !strings.Contains(errw.String(), tc.want) {
			t.Fatalf("%s: exit %d, stderr %q", tc.flag, code, errw.String())
		}
	}
}

// chat with lines on stdin (not a terminal: queued) runs them as turns one
// after the other and exits 0 at the end of input.
func TestChatRunsQueuedLines(t *testing.T) {
	e := newCLIEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Answer("re: "+req.Body.Last().Content, 2)
	})
	r := e.cli("first\nsecond\n", nil, "chat")
	if r.code != 0 || r.out != "re: first\nre: second\n" {
		t.Fatalf("chat: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}

// SIGTERM in chat shuts the tree down: the running turn ends (its line on
// stderr), the workflow ends, chat exits 130.
func TestChatSIGTERMShutsDown(t *testing.T) {
	streaming := make(chan struct{})
	e := newCLIEnv(t, stallAfter("working", streaming))
	sigs := make(chan os.Signal, 1)
	go func() {
		<-streaming
		sigs <- syscall.SIGTERM
	}()
	r := e.cli("go\n", sigs, "chat") // at the end of input chat waits for the turn: the signal ends it
	if r.code != exitInterrupted || !strings.Contains(r.err, kernel.UIShutdown) {
		t.Fatalf("chat: exit %d, stderr %q; want 130 and the shutdown's line", r.code, r.err)
	}
	e.wantShutDown(workflowID(t, r.err))
}

// SIGTERM that chat reads right after it has submitted a line — before
// its next look at the tree, whatever the follower has shown — shuts the
// turn that line started down and shows its end: the submit's answer says
// a turn runs.
func TestChatSIGTERMRightAfterSubmit(t *testing.T) {
	e := newCLIEnv(t, stallAfter("working", make(chan struct{})))
	sigs := make(chan os.Signal, 1)
	var out, errw syncBuffer
	r := e.cliFrom(&out, &errw, &signalAfterLine{line: "go\n", sigs: sigs}, sigs, "chat")
	if r.code != exitInterrupted || !strings.Contains(r.err, kernel.UIShutdown) {
		t.Fatalf("chat: exit %d, stderr %q; want 130 and the shutdown's line", r.code, r.err)
	}
	if n := len(e.fake.Requests()); n != 1 {
		t.Fatalf("the model got %d requests, want the submitted line's 1", n)
	}
	e.wantShutDown(workflowID(t, r.err))
}

// SIGTERM in run shuts the tree down: the turn ends (its line on stderr),
// the workflow ends, run exits 130.
func TestRunSIGTERMShutsDown(t *testing.T) {
	streaming := make(chan struct{})
	e := newCLIEnv(t, stallAfter("working", streaming))
	sigs := make(chan os.Signal, 1)
	go func() {
		<-streaming
		sigs <- syscall.SIGTERM
	}()
	r := e.cli("", sigs, "run", "go")
	if r.code != exitInterrupted || !strings.Contains(r.err, kernel.UIShutdown) {
		t.Fatalf("run: exit %d, stderr %q; want 130 and the shutdown's line", r.code, r.err)
	}
	e.wantShutDown(workflowID(t, r.err))
}

// stallAfter is a model that streams text, closes streaming (once), and
// stalls until its request is cancelled.
func stallAfter(text string, streaming chan struct{}) fakeopenai.Handler {
	var once sync.Once
	return func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Text(text)
		once.Do(func() { close(streaming) })
		w.Stall(ctx)
	}
}

// signalAfterLine is stdin holding one line, then SIGTERM: chat's reader
// reads again only once chat has taken the line, so the signal is sent
// while chat submits it, and the end of input follows.
type signalAfterLine struct {
	line  string
	sigs  chan<- os.Signal
	reads int
}

func (s *signalAfterLine) Read(p []byte) (int, error) {
	s.reads++
	switch s.reads {
	case 1:
		return copy(p, s.line), nil
	case 2:
		s.sigs <- syscall.SIGTERM
	}
	return 0, io.EOF
}

// wantShutDown fails the test unless workflow id has ended with its tree
// shut down.
func (e *cliEnv) wantShutDown(id string) {
	e.t.Helper()
	c, err := client.Dial(client.Options{HostPort: e.cfg.HostPort, Namespace: e.cfg.Namespace})
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res protocol.Result
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &res); err != nil || res.Reason != kernel.ReasonShutdown {
		e.t.Fatalf("workflow %s: %v, %+v; want it ended with its tree shut down", id, err, res)
	}
}

// run --workflow ID without a prompt attaches to a turn another client
// started and follows it to its end: it shows what comes from now on and
// exits with the turn's outcome.
func TestRunAttachesToRunningTurn(t *testing.T) {
	release := make(chan struct{})
	e := newCLIEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		for {
			w.Text("tick ")
			select {
			case <-release:
				w.Answer("after", 5)
				return
			case <-ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	})
	c, err := client.Dial(client.Options{HostPort: e.cfg.HostPort, Namespace: e.cfg.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, _, err := remote.Start(ctx, c, remote.StartOptions{TaskQueue: e.cfg.TaskQueue, Tree: protocol.Tree{Limits: kernel.DefaultLimits()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, "go"); err != nil {
		t.Fatal(err)
	}
	var out, errw syncBuffer
	done := make(chan result, 1)
	go func() { done <- e.cliTo(&out, &errw, "", nil, "run", "--workflow", s.ID()) }()
	// The turn goes on only once the attached client shows it running.
	for !strings.Contains(out.String(), "tick") {
		select {
		case r := <-done:
			t.Fatalf("the attached run ended before the turn: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	close(release)
	r := <-done
	if r.code != 0 || !strings.HasSuffix(r.out, "after\n") || !strings.Contains(r.err, "attached to workflow "+s.ID()) {
		t.Fatalf("attached run: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}

// The worker command serves trees with the model and tools its flags
// name, exports their spans where OTEL_EXPORTER_OTLP_ENDPOINT says
// (sending what it holds when it stops), and stops on Ctrl-C (exit 130).
func TestWorkerCommand(t *testing.T) {
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	ts := testenv.Server(t)
	fake := fakeopenai.New(func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		if req.Body.Last().Role == "tool" {
			w.Answer("listed", 3)
			return
		}
		w.Call(0, "c1", "list_dir", `{"path":"."}`, 4)
		w.End("tool_calls")
	})
	defer fake.Close()
	sigs := make(chan os.Signal, 1)
	var errw syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- run(context.Background(), []string{"worker", "--temporal", ts.GetFrontendHostPort(), "--namespace", ts.GetDefaultNamespace(),
			"--task-queue", "worker-cmd", "--base-url", fake.BaseURL(), "--model", "m", "--workspace", t.TempDir()},
			streams{in: strings.NewReader(""), out: io.Discard, err: &errw}, func(int) {}, func() (<-chan os.Signal, func()) { return sigs, func() {} })
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, _, err := remote.Start(ctx, ts.GetDefaultClient(), remote.StartOptions{TaskQueue: "worker-cmd", Tree: protocol.Tree{Limits: kernel.DefaultLimits()}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.Follow(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, "list"); err != nil {
		t.Fatal(err)
	}
	var ended *kernel.Lifecycle
	for ended == nil {
		b, err := f.Poll(ctx)
		if err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
		for i := range b.Records {
			if l := &b.Records[i]; l.Kind == kernel.LifeTurnEnded && l.Agent == kernel.Root {
				ended = l
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ended.Outcome != kernel.OutcomeCompleted || ended.Text != "listed" {
		t.Fatalf("the turn ended %s %q, want completed %q", ended.Outcome, ended.Text, "listed")
	}
	if n := len(fake.Requests()); n != 2 || fake.Requests()[0].Body.Model != "m" {
		t.Fatalf("the model got %d requests (model %q), want 2 for model m", n, fake.Requests()[0].Body.Model)
	}
	// The turn's last spans go out in an activity its last workflow task
	// scheduled: a worker stopped before it takes that task sends none.
	if err := rcv.WaitFor(ctx, func(ss []otlptest.Span) bool { return len(ss) >= 4 }); err != nil {
		t.Fatalf("waiting for the turn's 4 spans: %v (%d)", err, len(rcv.Spans()))
	}
	sigs <- os.Interrupt
	if c := <-code; c != exitInterrupted {
		t.Fatalf("worker: exit %d, want 130; stderr %q", c, errw.String())
	}
	if !strings.Contains(errw.String(), "worker on task queue worker-cmd") {
		t.Fatalf("stderr %q does not announce the worker", errw.String())
	}
	var names []string
	for _, sp := range rcv.Spans() {
		names = append(names, sp.GetName())
	}
	slices.Sort(names)
	if want := []string{"chat m", "chat m", "execute_tool list_dir", "invoke_agent main"}; !slices.Equal(names, want) {
		t.Fatalf("the worker exported %v, want %v", names, want)
	}
}

// A span export the OTEL_* variables ask for and the worker cannot honour
// is a usage error naming the variable, before the worker dials.
func TestWorkerRefusesBadOTelConfig(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	var errw syncBuffer
	c := run(context.Background(), []string{"worker", "--temporal", "127.0.0.1:1", "--workspace", t.TempDir()},
		streams{in: strings.NewReader(""), out: io.Discard, err: &errw}, func(int) {}, func() (<-chan os.Signal, func()) { return make(chan os.Signal), func() {} })
	if c != exitUsage || !strings.Contains(errw.String(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Fatalf("exit %d, stderr %q; want %d naming OTEL_EXPORTER_OTLP_PROTOCOL", c, errw.String(), exitUsage)
	}
}
