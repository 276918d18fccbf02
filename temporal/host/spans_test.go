package host_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/internal/otlptest"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/internal/testenv"
	"github.com/escapement/escapement/temporal/protocol"
)

// The workers export the tree's spans (docs/otel.md, "On Temporal"): the
// workflow derives them beside the kernel, and the worker that runs the
// export activity a workflow task scheduled sends the spans it ended,
// whole, to a loopback OTLP receiver that decodes what arrives with the
// official OTLP protobuf types.

// testModel is the model the test workers name in their chat spans.
const testModel = "test-model"

// otlp starts a receiver and points this process's exporters (and the
// child workers it starts after) at it, sending every ended span within
// a few milliseconds.
func otlp(t *testing.T) *otlptest.Receiver {
	t.Helper()
	r, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	return r
}

// exported indexes what a receiver got: every span once, each under a
// parent it also got, in its parent's trace and within its parent's time.
type exported struct {
	all  []otlptest.Span
	byID map[string]otlptest.Span
}

// received waits until r holds n spans, stops the worker (which sends
// what its batch processor still holds: a span sent twice arrives by
// then), then checks them: no more than n, none twice, each nested in a
// parent received. The spans a workflow task ended go out in an activity
// the task scheduled: a worker stopped before it takes that activity's
// task would not send them.
func received(t *testing.T, ctx context.Context, r *otlptest.Receiver, n int, stop func()) exported {
	t.Helper()
	if err := r.WaitFor(ctx, func(ss []otlptest.Span) bool { return len(ss) >= n }); err != nil {
		t.Fatalf("waiting for %d spans: %v; got %v", n, err, names(r.Spans()))
	}
	stop()
	if errs := r.Errs(); len(errs) > 0 {
		t.Fatalf("the receiver refused requests: %v", errs)
	}
	ex := exported{all: r.Spans(), byID: map[string]otlptest.Span{}}
	if len(ex.all) != n {
		for _, sp := range ex.all {
			t.Logf("%s %s/%s<-%s turn=%v [%d,%d] error.type=%q op.end=%q worker=%q", sp.GetName(), sp.TraceID()[:8], sp.ID(), sp.ParentID(), sp.Attr("escapement.turn"), sp.GetStartTimeUnixNano(), sp.GetEndTimeUnixNano(), sp.Str("error.type"), sp.Str("escapement.op.end"), resourceAttr(sp, "escapement.test.worker"))
		}
		t.Fatalf("%d spans received, want %d: %v", len(ex.all), n, names(ex.all))
	}
	for _, sp := range ex.all {
		if _, dup := ex.byID[sp.ID()]; dup {
			t.Errorf("span %s (%s) received twice", sp.ID(), sp.GetName())
		}
		ex.byID[sp.ID()] = sp
	}
	for _, sp := range ex.all {
		if sp.GetEndTimeUnixNano() < sp.GetStartTimeUnixNano() || sp.GetStartTimeUnixNano() == 0 {
			t.Errorf("%s: start %d end %d", sp.GetName(), sp.GetStartTimeUnixNano(), sp.GetEndTimeUnixNano())
		}
		if sp.ParentID() == "" {
			continue
		}
		p, ok := ex.byID[sp.ParentID()]
		switch {
		case !ok:
			t.Errorf("%s: its parent %s was never received", sp.GetName(), sp.ParentID())
		case p.TraceID() != sp.TraceID():
			t.Errorf("%s is in another trace than its parent %s", sp.GetName(), p.GetName())
		case sp.GetStartTimeUnixNano() < p.GetStartTimeUnixNano() || sp.GetEndTimeUnixNano() > p.GetEndTimeUnixNano():
			t.Errorf("%s is not within its parent %s", sp.GetName(), p.GetName())
		}
	}
	return ex
}

// names are the spans' names, sorted.
func names(ss []otlptest.Span) []string {
	var out []string
	for _, sp := range ss {
		out = append(out, sp.GetName())
	}
	slices.Sort(out)
	return out
}

