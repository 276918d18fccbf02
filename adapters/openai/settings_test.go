package openai_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

var schema = json.RawMessage(`{"type":"object","properties":{"port":{"type":"string"}},"required":["port"]}`)

func zero() *float64 { v := 0.0; return &v }

// TestModelSettingsSent: the model settings reach the request body — a
// temperature of 0, the output-token limit in its field, the tool choice
// and the structured-output format on the root's requests only, the extra
// fields merged (replacing the adapter's) — and a compaction's summarising
// request goes without tools, tool choice or format; include_usage always.
func TestModelSettingsSent(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer(`{"port":"Ashby"}`, 3)
	})
	defer srv.Close()
	m := newModel(t, srv, func(c *openai.Config) {
		c.Temperature = zero()
		c.MaxOutputTokens = 512
		c.ToolChoice = "required"
		c.OutputSchema, c.OutputSchemaName = schema, "port"
		c.Extra = json.RawMessage(`{"top_p":0.5,"max_tokens":99,"thinking":{"type":"enabled"}}`)
		c.Tools = []ports.ToolSpec{{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)}}
	})
	for _, req := range []ports.Request{
		{Agent: kernel.Root, Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "which port?"}}},
		{Agent: 1, Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "a child's task"}}},
		{Agent: kernel.Root, Compaction: true, Messages: []kernel.Message{{Role: kernel.RoleUser, Content: "summarise"}}},
	} {
		if err := m.Stream(context.Background(), req, newSink()); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	root, child, compact := bodyOf(t, reqs[0]), bodyOf(t, reqs[1]), bodyOf(t, reqs[2])
	for name, b := range map[string]map[string]any{"root": root, "child": child, "compaction": compact} {
		if b["temperature"] != 0.0 || b["max_tokens"] != 99.0 || b["top_p"] != 0.5 || b["stream"] != true ||
			!reflect.DeepEqual(b["stream_options"], map[string]any{"include_usage": true}) ||
			!reflect.DeepEqual(b["thinking"], map[string]any{"type": "enabled"}) || b["model"] != "fake-model" {
			t.Errorf("%s request: %v", name, b)
		}
	}
	if root["tool_choice"] != "required" || root["tools"] == nil {
		t.Errorf("root: tool_choice %v, tools %v", root["tool_choice"], root["tools"])
	}
	format := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "port",
		"schema": map[string]any{"type": "object", "properties": map[string]any{"port": map[string]any{"type": "string"}}, "required": []any{"port"}}}}
	if !reflect.DeepEqual(root["response_format"], format) {
		t.Errorf("root response_format %v", root["response_format"])
	}
	if child["tool_choice"] != nil || child["response_format"] != nil || child["tools"] == nil {
		t.Errorf("child: %v", child)
	}
	if compact["tools"] != nil || compact["tool_choice"] != nil || compact["response_format"] != nil {
		t.Errorf("compaction request: %v", compact)
	}
}

// TestOutputTokensField: the output-token limit goes in
// max_completion_tokens on OpenAI's API and in max_tokens elsewhere, unless
// the field is chosen; a forced tool is sent as a function choice; with no
// setting nothing is sent (the server's defaults hold).
func TestOutputTokensField(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("ok", 1) })
	defer srv.Close()
	for _, tc := range []struct {
		name string
		cfg  func(*openai.Config)
		want map[string]any
		none []string
	}{
		{"defaults", nil, nil, []string{"temperature", "max_tokens", "max_completion_tokens", "tool_choice", "response_format"}},
		{"elsewhere", func(c *openai.Config) { c.MaxOutputTokens = 7 }, map[string]any{"max_tokens": 7.0}, []string{"max_completion_tokens"}},
		{"chosen", func(c *openai.Config) { c.MaxOutputTokens = 7; c.OutputTokensField = openai.FieldMaxCompletionTokens },
			map[string]any{"max_completion_tokens": 7.0}, []string{"max_tokens"}},
		{"forced tool", func(c *openai.Config) {
			c.Tools = []ports.ToolSpec{{Name: "lookup", Parameters: json.RawMessage(`{}`)}}
			c.ToolChoice = "lookup"
		}, map[string]any{"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "lookup"}}}, nil},
		{"json_object", func(c *openai.Config) { c.OutputSchema, c.StructuredOutput = schema, openai.StructuredJSONObject },
			map[string]any{"response_format": map[string]any{"type": "json_object"}}, nil},
		{"validate only", func(c *openai.Config) { c.OutputSchema, c.StructuredOutput = schema, openai.StructuredNone },
			nil, []string{"response_format"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(srv.Requests())
			if err := newModel(t, srv, tc.cfg).Stream(context.Background(), request(), newSink()); err != nil {
				t.Fatal(err)
			}
			b := bodyOf(t, srv.Requests()[before])
			for k, v := range tc.want {
				if !reflect.DeepEqual(b[k], v) {
					t.Errorf("%s = %v, want %v", k, b[k], v)
				}
			}
			for _, k := range tc.none {
				if _, ok := b[k]; ok {
					t.Errorf("%s sent: %v", k, b[k])
				}
			}
		})
	}
	m, err := openai.New(openai.Config{Model: "gpt", BaseURL: "https://api.openai.com/v1", MaxOutputTokens: 9})
	if err != nil || m == nil {
		t.Fatal(err)
	}
}

// TestModelSettingsRefused: a bad setting is refused when the model is
// built, naming it.
func TestModelSettingsRefused(t *testing.T) {
	hot := 2.5
	for _, tc := range []struct {
		cfg  func(*openai.Config)
		says string
	}{
		{func(c *openai.Config) { c.Temperature = &hot }, "temperature 2.5"},
		{func(c *openai.Config) { c.MaxOutputTokens = -1 }, "output-token limit -1"},
		{func(c *openai.Config) { c.OutputTokensField = "max_output" }, `output-token field "max_output"`},
		{func(c *openai.Config) { c.ToolChoice = "hammer" }, `tool choice "hammer"`},
		{func(c *openai.Config) { c.Extra = json.RawMessage(`[1]`) }, "must be a JSON object"},
		{func(c *openai.Config) { c.Extra = json.RawMessage(`{"messages":[]}`) }, `may not set "messages"`},
		{func(c *openai.Config) { c.Extra = json.RawMessage(`{"stream":false}`) }, `may not set "stream"`},
		{func(c *openai.Config) { c.OutputSchema = json.RawMessage(`"string"`) }, "output schema must be a JSON object"},
		{func(c *openai.Config) { c.OutputSchema, c.StructuredOutput = schema, "xml" }, `structured output "xml"`},
		{func(c *openai.Config) { c.StructuredOutput = openai.StructuredJSONSchema }, "needs an output schema"},
		{func(c *openai.Config) { c.Reasoning = "some" }, `reasoning "some"`},
		// a long value is quoted cut, never inside a character
		{func(c *openai.Config) { c.Extra = json.RawMessage(`"` + strings.Repeat("é", 60) + `"`) }, "é…"},
	} {
		cfg := openai.Config{Model: "m", BaseURL: "http://127.0.0.1:1/v1"}
		tc.cfg(&cfg)
		if _, err := openai.New(cfg); err == nil || !strings.Contains(err.Error(), tc.says) || !utf8.ValidString(err.Error()) {
			t.Errorf("New: %v, want it to say %q", err, tc.says)
		}
	}
}
