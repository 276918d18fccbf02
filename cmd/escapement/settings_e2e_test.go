package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/fakeopenai"
)

// Usage, model settings, structured output and reasoning end to end: the
// binary against a loopback server, every --json line checked against the
// protocol's schema (jsonRun).

// TestJSONUsageE2E: `run --json` with a tool call: each request's
// op_ended carries the usage its server reported (OpenAI's breakdown:
// cached input, reasoning output), or null when the server sent none; the
// turn's turn_ended and the result carry the total, counting the request
// that reported nothing as unreported, never as 0 tokens. The request
// asked for usage (stream_options.include_usage).
func TestJSONUsageE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "user" {
			_ = w.Call(0, "call_ls", "list_dir", `{"path":"."}`, 5)
			_ = w.Finish("tool_calls")
			_ = w.UsageDetail(1200, 40, 1024, 16)
			_ = w.Done()
			return
		}
		_ = w.Text("one file")
		_ = w.Finish("stop")
		_ = w.Done() // no usage
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "run", "--json", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir, "what is here?")
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	var ends []protocol.Event
	evs := jsonRun(t, p.stdout.String())
	for _, ev := range evs {
		if ev.Type == protocol.TypeOpEnded && ev.OpKind == protocol.OpRequest {
			ends = append(ends, ev)
		}
	}
	if len(ends) != 2 {
		t.Fatalf("%d request ends, want 2:\n%s", len(ends), p.stdout)
	}
	if u := ends[0].Usage; u == nil || *u != (protocol.Usage{PromptTokens: 1200, CompletionTokens: 40, CachedTokens: 1024, ReasoningTokens: 16, Requests: 1}) {
		t.Errorf("the first request's usage: %+v", u)
	}
	if u := ends[1].Usage; u != nil {
		t.Errorf("the second request reported nothing, its op_ended says %+v", u)
	}
	want := protocol.Usage{PromptTokens: 1200, CompletionTokens: 40, CachedTokens: 1024, ReasoningTokens: 16, Requests: 2, Unreported: 1}
	turn, _ := lastOf(evs, protocol.TypeTurnEnded, "main")
	if turn.Usage == nil || *turn.Usage != want {
		t.Errorf("turn_ended usage %+v, want %+v", turn.Usage, want)
	}
	if res := evs[len(evs)-1]; res.Usage == nil || *res.Usage != want {
		t.Errorf("result usage %+v, want %+v", res.Usage, want)
	}
	for _, r := range srv.Requests() {
		if r.Body.StreamOptions == nil || !r.Body.StreamOptions.IncludeUsage {
			t.Errorf("request %d did not ask for usage", r.N)
		}
	}
}

// schemaFile writes the output schema of the structured-output tests.
func schemaFile(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "city.schema.json")
	putFile(t, path, `{"type":"object","required":["city","population"],"additionalProperties":false,
"properties":{"city":{"type":"string"},"population":{"type":"integer","minimum":0}}}`)
	return path
}

// TestOutputSchemaE2E: `run --output-schema FILE` sends the schema as
// response_format (json_schema, named after the file) with the other model
// settings the flags give, and checks the final answer: a valid one exits
// 0 with the answer on stdout; an invalid one exits 1, saying where the answer is invalid — on stderr, and with
// --json as an error event (source output_schema) before a result whose
// outcome is failed — and -o keeps nothing.
func TestOutputSchemaE2E(t *testing.T) {
	bin := buildBinary(t)
	var answer atomic.Value // the server's answer: a string
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer(answer.Load().(string), 7)
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	schema := schemaFile(t, dir)

	valid := `{"city":"Oslo","population":709000}`
	answer.Store(valid)
	p := startBinary(t, bin, srv, dir, "run", "--session", os.DevNull, "--workspace", dir, "--output-schema", schema, "--temperature", "0", "--max-output-tokens", "300",
		"--tool-choice", "none", "--extra-body", `{"seed":7}`, "which city?")
	if code := p.wait(t); code != exitOK || !strings.Contains(p.stdout.String(), valid) {
		t.Fatalf("a valid answer: exit %d\nstdout: %s\nstderr: %s", code, p.stdout, p.stderr)
	}
	body := srv.Requests()[0].Body
	if raw := string(srv.Requests()[0].Raw); !strings.Contains(raw, `"seed":7`) || string(body.ToolChoice) != `"none"` {
		t.Errorf("--extra-body and --tool-choice not sent: %s", raw)
	}
	var format struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(body.ResponseFormat, &format); err != nil || format.Type != "json_schema" || format.JSONSchema.Name != "city_schema" || !strings.Contains(string(format.JSONSchema.Schema), `"population"`) {
		t.Errorf("response_format %s (%v)", body.ResponseFormat, err)
	}
	if body.Temperature == nil || *body.Temperature != 0 || body.MaxTokens != 300 {
		t.Errorf("model settings sent: temperature %v, max_tokens %d", body.Temperature, body.MaxTokens)
	}

	answer.Store(`{"city":"Oslo","population":-3,"mayor":"?"}`)
	out := filepath.Join(dir, "answer.json")
	p = startBinary(t, bin, srv, dir, "run", "--json", "--session", os.DevNull, "--workspace", dir, "--output-schema", schema, "-o", out, "which city?")
	if code := p.wait(t); code != exitCheckFailed {
		t.Fatalf("an invalid answer: exit %d, want %d\nstderr: %s", code, exitCheckFailed, p.stderr)
	}
	evs := jsonRun(t, p.stdout.String())
	bad, ok := lastOf(evs, protocol.TypeError, "")
	if !ok || bad.Source != protocol.SourceOutputSchema || !strings.Contains(bad.Message, "/population") || !strings.Contains(bad.Message, "mayor") {
		t.Fatalf("the error event: %+v\n%s", bad, p.stdout)
	}
	if !strings.Contains(p.stderr.String(), "does not match the output schema") {
		t.Errorf("stderr does not say why: %s", p.stderr)
	}
	if res := evs[len(evs)-1]; res.Outcome != "failed" || res.Detail != bad.Message || res.Answer == "" {
		t.Errorf("the result: outcome %q, detail %q, answer %q", res.Outcome, res.Detail, res.Answer)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("-o kept an invalid answer: %v", err)
	}
}