func (ex exported) named(name string) []otlptest.Span {
	var out []otlptest.Span
	for _, sp := range ex.all {
		if sp.GetName() == name {
			out = append(out, sp)
		}
	}
	return out
}

func (ex exported) one(t *testing.T, name string) otlptest.Span {
	t.Helper()
	found := ex.named(name)
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1", len(found), name)
	}
	return found[0]
}

// under are the spans whose parent is p, by name.
func (ex exported) under(p otlptest.Span, name string) []otlptest.Span {
	var out []otlptest.Span
	for _, sp := range ex.all {
		if sp.ParentID() == p.ID() && sp.GetName() == name {
			out = append(out, sp)
		}
	}
	return out
}

// chain checks a delegation of a delegation's nesting, as the CLI exports
// it: each child's turn under its delegation's span, under the delegating
// agent's turn, the root's turn the root of its trace.
func (ex exported) chain(t *testing.T, root, mid, leaf string) (r, m, l otlptest.Span) {
	t.Helper()
	r, m, l = ex.one(t, "invoke_agent "+root), ex.one(t, "invoke_agent "+mid), ex.one(t, "invoke_agent "+leaf)
	toMid, toLeaf := ex.one(t, "execute_tool delegate "+mid), ex.one(t, "execute_tool delegate "+leaf)
	for _, link := range [][2]otlptest.Span{{l, toLeaf}, {toLeaf, m}, {m, toMid}, {toMid, r}} {
		if link[0].ParentID() != link[1].ID() {
			t.Errorf("%s nests under %q, want %s", link[0].GetName(), ex.byID[link[0].ParentID()].GetName(), link[1].GetName())
		}
	}
	if r.ParentID() != "" {
		t.Errorf("the root's turn has a parent")
	}
	return r, m, l
}

