package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

func TestPlainText(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Raw(": keep-alive")
		_ = w.Answer("Hello, world!", 4)
	})
	defer srv.Close()
	m := newModel(t, srv, nil)
	s := newSink()
	history := []kernel.Message{
		{Role: kernel.RoleSystem, Content: "be brief"},
		{Role: kernel.RoleUser, Content: "read it"},
		{Role: kernel.RoleAssistant, Content: "cut off", Partial: true},
		{Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "read_file", Arguments: `{"path":"a"}`}}},
		{Role: kernel.RoleTool, ToolCallID: "c1", Content: "", Synthetic: true},
		{Role: kernel.RoleUser, Content: "<turn_aborted …>", Marker: true},
	}
	if err := m.Stream(context.Background(), request(history...), s); err != nil {
		t.Fatal(err)
	}
	if got := s.text.String(); got != "Hello, world!" {
		t.Errorf("text %q", got)
	}
	if s.usage == nil || s.usage.PromptTokens != 10 {
		t.Errorf("usage %+v", s.usage)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.Auth != "Bearer "+apiKey || !r.Body.Stream || r.Body.Model != "fake-model" ||
		r.Body.StreamOptions == nil || !r.Body.StreamOptions.IncludeUsage {
		t.Errorf("request %s auth=%q body=%+v", r.Path, r.Auth, r.Body)
	}
	// Role, Content, ToolCalls (type function) and ToolCallID; no kernel flags.
	raw := string(r.Raw)
	for _, flag := range []string{"partial", "marker", "synthetic", "interjection"} {
		if strings.Contains(raw, `"`+flag+`"`) {
			t.Errorf("kernel flag %q sent to the model: %s", flag, raw)
		}
	}
	msgs := r.Body.Messages
	if len(msgs) != 6 || msgs[3].ToolCalls[0].Type != "function" || msgs[3].ToolCalls[0].Function.Name != "read_file" ||
		msgs[4].ToolCallID != "c1" || msgs[4].Content != "(empty)" || msgs[0].Role != "system" {
		t.Errorf("messages %+v", msgs)
	}
	var tl []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(r.Body.Tools, &tl); err != nil || len(tl) != 5 || tl[0].Type != "function" || tl[4].Function.Name != "delegate" {
		t.Errorf("tools %s (%v)", r.Body.Tools, err)
	}
}

// TestRequestOffersItsTools: a request that names its tools offers those,
// in place of the model's configured list; one that names none offers the
// configured list.
func TestRequestOffersItsTools(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("ok", 1)
	})
	defer srv.Close()
	m := newModel(t, srv, nil)
	req := request()
	req.Tools = []ports.ToolSpec{ports.DelegateSpec("")}
	if err := m.Stream(context.Background(), req, newSink()); err != nil {
		t.Fatal(err)
	}
	if err := m.Stream(context.Background(), request(), newSink()); err != nil {
		t.Fatal(err)
	}
	var names [2][]string
	for i, r := range srv.Requests() {
		var tl []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(r.Body.Tools, &tl); err != nil {
			t.Fatal(err)
		}
		for _, tool := range tl {
			names[i] = append(names[i], tool.Function.Name)
		}
	}
	if fmt.Sprint(names[0]) != "[delegate]" || len(names[1]) != 5 {
		t.Errorf("tools offered %v, then %v: want the request's [delegate], then the model's five", names[0], names[1])
	}
}

// TestToolCallsSplit: a call whose arguments arrive one byte per chunk is
// passed through as raw fragments that assemble to the whole call.
func TestToolCallsSplit(t *testing.T) {
	args := `{"path":"src/main.go"}`
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text("Reading.")
		_ = w.Call(0, "call_abc", "read_file", args, 1)
		_ = w.End("tool_calls")
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
		t.Fatal(err)
	}
	if len(s.calls) != len(args)+1 {
		t.Errorf("%d fragments, want %d (raw pass-through)", len(s.calls), len(args)+1)
	}
	got := s.assembled()
	if len(got) != 1 || got[0] != (kernel.ToolCall{ID: "call_abc", Name: "read_file", Arguments: args}) {
		t.Errorf("assembled %+v", got)
	}
}

