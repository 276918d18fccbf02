package otel_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/otel"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/otlptest"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
)

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		on      bool
		proto   string
		content bool
		bad     string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:4318"}, on: true, proto: otel.ProtocolHTTP},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x:4318/v1/traces"}, on: true, proto: otel.ProtocolHTTP},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, proto: otel.ProtocolGRPC},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, on: true, proto: otel.ProtocolHTTP},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, bad: "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "zipkin"}, bad: "OTEL_TRACES_EXPORTER=zipkin"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", otel.EnvCaptureContent: "TRUE"}, on: true, proto: otel.ProtocolHTTP, content: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", otel.EnvCaptureContent: "span_only"}, on: true, proto: otel.ProtocolHTTP, content: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", otel.EnvCaptureContent: "no_content"}, on: true, proto: otel.ProtocolHTTP},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", otel.EnvCaptureContent: "yes"}, bad: otel.EnvCaptureContent + "=yes"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", otel.EnvCaptureContent: "event_only"}, bad: "spans only"},
	} {
		s, on, err := otel.FromEnv(func(k string) string { return tc.env[k] })
		switch {
		case tc.bad != "":
			if err == nil || !errors.Is(err, otel.ErrBadSetting) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("%v: err %v, want one naming %q", tc.env, err, tc.bad)
			}
		case err != nil || on != tc.on || (on && (s.Protocol != tc.proto || s.Content != tc.content)):
			t.Errorf("%v: %+v on=%v err=%v; want on=%v %s content=%v", tc.env, s, on, err, tc.on, tc.proto, tc.content)
		}
	}
}

// run runs s in the simulator and returns the kernel's configuration and
// the events it was fed, to be replayed into a kernel of the test's own
// (ports.Step carries the kernel: a request's answer is read from it).
func run(t *testing.T, s *scenario.Scenario, opt sim.Options) (kernel.Config, []kernel.Event) {
	t.Helper()
	var evs []kernel.Event
	opt.Observe = func(si sim.StepInfo) { evs = append(evs, si.Event) }
	r, err := sim.Run(s, opt)
	if err != nil || !r.Passed {
		t.Fatalf("%s: %v %v", s.Name, err, r.Violations)
	}
	cfg := s.KernelConfig()
	cfg.Idempotent = opt.Idempotent
	return cfg, evs
}

// replay feeds evs to a fresh kernel and shows each step to fn, as the
// live driver shows its observer.
func replay(t *testing.T, cfg kernel.Config, evs []kernel.Event, fn func(i int, s ports.Step)) {
	t.Helper()
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range evs {
		fn(i, ports.Step{Kernel: k, Event: ev, Effects: k.Step(ev)})
	}
}

func embedded(t *testing.T, name string) *scenario.Scenario {
	t.Helper()
	all, err := scenario.LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %q", name)
	return nil
}

// derived is every span the derivation gives the events, by id.
func derived(t *testing.T, cfg kernel.Config, evs []kernel.Event) map[spans.ID]spans.Span {
	d := spans.New(spans.Config{RootName: cfg.RootName})
	out := map[spans.ID]spans.Span{}
	replay(t, cfg, evs, func(_ int, s ports.Step) {
		for _, c := range d.Step(s.Event, s.Effects) {
			if c.Kind == spans.Ended {
				out[c.Span.ID] = *c.Span
			}
		}
	})
	return out
}

func receiver(t *testing.T, protocol string) *otlptest.Receiver {
	t.Helper()
	r, err := otlptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if protocol == otel.ProtocolGRPC {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+r.GRPC)
	} else {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.URL)
	}
	return r
}

func exporter(t *testing.T, cfg otel.Config) *otel.Exporter {
	t.Helper()
	e, err := otel.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.SetConversation("conv-test")
	return e
}