// resourceAttr is a span's resource attribute key.
func resourceAttr(sp otlptest.Span, key string) string {
	for _, kv := range sp.Resource {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// The CLI's depth-2 run (cmd/escapement's TestOTelDepth2E2E), on
// Temporal: a root delegates to a planner, which delegates to a worker,
// which reads a file. The worker exports the spans the CLI exports — the
// same names, the same nesting, the conventions' attributes — each once,
// in the conversation the workflow's id names, and no message content
// without the opt-in.
func TestSpansDepth2(t *testing.T) {
	rcv := otlp(t)
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		switch first, last := req.Body.FirstUser(), req.Body.Last(); {
		case first == "plan the release" && last.Role == "user":
			w.Call(0, "call_plan", "delegate", `{"task":"make a plan","name":"planner"}`, 7)
			w.End("tool_calls")
		case first == "make a plan" && last.Role == "user":
			w.Call(0, "call_work", "delegate", `{"task":"do the work","name":"worker"}`, 7)
			w.End("tool_calls")
		case first == "do the work" && last.Role == "user":
			w.Call(0, "call_read", "read_file", `{"path":"notes.txt"}`, 5)
			w.End("tool_calls")
		default:
			w.Answer("done: "+strings.Fields(first)[0], 4)
		}
	})
	if err := os.WriteFile(filepath.Join(e.dir, "notes.txt"), []byte("ship it"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.cfg.Spans = true
	w := testenv.StartWorker(t, e.cfg)
	s := e.start(tree())
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "plan the release"); err != nil {
		t.Fatal(err)
	}
	if end := lastRootEnd(t, r.until("the turn's end", turnEnded(1))); end.Outcome != kernel.OutcomeCompleted {
		t.Fatalf("the turn ended %s\n%s", end.Outcome, describe(r.all))
	}
	ex := received(t, e.ctx, rcv, 12, w.Stop)
	want := []string{
		"chat " + testModel, "chat " + testModel, "chat " + testModel, "chat " + testModel, "chat " + testModel, "chat " + testModel,
		"execute_tool delegate planner", "execute_tool delegate worker", "execute_tool read_file",
		"invoke_agent main", "invoke_agent planner", "invoke_agent worker",
	}
	if got := names(ex.all); !slices.Equal(got, want) {
		t.Fatalf("received spans\n  %v\nwant the CLI's\n  %v", got, want)
	}
	root, planner, worker := ex.chain(t, "main", "planner", "worker")
	for _, turn := range []otlptest.Span{root, planner, worker} {
		if n := len(ex.under(turn, "chat "+testModel)); n != 2 {
			t.Errorf("%s holds %d requests, want 2", turn.GetName(), n)
		}
	}
	if read := ex.one(t, "execute_tool read_file"); read.ParentID() != worker.ID() || read.Str("gen_ai.tool.call.id") != "call_read" || read.Str("gen_ai.agent.name") != "worker" {
		t.Errorf("the worker's tool call: parent %s, %v", read.ParentID(), read.GetAttributes())
	}
	if d := ex.one(t, "execute_tool delegate worker"); d.Str("gen_ai.transfer.target.name") != "worker" || d.Str("gen_ai.tool.call.id") != "call_work" || d.Str("escapement.outcome") != "completed" {
		t.Errorf("the planner's delegation: %v", d.GetAttributes())
	}
	for _, sp := range ex.all {
		op, _, _ := strings.Cut(sp.GetName(), " ")
		if sp.Str("gen_ai.operation.name") != op || sp.Str("gen_ai.provider.name") != "openai" || sp.Str("gen_ai.agent.name") == "" || sp.Has("error.type") {
			t.Errorf("%s: %v", sp.GetName(), sp.GetAttributes())
		}
		if c := sp.Str("gen_ai.conversation.id"); c != s.ID() {
			t.Errorf("%s: conversation %q, want the workflow's id %q", sp.GetName(), c, s.ID())
		}
		if sp.TraceID() != root.TraceID() {
			t.Errorf("%s is not in the turn's trace", sp.GetName())
		}
		if resourceAttr(sp, "service.name") != "escapement" {
			t.Errorf("%s: service.name %q", sp.GetName(), resourceAttr(sp, "service.name"))
		}
		switch op {
		case "chat":
			if sp.Str("gen_ai.request.model") != testModel || sp.GetKind() != 3 || // CLIENT
				sp.Attr("gen_ai.usage.output_tokens").GetIntValue() <= 0 || len(sp.Attr("gen_ai.response.finish_reasons").GetArrayValue().GetValues()) != 1 ||
				sp.Str("server.address") != "127.0.0.1" || !sp.Has("server.port") {
				t.Errorf("%s: %v", sp.GetName(), sp.GetAttributes())
			}
		case "execute_tool":
			if sp.Str("gen_ai.tool.name") == "" || sp.Str("gen_ai.tool.call.id") == "" || sp.GetKind() != 1 { // INTERNAL
				t.Errorf("%s: %v", sp.GetName(), sp.GetAttributes())
			}
		}
		for _, kv := range sp.GetAttributes() {
			if v := kv.GetValue().GetStringValue(); strings.Contains(v, "ship it") || strings.Contains(v, "plan the release") {
				t.Errorf("%s: %s = %q holds content without the opt-in", sp.GetName(), kv.GetKey(), v)
			}
		}
	}
}

// A cancel at the root of a depth-2 delegation, while the child's shell
// runs and the grandchild streams, ends every span: every span that
// started is received, the turns interrupted (the root by the user, the
// others by their parent), the stream and the shell cancelled.
func TestSpansCancelDepth2(t *testing.T) {
	rcv := otlp(t)
	streaming := make(chan struct{})
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		switch req.Body.FirstUser() {
		case "go":
			w.Call(0, "d1", "delegate", `{"task":"A","name":"child"}`, 8)
			w.End("tool_calls")
		case "A":
			w.Call(0, "d2", "delegate", `{"task":"B","name":"grandchild"}`, 8)
			w.Call(1, "s1", "shell", `{"command":"echo $$ > child.pid && exec sleep 300"}`, 8)
			w.End("tool_calls")
		case "B":
			w.Text("thinking")
			close(streaming)
			w.Stall(ctx)
		}
	})
	e.cfg.Spans = true
	w := testenv.StartWorker(t, e.cfg)
	s := e.start(tree())
	r := e.follow(s)
	acc, err := s.Submit(e.ctx, "go")
	if err != nil {
		t.Fatal(err)
	}
	e.waitFile(filepath.Join(e.dir, "child.pid"), 1)
	<-streaming
	r.until("the grandchild's first chunk", func(ls []kernel.Lifecycle) bool {
		return len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeDelta && l.Text == "thinking" })) > 0
	})
	if _, err := s.Cancel(e.ctx, kernel.Root, acc.Turn); err != nil {
		t.Fatal(err)
	}
	r.until("every op's end", func(ls []kernel.Lifecycle) bool {
		return len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeTurnEnded })) == 3 &&
			len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeOpEnded })) == 4
	})
	ex := received(t, e.ctx, rcv, 9, w.Stop)
	root, child, grandchild := ex.chain(t, "main", "child", "grandchild")
	for sp, reason := range map[*otlptest.Span]string{&root: "user_cancel", &child: "parent_cancelled", &grandchild: "parent_cancelled"} {
		if sp.Str("error.type") != "interrupted" || sp.Str("escapement.reason") != reason || sp.GetStatus().GetCode() != 2 { // ERROR
			t.Errorf("%s: error.type %q reason %q status %v", sp.GetName(), sp.Str("error.type"), sp.Str("escapement.reason"), sp.GetStatus())
		}
	}
	stream := ex.under(grandchild, "chat "+testModel)
	shell := ex.under(child, "execute_tool shell")
	if len(stream) != 1 || len(shell) != 1 {
		t.Fatalf("%d requests under the grandchild's turn, %d shells under the child's; want 1 and 1: %v", len(stream), len(shell), names(ex.all))
	}
	for _, sp := range []otlptest.Span{stream[0], shell[0]} {
		if sp.Str("error.type") != "cancelled" || sp.Str("escapement.reason") != "parent_cancelled" || sp.Str("escapement.op.end") != "cancelled" {
			t.Errorf("%s: error.type %q reason %q op end %q", sp.GetName(), sp.Str("error.type"), sp.Str("escapement.reason"), sp.Str("escapement.op.end"))
		}
	}
	for _, name := range []string{"execute_tool delegate child", "execute_tool delegate grandchild"} {
		if d := ex.one(t, name); d.Str("error.type") != "interrupted" || d.Str("escapement.reason") != "parent_cancelled" {
			t.Errorf("%s: error.type %q reason %q", name, d.Str("error.type"), d.Str("escapement.reason"))
		}
	}
	for _, turn := range []otlptest.Span{root, child} {
		if done := ex.under(turn, "chat "+testModel); len(done) != 1 || done[0].Has("error.type") {
			t.Errorf("%s's request: %v", turn.GetName(), done)
		}
	}
}

