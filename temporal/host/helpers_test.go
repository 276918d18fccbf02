package host_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/host"
	"github.com/escapement/escapement/temporal/internal/testenv"
	"github.com/escapement/escapement/temporal/protocol"
	"github.com/escapement/escapement/temporal/remote"
)

func TestMain(m *testing.M) {
	testenv.MaybeServe()
	os.Exit(m.Run())
}

// env is one test's world: a Temporal server, the scripted model, a
// workspace, and the configuration its workers share.
type env struct {
	t    *testing.T
	ctx  context.Context
	c    client.Client
	fake *fakeopenai.Server
	cfg  testenv.WorkerConfig
	dir  string
}

func newEnv(t *testing.T, h fakeopenai.Handler) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	ts := testenv.Server(t)
	fake := fakeopenai.New(h)
	t.Cleanup(fake.Close)
	dir := t.TempDir()
	return &env{
		t: t, ctx: ctx, c: ts.GetDefaultClient(), fake: fake, dir: dir,
		cfg: testenv.WorkerConfig{
			HostPort: ts.GetFrontendHostPort(), Namespace: ts.GetDefaultNamespace(), TaskQueue: "escapement-test",
			BaseURL: fake.BaseURL(), Workspace: dir, Counter: filepath.Join(dir, "counter"),
		},
	}
}

// tree is a workflow input with the test's short heartbeat timeout and
// chunk batches, and a long grace (a cancel is acknowledged long before
// it, however loaded the machine: the tests assert the acknowledgement,
// not its speed).
func tree() protocol.Tree {
	lim := kernel.DefaultLimits()
	lim.Grace = 30 * time.Second
	return protocol.Tree{Limits: lim, Options: protocol.Options{HeartbeatTimeout: 2 * time.Second, ChunkEvery: 100 * time.Millisecond}}
}

// start starts a tree's workflow; when the test ends (and has not failed
// yet), every run of it is replayed (replayAll).
func (e *env) start(tr protocol.Tree) *remote.Session {
	e.t.Helper()
	s, attached, err := remote.Start(e.ctx, e.c, remote.StartOptions{TaskQueue: e.cfg.TaskQueue, Tree: tr})
	if err != nil || attached {
		e.t.Fatalf("start: attached=%v err=%v", attached, err)
	}
	e.t.Cleanup(func() { e.replayAll(s) })
	return s
}

// replayAll replays the history of every run of the session's workflow
// against the workflow's code, as a worker that picks the tree up does: a
// workflow that decides differently on replay (non-determinism) fails the
// test. It also fails on a workflow task that failed while the test ran.
// A failed test logs every run's events.
func (e *env) replayAll(s *remote.Session) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	desc, err := e.c.DescribeWorkflowExecution(ctx, s.ID(), "")
	if err != nil {
		e.t.Fatal(err)
	}
	replayer := worker.NewWorkflowReplayer()
	host.RegisterWorkflow(replayer)
	for run := desc.GetWorkflowExecutionInfo().GetFirstRunId(); run != ""; {
		hist := &historypb.History{}
		next := ""
		it := e.c.GetWorkflowHistory(ctx, s.ID(), run, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				e.t.Fatal(err)
			}
			hist.Events = append(hist.Events, ev)
			if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
				e.t.Errorf("run %s: workflow task %d failed: %v", run, ev.GetEventId(), ev.GetWorkflowTaskFailedEventAttributes().GetFailure())
			}
			if a := ev.GetWorkflowExecutionContinuedAsNewEventAttributes(); a != nil {
				next = a.GetNewExecutionRunId()
			}
		}
		// A run whose first workflow task has not run yet decided nothing.
		if len(hist.Events) < 3 {
			run = next
			continue
		}
		if err := replayer.ReplayWorkflowHistory(testenv.QuietLogger(), hist); err != nil {
			e.t.Errorf("replaying run %s: %v", run, err)
		}
		if e.t.Failed() {
			e.t.Logf("run %s:\n%s", run, eventList(hist))
		}
		run = next
	}
}