func shutdown(t *testing.T, e *otel.Exporter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// byName indexes the received spans by id and finds them by name.
type received struct {
	all  []otlptest.Span
	byID map[string]otlptest.Span
}

func index(t *testing.T, r *otlptest.Receiver) received {
	t.Helper()
	if errs := r.Errs(); len(errs) > 0 {
		t.Fatalf("the receiver refused requests: %v", errs)
	}
	rec := received{all: r.Spans(), byID: map[string]otlptest.Span{}}
	for _, sp := range rec.all {
		if _, dup := rec.byID[sp.ID()]; dup {
			t.Errorf("span %s (%s) received twice", sp.ID(), sp.GetName())
		}
		rec.byID[sp.ID()] = sp
	}
	return rec
}

func (rec received) named(name string) []otlptest.Span {
	var out []otlptest.Span
	for _, sp := range rec.all {
		if sp.GetName() == name {
			out = append(out, sp)
		}
	}
	return out
}

func (rec received) one(t *testing.T, name string) otlptest.Span {
	t.Helper()
	ss := rec.named(name)
	if len(ss) != 1 {
		t.Fatalf("%d spans named %q, want 1", len(ss), name)
	}
	return ss[0]
}

// complete checks that every span received nests under a span received
// in the same trace (or is a root), within its parent's time.
func (rec received) complete(t *testing.T) {
	t.Helper()
	for _, sp := range rec.all {
		if sp.GetEndTimeUnixNano() < sp.GetStartTimeUnixNano() {
			t.Errorf("%s ends before it starts", sp.GetName())
		}
		if sp.ParentID() == "" {
			continue
		}
		p, ok := rec.byID[sp.ParentID()]
		switch {
		case !ok:
			t.Errorf("%s: parent %s never received", sp.GetName(), sp.ParentID())
		case p.TraceID() != sp.TraceID():
			t.Errorf("%s is in trace %s, its parent %s in %s", sp.GetName(), sp.TraceID(), p.GetName(), p.TraceID())
		case sp.GetStartTimeUnixNano() < p.GetStartTimeUnixNano() || sp.GetEndTimeUnixNano() > p.GetEndTimeUnixNano():
			t.Errorf("%s is not within its parent %s", sp.GetName(), p.GetName())
		}
	}
}

// TestExportNested: a cancel at the root of a depth-2 delegation (main →
// task1 → explore) exports every derived span once, over both protocols,
// nested as the conventions' tool-based transfer has it, each span an
// abort ended saying so.
func TestExportNested(t *testing.T) {
	for _, protocol := range []string{otel.ProtocolHTTP, otel.ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			r := receiver(t, protocol)
			cfg, evs := run(t, embedded(t, "cancel-reaches-descendants"), sim.Options{})
			want := derived(t, cfg, evs)
			e := exporter(t, otel.Config{Settings: otel.Settings{Protocol: protocol}, RootName: cfg.RootName, Model: "gpt-test", BaseURL: "https://user:pw@llm.example:8443/v1?key=k"})
			replay(t, cfg, evs, func(_ int, s ports.Step) { e.Observe(s) })
			shutdown(t, e)
			rec := index(t, r)
			if len(rec.all) != len(want) {
				t.Fatalf("%d spans received, %d derived", len(rec.all), len(want))
			}
			rec.complete(t)
			root := rec.one(t, "invoke_agent main")
			del := rec.one(t, "execute_tool delegate task1")
			task1 := rec.one(t, "invoke_agent task1")
			del2 := rec.one(t, "execute_tool delegate explore")
			explore := rec.one(t, "invoke_agent explore")
			for _, link := range [][2]otlptest.Span{{del, root}, {task1, del}, {del2, task1}, {explore, del2}} {
				if link[0].ParentID() != link[1].ID() {
					t.Errorf("%s's parent is %s, want %s", link[0].GetName(), link[0].ParentID(), link[1].GetName())
				}
			}
			if root.ParentID() != "" {
				t.Errorf("the root turn's span has a parent")
			}
			for _, sp := range rec.all {
				if sp.Str("gen_ai.operation.name") == "" || sp.Str("gen_ai.provider.name") != "openai" || sp.Str("gen_ai.conversation.id") != "conv-test" {
					t.Errorf("%s lacks its GenAI attributes: %v", sp.GetName(), sp.GetAttributes())
				}
				if strings.HasPrefix(sp.GetName(), "chat") {
					if sp.GetName() != "chat gpt-test" || sp.Str("gen_ai.request.model") != "gpt-test" || sp.Str("server.address") != "llm.example" || sp.Attr("server.port").GetIntValue() != 8443 {
						t.Errorf("chat span %s: %v", sp.GetName(), sp.GetAttributes())
					}
				}
			}
			for name, reason := range map[string]string{"invoke_agent main": "user_cancel", "invoke_agent task1": "parent_cancelled", "invoke_agent explore": "parent_cancelled"} {
				sp := rec.one(t, name)
				if sp.Str("error.type") != "interrupted" || sp.Str("escapement.reason") != reason || sp.GetStatus().GetCode() != 2 {
					t.Errorf("%s: error.type %q reason %q status %v", name, sp.Str("error.type"), sp.Str("escapement.reason"), sp.GetStatus())
				}
			}
			if del2.Str("gen_ai.transfer.target.name") != "explore" || del2.Str("gen_ai.agent.name") != "task1" {
				t.Errorf("delegation attributes: %v", del2.GetAttributes())
			}
			for _, sp := range rec.all {
				for _, kv := range sp.GetAttributes() {
					if strings.Contains(kv.GetKey(), "messages") || strings.Contains(kv.GetKey(), "call.arguments") || strings.Contains(kv.GetValue().GetStringValue(), "user:pw") {
						t.Errorf("%s carries %s without the opt-in", sp.GetName(), kv.GetKey())
					}
				}
			}
		})
	}
}