// A worker that dies mid-turn leaves its spans to the workflow: the first
// worker (killed outright) sent the spans that ended while it ran; the second
// replays the history, holds the spans the first left open under the same
// ids, and ends them — the request the loss cut lost/crash, as after a
// crash — so the two workers' exports are every span of the turn, once,
// in one trace.
func TestSpansSurviveWorkerLoss(t *testing.T) {
	rcv := otlp(t)
	streaming := make(chan struct{})
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		switch req.N {
		case 1:
			w.Call(0, "call_1", "noop", `{}`, 1)
			w.End("tool_calls")
		case 2:
			w.Text("Hello, ")
			close(streaming)
			w.Stall(ctx) // until the dead worker's connection closes
		default:
			w.Answer("world.", 3)
		}
	})
	e.cfg.Spans = true
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "escapement.test.worker=first")
	p := testenv.StartProcess(t, e.cfg)
	s := e.start(tree())
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "greet"); err != nil {
		t.Fatal(err)
	}
	<-streaming
	r.until("the second request's first chunk", func(ls []kernel.Lifecycle) bool {
		return len(find(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeDelta && strings.Contains(l.Text, "Hello") })) > 0
	})
	// The first worker sent what had ended: the first request and the
	// tool call (a worker killed before its batch processor sends loses
	// what it held: docs/otel.md).
	if err := rcv.WaitFor(e.ctx, func(ss []otlptest.Span) bool { return len(ss) >= 2 }); err != nil {
		t.Fatalf("the first worker's spans: %v (%v)", err, names(rcv.Spans()))
	}
	killed := time.Now()
	p.Kill()
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "escapement.test.worker=second")
	w := testenv.StartWorker(t, e.cfg)
	if end := lastRootEnd(t, r.until("the turn's end", turnEnded(1))); end.Outcome != kernel.OutcomeCompleted || end.Text != "world." {
		t.Fatalf("the turn ended %s %q\n%s", end.Outcome, end.Text, describe(r.all))
	}
	ex := received(t, e.ctx, rcv, 5, w.Stop)
	root := ex.one(t, "invoke_agent main")
	chats := ex.under(root, "chat "+testModel)
	if len(chats) != 3 || len(ex.under(root, "execute_tool noop")) != 1 {
		t.Fatalf("under the turn: %d requests and %v; want 3 and the tool call", len(chats), names(ex.all))
	}
	slices.SortFunc(chats, func(a, b otlptest.Span) int { return int(a.GetStartTimeUnixNano() - b.GetStartTimeUnixNano()) })
	by := func(sp otlptest.Span) string { return resourceAttr(sp, "escapement.test.worker") }
	for sp, want := range map[string]string{"the first request": by(chats[0]), "the tool call": by(ex.one(t, "execute_tool noop"))} {
		if want != "first" {
			t.Errorf("%s was sent by the %q worker, want the first", sp, want)
		}
	}
	cut := chats[1]
	if by(cut) != "second" || by(root) != "second" || by(chats[2]) != "second" {
		t.Errorf("the cut request, the turn and the restarted request were sent by %q, %q, %q; want the second worker", by(cut), by(root), by(chats[2]))
	}
	if cut.Str("error.type") != "lost" || cut.Str("escapement.reason") != "crash" || cut.Str("escapement.op.end") != "lost" {
		t.Errorf("the request the loss cut: error.type %q reason %q op end %q", cut.Str("error.type"), cut.Str("escapement.reason"), cut.Str("escapement.op.end"))
	}
	// It started on the first worker and ended on the second, after the
	// kill: one span, its times the workflow's.
	if start, end := time.Unix(0, int64(cut.GetStartTimeUnixNano())), time.Unix(0, int64(cut.GetEndTimeUnixNano())); !start.Before(killed) || !end.After(killed) {
		t.Errorf("the cut request spans %v to %v; the kill was at %v", start, end, killed)
	}
	if chats[2].Has("error.type") || root.Has("error.type") {
		t.Errorf("the restarted request or the turn did not complete: %v %v", chats[2].GetAttributes(), root.GetAttributes())
	}
	recovered := 0
	for _, ev := range root.GetEvents() {
		if ev.GetName() == "escapement.recovered" {
			recovered++
		}
	}
	if recovered != 1 {
		t.Errorf("the turn's span tells %d recoveries, want 1: %v", recovered, root.GetEvents())
	}
}

