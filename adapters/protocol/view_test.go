package protocol_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/protocheck"
	"github.com/escapement/escapement/kernel"
)

// treeModel: the root reads a file and delegates in one message; the
// helper calls a tool that fails, then answers; the root answers. Every
// request but the root's last reports usage.
func treeModel(ctx context.Context, req ports.Request, sink ports.Sink) error {
	last := req.Messages[len(req.Messages)-1]
	switch {
	case req.Agent == kernel.Root && last.Role == kernel.RoleUser:
		sink.Text("Let me look.")
		sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "read", Args: `{"path":"x"}`})
		sink.Call(kernel.CallDelta{Index: 1, ID: "c2", Name: kernel.DefaultDelegateTool, Args: `{"task":"find it","name":"helper"}`})
		sink.Usage(kernel.Usage{PromptTokens: 10, CompletionTokens: 5})
	case req.Agent == kernel.Root:
		sink.Text("done")
	case last.Role == kernel.RoleUser:
		sink.Call(kernel.CallDelta{Index: 0, ID: "h1", Name: "fail", Args: `{}`})
		sink.Usage(kernel.Usage{PromptTokens: 3, CompletionTokens: 2})
	default:
		sink.Text("found")
		sink.Usage(kernel.Usage{PromptTokens: 4, CompletionTokens: 1})
	}
	return nil
}

func treeTools(ctx context.Context, c ports.Call) ports.ToolResult {
	if c.Name == "fail" {
		return ports.ToolResult{Status: kernel.ToolError, Content: "error: fail: x: no such file or directory"}
	}
	return ports.ToolResult{Content: strings.Repeat("é", protocol.TextCap)} // over the cap, in two-byte runes
}