// TestParallelToolCalls: two calls interleaved by index in one message run
// in parallel through the live driver, and the follow-up request carries
// both results.
func TestParallelToolCalls(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("both done", 100)
			return
		}
		_ = w.CallStart(0, "call_a", "grep")
		_ = w.CallStart(1, "call_b", "grep")
		_ = w.CallArgs(1, `{"pattern":"b",`)
		_ = w.CallArgs(0, `{"pattern":"a",`)
		_ = w.CallArgs(0, `"path":"."}`)
		_ = w.CallArgs(1, `"path":"."}`)
		_ = w.End("tool_calls")
	})
	defer srv.Close()
	var (
		mu      sync.Mutex
		running int
		peak    int
		both    = make(chan struct{})
		once    sync.Once
	)
	tl := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
		mu.Lock()
		running++
		peak = max(peak, running)
		if running == 2 {
			once.Do(func() { close(both) })
		}
		mu.Unlock()
		select { // both calls must be running at once
		case <-both:
		case <-time.After(10 * time.Second):
		}
		mu.Lock()
		running--
		mu.Unlock()
		return ports.ToolResult{Status: kernel.ToolOK, Content: "result of " + c.ID}
	})
	end, k := runTurn(t, newModel(t, srv, nil), tl, "search")
	if end.Outcome != kernel.OutcomeCompleted || end.Text != "both done" {
		t.Fatalf("turn %s %q", end.Outcome, end.Text)
	}
	if peak != 2 {
		t.Errorf("peak concurrency %d, want 2", peak)
	}
	reqs := srv.Requests()
	msgs := reqs[1].Body.Messages
	results := map[string]string{}
	for _, m := range msgs {
		if m.Role == "tool" {
			results[m.ToolCallID] = m.Content
		}
	}
	if results["call_a"] != "result of call_a" || results["call_b"] != "result of call_b" {
		t.Errorf("results %v", results)
	}
	if err := kernel.ValidateTranscript(k.Agent(kernel.Root).History(), false); err != nil {
		t.Error(err)
	}
}

// TestMalformedAndOddChunks: malformed tool arguments go back to the model
// as an error tool result (the kernel's doing; the adapter passes raw
// fragments), and odd chunks — empty choices, comments, a call without an
// index, a huge index (a sparse index is a call like any other), a second
// choice, unknown fields, a null content — never crash anything.
func TestMalformedAndOddChunks(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("sorry, fixed", 100)
			return
		}
		_ = w.Raw(": ping")
		_ = w.Raw(`event: something`)
		_ = w.Raw(`data: {"id":"x","object":"chat.completion.chunk","choices":[]}`)
		_ = w.Raw(`data: {"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}],"weird":{"a":1}}`)
		_ = w.Raw(`data: {"id":"x","choices":[{"index":1,"delta":{"content":"another choice"},"finish_reason":"stop"}]}`)
		_ = w.Raw(`data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":99999,"id":"huge","type":"function","function":{"name":"read_file","arguments":"{}"}}]},"finish_reason":null}]}`)
		_ = w.Call(0, "call_bad", "read_file", `{"path": "a.txt"`, 5) // truncated JSON
		_ = w.Raw(`data: {"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_noidx","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}}]},"finish_reason":null}]}`)
		_ = w.End("tool_calls")
	})
	defer srv.Close()
	var ran []string
	var mu sync.Mutex
	tl := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
		mu.Lock()
		ran = append(ran, c.Name+" "+c.Arguments)
		mu.Unlock()
		return ports.ToolResult{Status: kernel.ToolOK, Content: "listing"}
	})
	end, _ := runTurn(t, newModel(t, srv, nil), tl, "go")
	if end.Outcome != kernel.OutcomeCompleted || end.Text != "sorry, fixed" {
		t.Fatalf("turn %s %q", end.Outcome, end.Text)
	}
	sort.Strings(ran)
	if len(ran) != 2 || ran[0] != `list_dir {"path":"."}` || ran[1] != `read_file {}` {
		t.Errorf("tools run: %v (the malformed call must not run; the index-less and the huge-index ones must)", ran)
	}
	var toolMsgs []fakeopenai.Message
	for _, m := range srv.Requests()[1].Body.Messages {
		if m.Role == "tool" {
			toolMsgs = append(toolMsgs, m)
		}
	}
	sort.Slice(toolMsgs, func(i, j int) bool { return toolMsgs[i].ToolCallID < toolMsgs[j].ToolCallID })
	if len(toolMsgs) != 3 || toolMsgs[0].ToolCallID != "call_bad" || !strings.Contains(toolMsgs[0].Content, "arguments are not valid JSON") {
		t.Errorf("tool messages %+v", toolMsgs)
	}
}