// Continue-As-New carries the spans on: each root turn is a trace of its
// own in the workflow's conversation, whichever run it ran in, its turn
// number going on across the runs.
func TestSpansAcrossContinueAsNew(t *testing.T) {
	rcv := otlp(t)
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Answer("reply to "+req.Body.Last().Content, 4)
	})
	e.cfg.Spans = true
	w := testenv.StartWorker(t, e.cfg)
	tr := tree()
	tr.Options.ContinueAfterEvents = 10 // every turn runs in a run of its own
	s := e.start(tr)
	r := e.follow(s)
	for i, text := range []string{"one", "two", "three"} {
		if _, err := s.Submit(e.ctx, text); err != nil {
			t.Fatalf("submit %q: %v", text, err)
		}
		r.until("turn "+text, turnEnded(i+1))
	}
	if r.runs < 2 {
		t.Fatalf("the turns ran in %d runs, want 3", r.runs+1)
	}
	ex := received(t, e.ctx, rcv, 6, w.Stop)
	turns := ex.named("invoke_agent main")
	traces := map[string]bool{}
	var numbers []string
	for _, turn := range turns {
		traces[turn.TraceID()] = true
		numbers = append(numbers, strconv.FormatInt(turn.Attr("escapement.turn").GetIntValue(), 10))
		if len(ex.under(turn, "chat "+testModel)) != 1 {
			t.Errorf("turn %s holds no request", turn.Attr("escapement.turn"))
		}
	}
	slices.Sort(numbers)
	if len(traces) != 3 || !slices.Equal(numbers, []string{"1", "2", "3"}) {
		t.Fatalf("%d traces, turns %v; want three traces, turns 1 2 3", len(traces), numbers)
	}
	for _, sp := range ex.all {
		if sp.Str("gen_ai.conversation.id") != s.ID() {
			t.Errorf("%s: conversation %q, want %q", sp.GetName(), sp.Str("gen_ai.conversation.id"), s.ID())
		}
	}
}

