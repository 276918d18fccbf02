package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/internal/otlptest"
	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/sim"
)

// The OpenTelemetry export end to end (docs/otel.md): the real binary runs
// a delegation of a delegation against the loopback OpenAI-protocol
// server, with OTEL_EXPORTER_OTLP_ENDPOINT naming a loopback OTLP receiver
// that decodes what the exporter sent with the official OTLP protobuf
// types. What it receives is held to the conventions and to the spans the
// derivation gives the run's --trace, replayed.

const otelModel = "gpt-e2e"

// depth2 scripts a root that delegates to a planner, which delegates to a
// worker, which reads a file; worker(ctx, w, n) answers the worker's n-th
// request (from 1).
type depth2 struct {
	worker  func(ctx context.Context, w *fakeopenai.Writer, n int)
	streams chan string // the agents whose request came, in order
}

func (d *depth2) handle(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
	n := 1 // the agent's request number: one more than the answers it has had
	for _, m := range r.Body.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	agent := map[string]string{"plan the release": "main", "make a plan": "planner", "do the work": "worker"}[r.Body.FirstUser()]
	select {
	case d.streams <- agent:
	default:
	}
	switch {
	case agent == "main" && n == 1:
		_ = w.Call(0, "call_plan", "delegate", `{"task":"make a plan","name":"planner"}`, 7)
		_ = w.End("tool_calls")
	case agent == "planner" && n == 1:
		_ = w.Call(0, "call_work", "delegate", `{"task":"do the work","name":"worker"}`, 7)
		_ = w.End("tool_calls")
	case agent == "worker":
		d.worker(ctx, w, n)
	default:
		_ = w.Answer(agent+" done", 4)
	}
}

func readsAFile(_ context.Context, w *fakeopenai.Writer, n int) {
	if n == 1 {
		_ = w.Call(0, "call_read", "read_file", `{"path":"notes.txt"}`, 5)
		_ = w.End("tool_calls")
		return
	}
	_ = w.Answer("worker done", 4)
}

// otelRun starts `escapement run` exporting to a fresh receiver; it
// returns the process, the receiver and the trace file's path.
func otelRun(t *testing.T, d *depth2, args ...string) (*proc, *otlptest.Receiver, string) {
	t.Helper()
	bin := buildBinary(t)
	d.streams = make(chan string, 64)
	srv := fakeopenai.New(d.handle)
	t.Cleanup(srv.Close)
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rcv.Close)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("ship it"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(dir, "t.jsonl")
	p := startBinaryEnv(t, bin, srv, dir, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_SERVICE_NAME=escapement-e2e"},
		append([]string{"run", "plan the release", "--model", otelModel, "--workspace", dir, "--session", filepath.Join(dir, "s.jsonl"), "--trace", tr}, args...)...)
	return p, rcv, tr
}

// exported indexes what the receiver got and holds it to what the
// derivation gives the trace: the same spans, each received once, each
// under a parent received in its trace and within the parent's time.
type exported struct {
	all  []otlptest.Span
	byID map[string]otlptest.Span
}