// reader follows a session's lifecycle and keeps every record it read,
// across runs.
type reader struct {
	e    *env
	f    *remote.Follower
	all  []kernel.Lifecycle
	runs int // runs moved to (NewRun)
	end  *remote.Batch
}

func (e *env) follow(s *remote.Session) *reader {
	e.t.Helper()
	f, err := s.Follow(e.ctx, true)
	if err != nil {
		e.t.Fatal(err)
	}
	return &reader{e: e, f: f}
}

// until reads until cond holds for the records read so far (polling; a
// failed query — no worker answering yet — is retried), and fails the test
// when the context ends first.
func (r *reader) until(what string, cond func([]kernel.Lifecycle) bool) []kernel.Lifecycle {
	r.e.t.Helper()
	for !cond(r.all) {
		b, err := r.f.Poll(r.e.ctx)
		if err == nil {
			r.all = append(r.all, b.Records...)
			if b.NewRun {
				r.runs++
			}
			if b.Ended {
				r.end = &b
				if !cond(r.all) {
					r.e.t.Fatalf("the workflow ended before %s: %+v\n%s", what, b, describe(r.all))
				}
				break
			}
			if len(b.Records) > 0 {
				continue
			}
		}
		select {
		case <-r.e.ctx.Done():
			r.e.t.Fatalf("waiting for %s: %v (last error %v)\n%s", what, r.e.ctx.Err(), err, describe(r.all))
		case <-time.After(20 * time.Millisecond):
		}
	}
	return r.all
}

// turnEnded is a condition: the root's n-th turn ended (counting from the
// records read).
func turnEnded(n int) func([]kernel.Lifecycle) bool {
	return func(ls []kernel.Lifecycle) bool {
		return len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeTurnEnded && l.Agent == kernel.Root })) >= n
	}
}

func find(ls []kernel.Lifecycle, pred func(kernel.Lifecycle) bool) []kernel.Lifecycle {
	var out []kernel.Lifecycle
	for _, l := range ls {
		if pred(l) {
			out = append(out, l)
		}
	}
	return out
}

func describe(ls []kernel.Lifecycle) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString(l.Describe())
		b.WriteByte('\n')
	}
	return b.String()
}

// lastRootEnd is the root's last turn_ended record.
func lastRootEnd(t *testing.T, ls []kernel.Lifecycle) kernel.Lifecycle {
	t.Helper()
	ends := find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeTurnEnded && l.Agent == kernel.Root })
	if len(ends) == 0 {
		t.Fatalf("no root turn ended:\n%s", describe(ls))
	}
	return ends[len(ends)-1]
}

// lastRole is the role of a request's last message.
func lastRole(r *fakeopenai.Request) string { return r.Body.Last().Role }

// waitFile waits until path holds at least n lines and returns them.
func (e *env) waitFile(path string, n int) []string {
	e.t.Helper()
	for {
		b, _ := os.ReadFile(path)
		if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(b) > 0 && len(lines) >= n {
			return lines
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("waiting for %d line(s) in %s: %v", n, path, e.ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// eventList prints a history one event a line: id, time, type, and the
// timer's or activity's id.
func eventList(h *historypb.History) string {
	var b strings.Builder
	for _, ev := range h.GetEvents() {
		fmt.Fprintf(&b, "%d %s %s", ev.GetEventId(), ev.GetEventTime().AsTime().Format("15:04:05.000"), ev.GetEventType())
		if a := ev.GetTimerStartedEventAttributes(); a != nil {
			fmt.Fprintf(&b, " timer=%s %v", a.GetTimerId(), a.GetStartToFireTimeout().AsDuration())
		}
		if a := ev.GetTimerCanceledEventAttributes(); a != nil {
			fmt.Fprintf(&b, " timer=%s", a.GetTimerId())
		}
		if a := ev.GetTimerFiredEventAttributes(); a != nil {
			fmt.Fprintf(&b, " timer=%s", a.GetTimerId())
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			fmt.Fprintf(&b, " %s %s", a.GetActivityId(), a.GetActivityType().GetName())
		}
		b.WriteByte('\n')
	}
	return b.String()
}