// failOnce fails, once, the first workflow task that schedules a tool
// call, after the step that scheduled it: the task's work is thrown away
// and the service hands the task out again, and the worker steps its
// events live a second time.
type failOnce struct {
	interceptor.WorkerInterceptorBase
	failed *atomic.Bool
}

func (f *failOnce) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &failOnceInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, failed: f.failed}
}

type failOnceInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	failed *atomic.Bool
}

func (i *failOnceInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&failOnceOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}, failed: i.failed})
}

type failOnceOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	failed *atomic.Bool
}

func (o *failOnceOutbound) ExecuteActivity(ctx workflow.Context, name string, args ...any) workflow.Future {
	f := o.Next.ExecuteActivity(ctx, name, args...)
	if name == protocol.ToolActivity && o.failed.CompareAndSwap(false, true) {
		panic(testenv.InjectedFailure)
	}
	return f
}

// A workflow task that runs live twice — its first run thrown away (here
// a panic; on a busy service a completion refused because an input came
// meanwhile, a task timed out on its worker's sticky queue) — exports
// the spans it ended once: the request that ended in it is sent by the
// export its completed run scheduled, not by the run that failed.
func TestSpansOnceWhenATaskRunsAgain(t *testing.T) {
	rcv := otlp(t)
	e := newEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		if req.N == 1 {
			w.Call(0, "call_1", "noop", `{}`, 1)
			w.End("tool_calls")
			return
		}
		w.Answer("done.", 2)
	})
	e.cfg.Spans = true
	var failed atomic.Bool
	e.cfg.Interceptors = []interceptor.WorkerInterceptor{&failOnce{failed: &failed}}
	w := testenv.StartWorker(t, e.cfg)
	s := e.start(tree())
	r := e.follow(s)
	if _, err := s.Submit(e.ctx, "go"); err != nil {
		t.Fatal(err)
	}
	if end := lastRootEnd(t, r.until("the turn's end", turnEnded(1))); end.Outcome != kernel.OutcomeCompleted {
		t.Fatalf("the turn ended %s\n%s", end.Outcome, describe(r.all))
	}
	if !failed.Load() {
		t.Fatal("no workflow task failed: the test tests nothing")
	}
	ex := received(t, e.ctx, rcv, 4, w.Stop)
	if got, want := names(ex.all), []string{"chat " + testModel, "chat " + testModel, "execute_tool noop", "invoke_agent main"}; !slices.Equal(got, want) {
		t.Fatalf("received %v, want %v", got, want)
	}
}