func checkExport(t *testing.T, rcv *otlptest.Receiver, tracePath string) exported {
	t.Helper()
	want := derivedFrom(t, tracePath)
	ex := exported{byID: map[string]otlptest.Span{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = rcv.WaitFor(ctx, func(ss []otlptest.Span) bool { return len(ss) >= len(want) })
	if errs := rcv.Errs(); len(errs) > 0 {
		t.Fatalf("the receiver refused requests: %v", errs)
	}
	ex.all = rcv.Spans()
	var got []string
	for _, sp := range ex.all {
		if _, dup := ex.byID[sp.ID()]; dup {
			t.Errorf("span %s (%s) received twice", sp.ID(), sp.GetName())
		}
		ex.byID[sp.ID()] = sp
		got = append(got, sp.GetName())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("received spans\n  %v\nthe run's trace derives\n  %v", got, want)
	}
	for _, sp := range ex.all {
		if sp.GetEndTimeUnixNano() < sp.GetStartTimeUnixNano() || sp.GetEndTimeUnixNano() == 0 {
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

// derivedFrom replays a live trace and returns the names of the spans the
// derivation gives it, sorted; every one must have ended.
func derivedFrom(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := spans.New(spans.Config{RootName: "main", Model: otelModel})
	var names []string
	res, err := sim.ReplayObserved(bytes.NewReader(data), sim.DefaultMemoryBudget, func(si sim.StepInfo) {
		for _, c := range d.Step(si.Event, si.Effects) {
			if c.Kind == spans.Ended {
				names = append(names, c.Span.Name())
			}
		}
	})
	if err != nil || !res.Identical {
		t.Fatalf("replaying %s: %v %+v", path, err, res)
	}
	if open := d.Open(); len(open) > 0 {
		t.Fatalf("the trace leaves %d span(s) open, the first %s", len(open), open[0].Name())
	}
	slices.Sort(names)
	return names
}

func (ex exported) one(t *testing.T, name string) otlptest.Span {
	t.Helper()
	var found []otlptest.Span
	for _, sp := range ex.all {
		if sp.GetName() == name {
			found = append(found, sp)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1", len(found), name)
	}
	return found[0]
}

// chain checks the nesting of a delegation of a delegation: the worker's
// turn under the planner's delegate call, under the planner's turn, under
// the root's delegate call, under the root's turn, the root of its trace.
func (ex exported) chain(t *testing.T) (root, planner, worker otlptest.Span) {
	t.Helper()
	root, planner, worker = ex.one(t, "invoke_agent main"), ex.one(t, "invoke_agent planner"), ex.one(t, "invoke_agent worker")
	toPlanner, toWorker := ex.one(t, "execute_tool delegate planner"), ex.one(t, "execute_tool delegate worker")
	for _, l := range [][2]otlptest.Span{{worker, toWorker}, {toWorker, planner}, {planner, toPlanner}, {toPlanner, root}} {
		if l[0].ParentID() != l[1].ID() {
			t.Errorf("%s nests under %s, want %s", l[0].GetName(), ex.byID[l[0].ParentID()].GetName(), l[1].GetName())
		}
	}
	if root.ParentID() != "" {
		t.Errorf("the root's turn has a parent")
	}
	return root, planner, worker
}

// TestOTelDepth2E2E: a completed run exports every span of a delegation
// of a delegation, named, nested and attributed per the GenAI conventions,
// and nothing secret or of the conversation's content.
func TestOTelDepth2E2E(t *testing.T) {
	p, rcv, tr := otelRun(t, &depth2{worker: readsAFile})
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	ex := checkExport(t, rcv, tr)
	ex.chain(t)
	conv := ""
	for _, sp := range ex.all {
		op := sp.Str("gen_ai.operation.name")
		if want, _, _ := strings.Cut(sp.GetName(), " "); op != want {
			t.Errorf("%s: gen_ai.operation.name %q", sp.GetName(), op)
		}
		if sp.Str("gen_ai.provider.name") != "openai" || sp.Str("gen_ai.agent.name") == "" || sp.Has("error.type") {
			t.Errorf("%s: %v", sp.GetName(), sp.GetAttributes())
		}
		if conv == "" {
			conv = sp.Str("gen_ai.conversation.id")
		}
		if c := sp.Str("gen_ai.conversation.id"); c == "" || c != conv {
			t.Errorf("%s: conversation %q, the others %q", sp.GetName(), c, conv)
		}
		var service string
		for _, kv := range sp.Resource {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		if service != "escapement-e2e" {
			t.Errorf("%s: service.name %q (OTEL_SERVICE_NAME)", sp.GetName(), service)
		}
		switch op {
		case "chat":
			if sp.GetName() != "chat "+otelModel || sp.Str("gen_ai.request.model") != otelModel || sp.GetKind() != 3 || // CLIENT
				sp.Attr("gen_ai.usage.input_tokens").GetIntValue() != 10 || sp.Attr("gen_ai.usage.output_tokens").GetIntValue() <= 0 ||
				len(sp.Attr("gen_ai.response.finish_reasons").GetArrayValue().GetValues()) != 1 || sp.Str("server.address") != "127.0.0.1" || !sp.Has("server.port") {
				t.Errorf("%s: %v", sp.GetName(), sp.GetAttributes())
			}
		case "execute_tool":
			if sp.Str("gen_ai.tool.name") == "" || sp.Str("gen_ai.tool.call.id") == "" || sp.GetKind() != 1 { // INTERNAL
				t.Errorf("%s: %v", sp.GetName(), sp.GetAttributes())
			}
		}
		for _, kv := range sp.GetAttributes() {
			if v := kv.GetValue().GetStringValue(); strings.Contains(v, testKey) || strings.Contains(v, "ship it") || strings.Contains(v, "plan the release") {
				t.Errorf("%s: %s = %q holds a secret or content without the opt-in", sp.GetName(), kv.GetKey(), v)
			}
		}
	}
	read := ex.one(t, "execute_tool read_file")
	if read.Str("gen_ai.tool.call.id") != "call_read" || read.Str("gen_ai.agent.name") != "worker" || read.ParentID() != ex.one(t, "invoke_agent worker").ID() {
		t.Errorf("the worker's tool call: %v", read.GetAttributes())
	}
	if d := ex.one(t, "execute_tool delegate worker"); d.Str("gen_ai.transfer.target.name") != "worker" || d.Str("gen_ai.tool.call.id") != "call_work" {
		t.Errorf("the planner's delegation: %v", d.GetAttributes())
	}

	// The same trace, replayed, draws the same spans on a Perfetto timeline
	// (a trace does not record the model: its requests are "chat").
	pf := filepath.Join(filepath.Dir(tr), "t.json")
	if code, out, errb := runCLI(t, "sim", "replay", tr, "--perfetto", pf); code != exitOK {
		t.Fatalf("sim replay --perfetto: exit %d %s %s", code, out, errb)
	}
	data, err := os.ReadFile(pf)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name string `json:"name"`
			Ph   string `json:"ph"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var drawn, sent []string
	for _, ev := range doc.TraceEvents {
		if ev.Ph == "X" {
			drawn = append(drawn, ev.Name)
		}
	}
	for _, sp := range ex.all {
		sent = append(sent, strings.TrimSuffix(sp.GetName(), " "+otelModel))
	}
	slices.Sort(drawn)
	slices.Sort(sent)
	if !slices.Equal(drawn, sent) {
		t.Errorf("the timeline draws\n  %v\nthe export sent\n  %v", drawn, sent)
	}
}

// TestOTelCtrlCE2E: Ctrl-C while the worker streams (two delegations
// deep) ends every span, each saying the user's cancel or the parent's
// ended it.
func TestOTelCtrlCE2E(t *testing.T) {
	d := &depth2{worker: func(ctx context.Context, w *fakeopenai.Writer, _ int) { w.Forever(ctx, "tok ", 20*time.Millisecond) }}
	p, rcv, tr := otelRun(t, d)
	waitAgent(t, d.streams, "worker", p)
	time.Sleep(50 * time.Millisecond) // a few tokens
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d, want 130\nstderr: %s", code, p.stderr)
	}
	ex := checkExport(t, rcv, tr)
	root, planner, worker := ex.chain(t)
	for sp, reason := range map[*otlptest.Span]string{&root: "user_cancel", &planner: "parent_cancelled", &worker: "parent_cancelled"} {
		if sp.Str("error.type") != "interrupted" || sp.Str("escapement.reason") != reason || sp.GetStatus().GetCode() != 2 {
			t.Errorf("%s: error.type %q reason %q status %v", sp.GetName(), sp.Str("error.type"), sp.Str("escapement.reason"), sp.GetStatus())
		}
	}
	streaming := lastChat(t, ex, worker)
	if streaming.Str("error.type") != "cancelled" || streaming.Str("escapement.reason") != "parent_cancelled" {
		t.Errorf("the worker's stream: error.type %q reason %q", streaming.Str("error.type"), streaming.Str("escapement.reason"))
	}
}

// TestOTelDeadlineE2E: the root's turn deadline fires while the worker's
// server stalls; every span ends, the root's saying the deadline did.
func TestOTelDeadlineE2E(t *testing.T) {
	d := &depth2{worker: func(ctx context.Context, w *fakeopenai.Writer, _ int) { w.Stall(ctx) }}
	p, rcv, tr := otelRun(t, d, "--turn-timeout", "4s")
	if code := p.wait(t); code != exitCheckFailed {
		t.Fatalf("exit %d, want 1 (the turn timed out)\nstderr: %s", code, p.stderr)
	}
	ex := checkExport(t, rcv, tr)
	root, planner, worker := ex.chain(t)
	if root.Str("error.type") != "timed_out" || root.Str("escapement.reason") != "turn_timeout" {
		t.Errorf("the root's turn: error.type %q reason %q", root.Str("error.type"), root.Str("escapement.reason"))
	}
	for _, sp := range []otlptest.Span{planner, worker} {
		if sp.Str("error.type") != "interrupted" || sp.Str("escapement.reason") != "parent_cancelled" {
			t.Errorf("%s: error.type %q reason %q", sp.GetName(), sp.Str("error.type"), sp.Str("escapement.reason"))
		}
	}
	if stalled := lastChat(t, ex, worker); stalled.Str("error.type") != "cancelled" || stalled.Str("escapement.reason") != "parent_cancelled" {
		t.Errorf("the stalled request: error.type %q reason %q", stalled.Str("error.type"), stalled.Str("escapement.reason"))
	}
}

// lastChat is the request span under an agent's turn span.
func lastChat(t *testing.T, ex exported, turn otlptest.Span) otlptest.Span {
	t.Helper()
	var found []otlptest.Span
	for _, sp := range ex.all {
		if sp.ParentID() == turn.ID() && strings.HasPrefix(sp.GetName(), "chat") {
			found = append(found, sp)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d requests under %s, want 1", len(found), turn.GetName())
	}
	return found[0]
}

// waitAgent waits for agent's request to reach the server.
func waitAgent(t *testing.T, streams <-chan string, agent string, p *proc) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case a := <-streams:
			if a == agent {
				return
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s's request\nstderr: %s", agent, p.stderr)
		}
	}
}

// TestOTelOffStartsNothing: without the endpoint variables a live run
// starts no exporter — no OpenTelemetry goroutine runs while its turn does
// — and with one it does (the check can fail).
func TestOTelOffStartsNothing(t *testing.T) {
	for _, on := range []bool{false, true} {
		rcv, err := otlptest.Start()
		if err != nil {
			t.Fatal(err)
		}
		if on {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.URL)
		} else {
			unsetenv(t, "OTEL_EXPORTER_OTLP_ENDPOINT")
			unsetenv(t, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
		}
		streaming := make(chan struct{})
		var once sync.Once
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			_ = w.Text("thinking")
			once.Do(func() { close(streaming) })
			w.Stall(ctx)
		})
		dir := t.TempDir()
		t.Setenv("OPENAI_API_KEY", testKey)
		t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
		c := startCLI(t, []string{"run", "hello", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir})
		select {
		case <-streaming:
		case <-time.After(20 * time.Second):
			t.Fatalf("no request\nstderr: %s", c.errb)
		}
		var dump bytes.Buffer
		if err := pprof.Lookup("goroutine").WriteTo(&dump, 1); err != nil {
			t.Fatal(err)
		}
		running := strings.Contains(dump.String(), "go.opentelemetry.io/") || strings.Contains(dump.String(), "adapters/otel.")
		c.signal(syscall.SIGINT)
		if code := c.wait(20 * time.Second); code != exitInterrupted {
			t.Fatalf("exit %d\nstderr: %s", code, c.errb)
		}
		srv.Close()
		rcv.Close()
		if running != on {
			t.Fatalf("with the endpoint set %v, OpenTelemetry goroutines running: %v\n%s", on, running, dump.String())
		}
	}
}

// TestOTelKill9ResumeE2E: kill -9 while the worker streams, two
// delegations deep; `chat --resume` recovers the run from its log. The
// spans the killed process ended and sent, and the ones the recovered
// process ends — the lost request's saying so, and the turns it finishes —
// are together the spans of the whole run, each once, in one trace.
func TestOTelKill9ResumeE2E(t *testing.T) {
	streaming := make(chan struct{})
	var once sync.Once
	d := &depth2{worker: func(ctx context.Context, w *fakeopenai.Writer, n int) {
		if n == 1 {
			_ = w.Text("half ")
			once.Do(func() { close(streaming) })
			w.Stall(ctx)
			return
		}
		_ = w.Answer("worker done", 4)
	}}
	bin := buildBinary(t)
	d.streams = make(chan string, 64)
	srv := fakeopenai.New(d.handle)
	t.Cleanup(srv.Close)
	rcv, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rcv.Close)
	dir := t.TempDir()
	sess, tr := filepath.Join(dir, "s.jsonl"), filepath.Join(dir, "t2.jsonl")
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL, "OTEL_BSP_SCHEDULE_DELAY=20"}
	p := startBinaryEnv(t, bin, srv, dir, env, "run", "plan the release", "--model", otelModel, "--workspace", dir, "--session", sess)
	waitChan(t, streaming, "the worker's first words", p)
	// The words are stepped and logged before the kill: the restarted
	// request then keeps them as a partial answer, the worker's second
	// request, which is answered. Killed before that (the server has
	// written them, the process has not read them yet: a loaded machine),
	// the restart would be the worker's first request again, which stalls
	// until the stall timeout — past the resume's wait.
	eventually(t, "the worker's first words logged", func() bool {
		data, _ := os.ReadFile(sess + session.LogSuffix)
		return bytes.Contains(data, []byte(`"text":"half "`))
	})
	// The root's and the planner's first requests ended (they delegated):
	// wait until the killed process has sent their spans.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rcv.WaitFor(ctx, func(ss []otlptest.Span) bool { return len(ss) >= 2 }); err != nil {
		t.Fatalf("the first process sent no spans: %v\nstderr: %s", err, p.stderr)
	}
	p.kill9(t)
	before := len(rcv.Spans())

	r := startBinaryEnv(t, bin, srv, dir, env, "chat", "--resume", sess, "--workspace", dir, "--model", otelModel, "--trace", tr)
	r.stdin.Close()
	if code := r.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, r.stderr)
	}
	ex := checkExport(t, rcv, tr)
	_, _, worker := ex.chain(t)
	if before < 2 || before >= len(ex.all) {
		t.Fatalf("%d spans before the kill, %d in all", before, len(ex.all))
	}
	var lost, answered int
	for _, sp := range ex.all {
		if sp.ParentID() != worker.ID() || !strings.HasPrefix(sp.GetName(), "chat") {
			continue
		}
		switch {
		case sp.Str("error.type") == "lost" && sp.Str("escapement.reason") == "crash":
			lost++
		case !sp.Has("error.type"):
			answered++
		}
	}
	if lost != 1 || answered != 1 {
		t.Errorf("the worker's requests: %d lost, %d answered; want one each", lost, answered)
	}
	traces := map[string]bool{}
	for _, sp := range ex.all {
		traces[sp.TraceID()] = true
	}
	if len(traces) != 1 {
		t.Errorf("the run's spans are in %d traces, want 1", len(traces))
	}
}