// TestDelegationThreeDeep: main delegates to a child, which delegates to a
// grandchild, which delegates to a great-grandchild — every agent talking
// to the same server — and each typed result travels back up.
func TestDelegationThreeDeep(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		task := r.Body.FirstUser()
		if last := r.Body.Last(); last.Role == "tool" {
			_ = w.Answer("done with "+task+" because "+last.Content, 16)
			return
		}
		var level int
		fmt.Sscanf(task, "level %d", &level)
		if level == 3 {
			_ = w.Answer("leaf reached", 4)
			return
		}
		args := fmt.Sprintf(`{"task":"level %d","name":"L%d"}`, level+1, level+1)
		_ = w.Call(0, fmt.Sprintf("call_%d", level), "delegate", args, 7)
		_ = w.End("tool_calls")
	})
	defer srv.Close()
	// Each child is read in the step its turn ends: it is freed after.
	type seen struct {
		path, summary string
		depth         int
		err           error
	}
	var ended []seen
	observe := func(s ports.Step) {
		for _, e := range s.Effects {
			if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded {
				a := s.Kernel.Agent(e.Life.Agent)
				ended = append(ended, seen{a.Path(), a.Summary(), a.Depth(), kernel.ValidateTranscript(a.History(), false)})
			}
		}
	}
	end, k := runTurnObserved(t, newModel(t, srv, nil), ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult {
		t.Error("delegate reached the tools")
		return ports.ToolResult{}
	}), "level 0", observe)
	if end.Outcome != kernel.OutcomeCompleted {
		t.Fatalf("outcome %s", end.Outcome)
	}
	if k.NumAgents() != 4 || len(ended) != 4 {
		t.Fatalf("%d agents, %d turn ends; want 4", k.NumAgents(), len(ended))
	}
	if leaf := ended[0]; leaf.path != "main/L1/L2/L3" || leaf.depth != 3 || leaf.summary != "leaf reached" {
		t.Errorf("leaf %s depth %d %q", leaf.path, leaf.depth, leaf.summary)
	}
	for _, a := range ended {
		if a.err != nil {
			t.Errorf("agent %s: %v", a.path, a.err)
		}
	}
	if k.HeldAgents() != 1 {
		t.Errorf("the tree holds %d agents after the turn; every child should be freed", k.HeldAgents())
	}
	if !strings.Contains(end.Text, `"type":"agent_result"`) || !strings.Contains(end.Text, `"agent":"L1"`) {
		t.Errorf("root answer lacks L1's typed result: %s", end.Text)
	}
	if n := len(srv.Requests()); n != 7 {
		t.Errorf("%d requests, want 7 (one delegating and one closing per level, one leaf)", n)
	}
}

// cancelLatency runs one stream against a server that streams forever,
// cancels it after the first token, and returns how long the server took
// to see the connection close.
func cancelLatency(tb testing.TB, srv *fakeopenai.Server, m *openai.Model) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := newSink()
	errc := make(chan error, 1)
	go func() { errc <- m.Stream(ctx, request(), s) }()
	select {
	case <-s.first:
	case <-time.After(10 * time.Second):
		tb.Fatal("no first token")
	}
	n := len(srv.Requests())
	cancelledAt := time.Now()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		tb.Fatalf("Stream after cancel: %v", err)
	}
	// Only a guard against hanging forever: the server's stream never ends
	// by itself, so a close it sees is the cancel's.
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	err := srv.WaitFor(wctx, func(rs []fakeopenai.Request) bool { return !rs[n-1].Closed.IsZero() })
	if err != nil {
		tb.Fatalf("server never saw the connection close: %v", err)
	}
	return srv.Requests()[n-1].Closed.Sub(cancelledAt)
}

func foreverServer() *fakeopenai.Server {
	return fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Forever(ctx, "tick ", 5*time.Millisecond)
	})
}

// TestCancelClosesConnection: cancelling a stream that would never end
// closes the HTTP connection: the server, which would stream forever, sees
// it close. How fast is a benchmark's question, never a test's (a shared
// machine can stall any process for seconds): BenchmarkCancelToServerClose.
// The latencies are logged.
func TestCancelClosesConnection(t *testing.T) {
	srv := foreverServer()
	defer srv.Close()
	m := newModel(t, srv, nil)
	var lat []time.Duration
	for range 20 {
		lat = append(lat, cancelLatency(t, srv, m))
	}
	slices.Sort(lat)
	t.Logf("cancel → server sees close: median %v, min %v, max %v over %d runs", lat[len(lat)/2], lat[0], lat[len(lat)-1], len(lat))
}

// BenchmarkCancelToServerClose measures the cancel → server-sees-close
// latency (one cancelled stream per op) and reports its median and mean:
//
//	go test -run '^$' -bench CancelToServerClose -benchtime 50x -count 5 ./adapters/openai/
func BenchmarkCancelToServerClose(b *testing.B) {
	srv := foreverServer()
	defer srv.Close()
	m, err := openai.New(openai.Config{BaseURL: srv.BaseURL(), Model: "m"})
	if err != nil {
		b.Fatal(err)
	}
	var lat []time.Duration
	for b.Loop() {
		lat = append(lat, cancelLatency(b, srv, m))
	}
	var total time.Duration
	for _, l := range lat {
		total += l
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "median-close-ns")
	b.ReportMetric(float64(total.Nanoseconds())/float64(len(lat)), "mean-close-ns")
}

// TestCancelWhileStalled: a server that sends its headers and then nothing
// (a cold model load) is left at once on cancel: Stream returns the
// cancellation and the server sees the connection close.
func TestCancelWhileStalled(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Stall(ctx)
	})
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- newModel(t, srv, nil).Stream(ctx, request(), newSink()) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second) // generous bound
	defer wcancel()
	if err := srv.WaitFor(wctx, func(rs []fakeopenai.Request) bool { return len(rs) == 1 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Stream after cancel: %v", err)
	}
	if err := srv.WaitFor(wctx, func(rs []fakeopenai.Request) bool { return !rs[0].Closed.IsZero() }); err != nil {
		t.Errorf("server never saw the connection close: %v", err)
	}
}