// TestOutputSchemaFlagErrors: a schema file that is missing or not a
// schema, and bad model settings, are usage errors naming the flag;
// nothing is sent.
func TestOutputSchemaFlagErrors(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("{}", 2) })
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "bad.json"), `{"type": 12}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--output-schema", filepath.Join(dir, "missing.json")}, "--output-schema"},
		{[]string{"--output-schema", filepath.Join(dir, "bad.json")}, "--output-schema"},
		{[]string{"--temperature", "hot"}, "--temperature"},
		{[]string{"--extra-body", "[1]"}, "--extra-body"},
		{[]string{"--extra-body", `{"model":"x"}`}, "model"},
		{[]string{"--reasoning", "some"}, "--reasoning"},
	} {
		p := startBinary(t, bin, srv, dir, append([]string{"run", "--session", os.DevNull, "--workspace", dir, "hi"}, c.args...)...)
		if code := p.wait(t); code != exitUsage || !strings.Contains(p.stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %s", c.args, code, p.stderr)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestDeepSeekReasoningSentBackE2E: a DeepSeek-style exchange through the
// CLI — the model thinks (reasoning_content) and calls a tool; the
// follow-up request carries that reasoning back on the assistant message
// with the call (the server refuses it otherwise, as DeepSeek's thinking
// mode does), and the reasoning is never shown; with --reasoning off it is
// not sent back, and the server's refusal is what the run reports.
func TestDeepSeekReasoningSentBackE2E(t *testing.T) {
	bin := buildBinary(t)
	const thought = "The user wants the files; list the directory first."
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "user" {
			_ = w.Reasoning(thought[:20])
			_ = w.Reasoning(thought[20:])
			_ = w.Call(0, "call_ls", "list_dir", `{"path":"."}`, 5)
			_ = w.End("tool_calls")
			return
		}
		for _, m := range r.Body.Messages {
			if len(m.ToolCalls) > 0 && m.ReasoningContent != thought {
				w.Status(400, `{"error":{"message":"The reasoning_content in the thinking mode must be passed back to the API.","type":"invalid_request_error","code":"invalid_request_error"}}`)
				return
			}
		}
		_ = w.Answer("There is one file.", 5)
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	putFile(t, filepath.Join(dir, "notes.txt"), "hello")
	p := startBinary(t, bin, srv, dir, "run", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir, "what is here?")
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var carried int
	for _, m := range reqs[1].Body.Messages {
		if m.Role == "assistant" && len(m.ToolCalls) == 1 && m.ReasoningContent == thought {
			carried++
		}
	}
	if carried != 1 {
		t.Errorf("the follow-up request does not carry the reasoning back on the call's message:\n%s", reqs[1].Raw)
	}
	if strings.Contains(p.stdout.String()+p.stderr.String(), "list the directory first") {
		t.Errorf("the reasoning was shown:\nstdout: %s\nstderr: %s", p.stdout, p.stderr)
	}
	// --reasoning off sends none back: this server refuses the follow-up,
	// and the run says why.
	p = startBinary(t, bin, srv, dir, "run", "--session", os.DevNull, "--workspace", dir, "--reasoning", "off", "what is here?")
	if code := p.wait(t); code != exitCheckFailed || !strings.Contains(p.stderr.String(), "must be passed back") {
		t.Errorf("--reasoning off: exit %d\nstderr: %s", code, p.stderr)
	}
}