// runView runs one turn of prompt live, viewing every step, and returns
// the encoded lines, started first and result last.
func runView(t *testing.T, model ports.ModelFunc, tools ports.ToolsFunc, prompt string) string {
	t.Helper()
	var (
		out  bytes.Buffer
		mu   sync.Mutex
		view = protocol.NewView()
		enc  = protocol.NewEncoder(&out, func(s string) string { return strings.ReplaceAll(s, "SECRET-0123456789", "[redacted]") })
	)
	ended := make(chan struct{})
	limits := kernel.DefaultLimits()
	enc.Encode(protocol.Started(protocol.Run{Version: "test", Model: "m", Endpoint: "https://u:SECRET-0123456789@example.test/v1?key=SECRET-0123456789", Session: "s.jsonl", Tools: []string{"read"}, Limits: limits}))
	d, err := live.New(live.Config{Kernel: kernel.Config{Limits: limits}, Model: model, Tools: tools, Observer: func(st ports.Step) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range view.Step(st, nil) {
			if err := enc.Encode(ev); err != nil {
				t.Error(err)
			}
			if ev.Type == protocol.TypeTurnEnded && ev.Agent == "main" {
				close(ended)
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	if err := d.Submit(ctx, prompt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatalf("the turn never ended:\n%s", out.String())
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	enc.Encode(view.Result("s.jsonl"))
	return out.String()
}

// find returns the events of type typ matching keep.
func find(evs []protocol.Event, typ string, keep func(protocol.Event) bool) []protocol.Event {
	var got []protocol.Event
	for _, ev := range evs {
		if ev.Type == typ && (keep == nil || keep(ev)) {
			got = append(got, ev)
		}
	}
	return got
}

// TestViewOfATree: a turn that calls a tool, delegates, and whose child's
// tool fails is printed as valid protocol lines that say everything: the
// transitions from Idle on Submit, the calls' arguments and results (a
// long one cut), each request's usage and each turn's total (the child's
// inside the root's, the root's last request unreported), the agents by
// path, no -1 for "no child", the endpoint without its credentials, and a
// result with the answer and the run's totals.
func TestViewOfATree(t *testing.T) {
	out := runView(t, treeModel, treeTools, "go")
	evs := protocheck.Lines(t, out)
	if strings.Contains(out, "-1") || strings.Contains(out, "SECRET") {
		t.Errorf("a -1 or a secret in the output:\n%s", out)
	}
	if first, last := evs[0], evs[len(evs)-1]; first.Type != protocol.TypeStarted || last.Type != protocol.TypeResult {
		t.Fatalf("first %s, last %s", first.Type, last.Type)
	}
	if got := evs[0].Endpoint; got != "https://example.test/v1" {
		t.Errorf("endpoint %q", got)
	}
	if tr := find(evs, protocol.TypeTransition, func(e protocol.Event) bool { return e.Agent == "main" }); len(tr) == 0 || tr[0].From != "Idle" || tr[0].Trigger != "Submit" || tr[0].To != "Streaming" {
		t.Errorf("the root's first transition: %+v", tr)
	}
	read := find(evs, protocol.TypeToolStarted, func(e protocol.Event) bool { return e.Tool == "read" })
	if len(read) != 1 || read[0].Arguments != `{"path":"x"}` || read[0].Truncated || read[0].CallID != "c1" {
		t.Errorf("tool_started of read: %+v", read)
	}
	done := find(evs, protocol.TypeCallFinished, nil)
	byCall := map[string]protocol.Event{}
	for _, e := range done {
		byCall[e.CallID] = e
	}
	if r := byCall["c1"]; !r.Truncated || len(r.Result) > protocol.TextCap || !strings.HasPrefix(r.Result, "éé") || r.Status != "ok" || r.Child != "" {
		t.Errorf("read's result: truncated %v, %d bytes, status %s, child %q", r.Truncated, len(r.Result), r.Status, r.Child)
	}
	if r := byCall["h1"]; r.Agent != "main/helper" || r.Status != "error" || r.Reason != "tool_error" || r.Result != "error: fail: x: no such file or directory" {
		t.Errorf("the helper's failed call: %+v", r)
	}
	if r := byCall["c2"]; r.Status != "child" || r.Child != "main/helper" || r.Outcome != "completed" {
		t.Errorf("the delegation's result: %+v", r)
	}
	var reported int
	for _, e := range find(evs, protocol.TypeOpEnded, nil) {
		if e.OpKind == "" {
			t.Errorf("op_ended without its kind: %+v", e)
		}
		if e.Usage != nil {
			reported++
		}
	}
	if reported != 3 {
		t.Errorf("%d requests' ends carry usage, want 3", reported)
	}
	want := protocol.Usage{PromptTokens: 17, CompletionTokens: 8, Requests: 4, Unreported: 1}
	child := find(evs, protocol.TypeTurnEnded, func(e protocol.Event) bool { return e.Agent == "main/helper" })
	root := find(evs, protocol.TypeTurnEnded, func(e protocol.Event) bool { return e.Agent == "main" })
	if len(child) != 1 || *child[0].Usage != (protocol.Usage{PromptTokens: 7, CompletionTokens: 3, Requests: 2}) {
		t.Errorf("the helper's turn: %+v", child)
	}
	if len(root) != 1 || *root[0].Usage != want || root[0].Text != "done" || root[0].Outcome != "completed" {
		t.Errorf("the root's turn: %+v", root)
	}
	res := evs[len(evs)-1]
	if res.Outcome != "completed" || res.Answer != "done" || res.Turns != 1 || res.Requests != 4 || *res.Usage != want || res.Resume != "escapement run --resume s.jsonl" {
		t.Errorf("result %+v", res)
	}
}

// TestViewNullsAndCancel: a cancelled turn's events validate too (reason
// set, a timed-out-free turn, a call closed without starting its op); a
// run with no turn ends with a null outcome.
func TestViewResultWithoutTurn(t *testing.T) {
	var out bytes.Buffer
	enc := protocol.NewEncoder(&out, nil)
	enc.Encode(protocol.NewView().Result("/tmp/a b's.jsonl"))
	evs := protocheck.Lines(t, out.String())
	if !strings.Contains(out.String(), `"outcome":null,"reason":null,"detail":null,"answer":""`) {
		t.Errorf("result without a turn: %s", out.String())
	}
	if got := evs[0].Resume; got != `escapement run --resume '/tmp/a b'\''s.jsonl'` {
		t.Errorf("resume %s", got)
	}
}

// TestMarshalWritesEveryField: every field of a type is written, zero or
// not, and a nullable zero as null; an unknown type is an error.
func TestMarshalWritesEveryField(t *testing.T) {
	b, err := json.Marshal(protocol.Event{Type: protocol.TypeTransition, Seq: 1, Agent: "main", From: "Idle", Trigger: "Submit", To: "Streaming"})
	if err != nil || string(b) != `{"type":"transition","seq":1,"elapsed_ms":0,"agent":"main","turn":0,"from":"Idle","trigger":"Submit","to":"Streaming"}` {
		t.Errorf("%s %v", b, err)
	}
	b, _ = json.Marshal(protocol.Event{Type: protocol.TypeCallFinished, Seq: 1, Agent: "main", Turn: 1, CallID: "c", Tool: "t", Status: "refused", Reason: "max_calls"})
	if want := `{"type":"call_finished","seq":1,"elapsed_ms":0,"agent":"main","turn":1,"op":null,"call_id":"c","tool":"t","status":"refused","reason":"max_calls","result":"","truncated":false,"child":null,"outcome":null}`; string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	if _, err := json.Marshal(protocol.Event{Type: "nope"}); err == nil {
		t.Error("an unknown type marshalled")
	}
}

// TestSchemaRefusesTheDump: the lines --json printed before the protocol,
// and lines that drop a zero or use a stand-in for "none", fail the
// schema, so a test that validates every line catches them.
func TestSchemaRefusesTheDump(t *testing.T) {
	for _, line := range []string{
		`{"seq":3,"at":0,"kind":"transition","agent":0,"from":"Streaming","trigger":"StreamText"}`,
		`{"type":"transition","seq":3,"elapsed_ms":0,"agent":"main","turn":1,"from":"Streaming","trigger":"StreamText"}`,
		`{"type":"call_finished","seq":9,"elapsed_ms":0,"agent":"main","turn":1,"op":4,"call_id":"c1","tool":"ls","status":"ok","reason":null,"result":"","truncated":false,"child":-1,"outcome":null}`,
		`{"type":"call_finished","seq":9,"elapsed_ms":0,"agent":"main","turn":1,"op":0,"call_id":"c1","tool":"ls","status":"refused","reason":"max_calls","result":"","truncated":false,"child":null,"outcome":null}`,
		`{"type":"turn_ended","seq":9,"elapsed_ms":0,"agent":"main","turn":1,"outcome":"completed","reason":"","text":"hi","detail":null,"usage":{"prompt_tokens":1,"completion_tokens":1,"cached_tokens":0,"reasoning_tokens":0,"requests":1,"unreported":0}}`,
		`{"type":"delta","seq":5,"elapsed_ms":0,"agent":"main","turn":1,"op":2,"text":"x","extra":1}`,
		`{"type":"nope","seq":1,"elapsed_ms":0}`,
	} {
		if protocheck.Event([]byte(line)) == nil {
			t.Errorf("the schema accepts %s", line)
		}
	}
}