// TestContentOptIn: with the opt-in, a request's messages and answer are
// on its span, in the conventions' shape, and a secret in them is
// redacted.
func TestContentOptIn(t *testing.T) {
	const secret = "sk-otel-test-SECRET-0123456789"
	s, err := scenario.Load("content.yaml", []byte(`name: content
agents:
  main:
    - text: "the key was `+secret+`"
inputs:
  - {at: 0s, submit: "repeat `+secret+` please"}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := receiver(t, otel.ProtocolHTTP)
	cfg, evs := run(t, s, sim.Options{})
	e := exporter(t, otel.Config{Settings: otel.Settings{Protocol: otel.ProtocolHTTP, Content: true}, RootName: cfg.RootName, Redact: redact.New(secret).Redact})
	replay(t, cfg, evs, func(_ int, s ports.Step) { e.Observe(s) })
	shutdown(t, e)
	rec := index(t, r)
	chat := rec.one(t, "chat")
	in, out := chat.Str("gen_ai.input.messages"), chat.Str("gen_ai.output.messages")
	if !strings.Contains(in, `"role":"user","parts":[{"type":"text","content":"repeat `) {
		t.Errorf("input messages %s", in)
	}
	if !strings.HasPrefix(out, `[{"role":"assistant","parts":[{"type":"text","content":"the key was `) || !strings.HasSuffix(out, `"}],"finish_reason":"stop"}]`) {
		t.Errorf("output messages %s", out)
	}
	agent := rec.one(t, "invoke_agent main")
	if !strings.Contains(agent.Str("gen_ai.output.messages"), `"role":"assistant"`) || !strings.Contains(agent.Str("gen_ai.input.messages"), `"repeat `) {
		t.Errorf("the turn's span: %v", agent.GetAttributes())
	}
	for _, sp := range rec.all {
		for _, kv := range sp.GetAttributes() {
			if strings.Contains(kv.GetValue().GetStringValue(), "SECRET") {
				t.Errorf("%s: %s leaks the secret: %s", sp.GetName(), kv.GetKey(), kv.GetValue().GetStringValue())
			}
		}
	}
	if !strings.Contains(in, redact.Mask) {
		t.Errorf("the secret was not masked: %s", in)
	}
}

// TestCompactionContent: with the content opt-in, a compaction's
// summarising request reports the summary as its answer — not a message
// of the history the summary replaced, which a request's answer is read
// from — and the request after it its own answer.
func TestCompactionContent(t *testing.T) {
	r := receiver(t, otel.ProtocolHTTP)
	limits := kernel.DefaultLimits()
	limits.ContextWindow, limits.CompactPercent = 200, 80
	k := kernel.MustNew(kernel.Config{Limits: limits})
	e := exporter(t, otel.Config{Settings: otel.Settings{Protocol: otel.ProtocolHTTP, Content: true}, Model: "m"})
	var llm kernel.OpID
	step := func(ev kernel.Event) {
		effs := k.Step(ev)
		for _, f := range effs {
			if f.Kind == kernel.EffStartLLM {
				llm = f.Op
			}
		}
		e.Observe(ports.Step{Kernel: k, Event: ev, Effects: effs})
	}
	answer := func(at time.Duration, text string) {
		step(kernel.TextDelta(at, llm, 1, text))
		step(kernel.LLMEnd(at, llm))
	}
	// The first turn's question nearly fills the threshold; the second
	// request passes it, and the compaction keeps the first answer and the
	// new question as its tail.
	step(kernel.Submit(0, strings.Repeat("background ", 55)))
	answer(time.Second, "the first answer")
	step(kernel.Submit(2*time.Second, "and now?"))
	answer(3*time.Second, "the summary")
	answer(4*time.Second, "the second answer")
	shutdown(t, e)
	rec := index(t, r)
	chats := rec.named("chat m")
	var summary, second string
	for _, sp := range chats {
		switch {
		case sp.Str("escapement.compaction") == "threshold":
			summary = sp.Str("gen_ai.output.messages")
		case strings.Contains(sp.Str("gen_ai.input.messages"), "and now?"):
			second = sp.Str("gen_ai.output.messages")
		}
	}
	if len(chats) != 3 || !strings.Contains(summary, `"content":"the summary"`) || !strings.Contains(second, `"content":"the second answer"`) {
		t.Errorf("%d chat spans; the compaction's answer %s, the next request's %s", len(chats), summary, second)
	}
}

// TestRecoveredProcessEndsOpenSpans: a process crashes while a tool runs
// and a request streams; the recovered process replays the log, and the
// spans the crashed one held open end in it — the lost ops' with
// error.type lost — under the ids the crashed one gave them, so the two
// processes' exports together are every derived span, once, whole.
func TestRecoveredProcessEndsOpenSpans(t *testing.T) {
	s, err := scenario.Load("crash.yaml", []byte(`name: crash
limits: {turn_timeout: 30s}
agents:
  main:
    - calls: [{tool: quick, args: {n: 1}}, {tool: slow, args: {n: 2}}]
    - {text: done}
tools:
  quick: {duration: 100ms, result: quick result}
  slow: {duration: 5s, result: slow result}
inputs:
  - {at: 0s, submit: go}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := receiver(t, otel.ProtocolHTTP)
	_, ref := run(t, s, sim.Options{})
	crashAt := slices.IndexFunc(ref, func(ev kernel.Event) bool { return ev.Kind == kernel.EvToolResult }) + 1 // the quick tool answered; the slow one runs
	cfg, evs := run(t, s, sim.Options{CrashAt: []int{crashAt}})
	if evs[crashAt].Kind != kernel.EvRecover {
		t.Fatalf("step %d is %s, not the recovery", crashAt+1, evs[crashAt].Kind)
	}
	want := derived(t, cfg, evs)

	// The crashed process observed the steps before the crash and sent the
	// spans they ended; the recovered one replays them from its log, then
	// observes the recovery and the rest.
	// The crashed process ran from t0 on the kernel's clock; the recovered
	// one starts a minute after the crash.
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	crash := t0.Add(evs[crashAt-1].At)
	first := exporter(t, otel.Config{Settings: otel.Settings{Protocol: otel.ProtocolHTTP}, Now: func() time.Time { return t0 }})
	second := exporter(t, otel.Config{Settings: otel.Settings{Protocol: otel.ProtocolHTTP}, Now: func() time.Time { return crash.Add(time.Minute) }})
	second.SetCrashTime(crash)
	replay(t, cfg, evs, func(i int, s ports.Step) {
		if i < crashAt {
			first.Observe(s)
			second.Replay(s)
		} else {
			second.Observe(s)
		}
		if i == crashAt-1 {
			if err := first.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
	sentBefore := len(index(t, r).all)
	shutdown(t, second)
	shutdown(t, first) // the crashed process never ends its open spans

	rec := index(t, r)
	if len(rec.all) != len(want) || sentBefore == 0 || sentBefore == len(want) {
		t.Fatalf("%d spans received (%d before the crash), %d derived", len(rec.all), sentBefore, len(want))
	}
	rec.complete(t)
	slow := rec.named("execute_tool slow")
	if len(slow) != 1 || slow[0].Str("error.type") != "lost" || slow[0].Str("escapement.reason") != "crash" {
		t.Fatalf("the slow tool's span: %v", slow)
	}
	root, quick := rec.one(t, "invoke_agent main"), rec.one(t, "execute_tool quick")
	if slow[0].ParentID() != root.ID() || quick.ParentID() != root.ID() {
		t.Errorf("the spans of both processes do not share their turn's span")
	}
	// The spans keep their times across the crash; the downtime is in the
	// spans the crash cut (the root's, the lost tool's).
	if got := time.Unix(0, int64(root.GetStartTimeUnixNano())); !got.Equal(t0) {
		t.Errorf("the turn started at %v, want %v", got, t0)
	}
	if got := time.Unix(0, int64(slow[0].GetEndTimeUnixNano())); got.Sub(crash) < time.Minute {
		t.Errorf("the lost tool ended at %v, before the recovery (the crash was at %v)", got, crash)
	}
}

// TestObserveNeverWaitsForTheNetwork: a receiver that never answers holds
// up neither the observer nor, past its bound, the shutdown.
func TestObserveNeverWaitsForTheNetwork(t *testing.T) {
	release := make(chan struct{})
	r, err := otlptest.StartBlocked(release)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	t.Cleanup(func() { close(release) })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "1")
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "16")
	cfg, evs := run(t, embedded(t, "cancel-reaches-descendants"), sim.Options{})
	e := exporter(t, otel.Config{Settings: otel.Settings{Protocol: otel.ProtocolHTTP}})
	for range 200 {
		replay(t, cfg, evs, func(_ int, s ports.Step) { e.Observe(s) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := e.Shutdown(ctx); err == nil {
		t.Fatal("a shutdown against a receiver that never answers reported success")
	}
}

// TestContentToolCallOnly: an answer that is only a tool call is one
// tool_call part, with no empty text part beside it, on the request's span
// and in the next request's input; a tool's result is its response.
func TestContentToolCallOnly(t *testing.T) {
	s, err := scenario.Load("calls.yaml", []byte(`name: calls
agents:
  main:
    - calls:
        - {tool: job, args: {n: 1}}
    - text: "done"
tools:
  job: {duration: 1s, result: "ok"}
inputs:
  - {at: 0s, submit: "go"}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := receiver(t, otel.ProtocolHTTP)
	cfg, evs := run(t, s, sim.Options{})
	e := exporter(t, otel.Config{Settings: otel.Settings{Protocol: otel.ProtocolHTTP, Content: true}, RootName: cfg.RootName, Redact: redact.New().Redact})
	replay(t, cfg, evs, func(_ int, s ports.Step) { e.Observe(s) })
	shutdown(t, e)
	rec := index(t, r)
	var outs, ins []string
	for _, sp := range rec.all {
		if sp.GetName() == "chat" || strings.HasPrefix(sp.GetName(), "chat ") {
			outs, ins = append(outs, sp.Str("gen_ai.output.messages")), append(ins, sp.Str("gen_ai.input.messages"))
		}
	}
	call := regexp.MustCompile(`\{"role":"assistant","parts":\[\{"type":"tool_call","id":"[^"]+","name":"job","arguments":\{"n":1\}\}\]`)
	if !slices.ContainsFunc(outs, func(o string) bool {
		return call.MatchString(o) && strings.HasSuffix(o, `],"finish_reason":"tool_calls"}]`)
	}) {
		t.Errorf("no request answered with only the call: %q", outs)
	}
	if !slices.ContainsFunc(ins, func(in string) bool {
		return call.MatchString(in) && strings.Contains(in, `{"role":"tool","parts":[{"type":"tool_call_response","id":"`)
	}) {
		t.Errorf("no request was sent the call alone and its response: %q", ins)
	}
}

// TestRefusedExportsCountedAtExit: a collector that refuses the spans (a
// 400, which the exporter does not retry) is told once, when it first
// happens, and Shutdown's error counts the batches lost: a run that lost
// its telemetry says so at exit.
func TestRefusedExportsCountedAtExit(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no spans today", http.StatusBadRequest)
	}))
	defer refusing.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", refusing.URL)
	s, err := scenario.Load("refused.yaml", []byte("name: refused\nagents:\n  main:\n    - text: \"hello\"\ninputs:\n  - {at: 0s, submit: \"hi\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, evs := run(t, s, sim.Options{})
	var told []error
	e := exporter(t, otel.Config{Settings: otel.Settings{Protocol: otel.ProtocolHTTP}, RootName: cfg.RootName,
		Redact: redact.New().Redact, OnError: func(err error) { told = append(told, err) }})
	replay(t, cfg, evs, func(_ int, s ports.Step) { e.Observe(s) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = e.Shutdown(ctx)
	if err == nil || !regexp.MustCompile(`^OpenTelemetry: [1-9][0-9]* batch\(es\) of spans could not be exported$`).MatchString(err.Error()) {
		t.Errorf("Shutdown: %v, want the lost batches counted", err)
	}
	if len(told) != 1 || !strings.Contains(told[0].Error(), "OpenTelemetry: sending spans failed: ") {
		t.Errorf("told %v, want the first failure once", told)
	}
}
