package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	oa "github.com/sashabaranov/go-openai"
)

// The request body is built here rather than by go-openai, whose request
// type cannot send a temperature of 0, fields it does not know (Config.Extra,
// OpenRouter's reasoning_details) or a message's reasoning_content beside its
// tool calls. go-openai still opens the stream and frames its events: the
// body it would have sent is swapped for this one below it (capturingDoer).

// wireRequest is a chat-completions request body.
type wireRequest struct {
	Model         string        `json:"model"`
	Messages      []wireMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Tools               []oa.Tool `json:"tools,omitempty"`
	ToolChoice          any       `json:"tool_choice,omitempty"`
	Temperature         *float64  `json:"temperature,omitempty"`
	MaxTokens           int       `json:"max_tokens,omitempty"`
	MaxCompletionTokens int       `json:"max_completion_tokens,omitempty"`
	ResponseFormat      any       `json:"response_format,omitempty"`
}

// wireMessage is one message as sent: the OpenAI chat shape, plus the
// reasoning a provider needs back (docs/live.md, "Reasoning").
type wireMessage struct {
	Role             string          `json:"role"`
	Content          string          `json:"content,omitempty"`
	ToolCalls        []oa.ToolCall   `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ReasoningDetails json.RawMessage `json:"reasoning_details,omitempty"`
}

// Reasoning settings (Config.Reasoning).
const (
	// ReasoningAuto sends back, on an assistant message with tool calls,
	// the reasoning that came as reasoning_content and OpenRouter's
	// reasoning_details: what DeepSeek and OpenRouter require.
	ReasoningAuto = "auto"
	// ReasoningAll sends it back on every assistant message that has it.
	ReasoningAll = "all"
	// ReasoningOff never sends reasoning back.
	ReasoningOff = "off"
)

// Structured output settings (Config.StructuredOutput).
const (
	StructuredJSONSchema = "json_schema"
	StructuredJSONObject = "json_object"
	StructuredNone       = "none"
)

// Output-token fields (Config.OutputTokensField).
const (
	FieldMaxTokens           = "max_tokens"
	FieldMaxCompletionTokens = "max_completion_tokens"
)

// reservedExtra are the body fields Config.Extra may not replace: without
// them the request is not this request.
var reservedExtra = []string{"model", "messages", "stream", "stream_options"}

// body is the JSON body of req.
func (m *Model) body(req ports.Request) ([]byte, error) {
	w := wireRequest{Model: m.cfg.Model, Messages: m.wireMessages(req.Messages), Stream: true,
		Temperature: m.cfg.Temperature}
	w.StreamOptions.IncludeUsage = true
	if n := m.cfg.MaxOutputTokens; n > 0 {
		if m.cfg.OutputTokensField == FieldMaxCompletionTokens {
			w.MaxCompletionTokens = n
		} else {
			w.MaxTokens = n
		}
	}
	// A summarising request answers with text: no tools to call, and the
	// root's answer shape is not the summary's.
	if !req.Compaction {
		w.Tools = m.tools
		if req.Tools != nil {
			w.Tools = wireTools(req.Tools)
		}
		if req.Agent == kernel.Root {
			w.ToolChoice = m.toolChoice
			w.ResponseFormat = m.responseFormat
		}
	}
	b, err := json.Marshal(w)
	if err != nil || len(m.extra) == 0 {
		return b, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	maps.Copy(fields, m.extra)
	return json.Marshal(fields) // keys sorted: the same body every time
}

// wireMessages converts a kernel history into the wire messages: Role,
// Content, ToolCalls (type "function"), ToolCallID and the reasoning
// Config.Reasoning sends back. The kernel's flags (Partial, Marker,
// Synthetic, Interjection, Summary) stay home; the marker's and the
// summary's text carry what the model needs to know.
func (m *Model) wireMessages(msgs []kernel.Message) []wireMessage {
	out := make([]wireMessage, 0, len(msgs))
	for _, km := range msgs {
		w := wireMessage{Role: string(km.Role), Content: km.Content, ToolCallID: km.ToolCallID}
		if km.Role == kernel.RoleTool && km.Content == "" {
			// Strict servers reject a tool message without content.
			w.Content = "(empty)"
		}
		for _, c := range km.ToolCalls {
			w.ToolCalls = append(w.ToolCalls, oa.ToolCall{
				ID: c.ID, Type: oa.ToolTypeFunction,
				Function: oa.FunctionCall{Name: c.Name, Arguments: c.Arguments},
			})
		}
		if r := km.Reasoning; r != nil && m.sendsReasoning(km) {
			if r.Field == fieldReasoningContent {
				w.ReasoningContent = r.Text
			}
			if r.Details != "" && json.Valid([]byte(r.Details)) {
				w.ReasoningDetails = json.RawMessage(r.Details)
			}
		}
		out = append(out, w)
	}
	return out
}

// sendsReasoning reports whether km's reasoning goes back under
// Config.Reasoning.
func (m *Model) sendsReasoning(km kernel.Message) bool {
	switch m.cfg.Reasoning {
	case ReasoningOff:
		return false
	case ReasoningAll:
		return km.Role == kernel.RoleAssistant
	}
	return km.Role == kernel.RoleAssistant && len(km.ToolCalls) > 0
}

// parseExtra reads Config.Extra: a JSON object none of whose fields is
// reserved.
func parseExtra(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("openai: extra request fields must be a JSON object: %s", clipJSON(raw))
	}
	for _, k := range reservedExtra {
		if _, ok := fields[k]; ok {
			return nil, fmt.Errorf("openai: extra request fields may not set %q (the adapter sends it)", k)
		}
	}
	return fields, nil
}

// toolChoiceOf is tool_choice for Config.ToolChoice: a mode, or a tool of
// tools forced by name.
func toolChoiceOf(choice string, tools []ports.ToolSpec) (any, error) {
	switch choice {
	case "":
		return nil, nil
	case "auto", "none", "required":
		return choice, nil
	}
	if !slices.ContainsFunc(tools, func(s ports.ToolSpec) bool { return s.Name == choice }) {
		return nil, fmt.Errorf("openai: tool choice %q: want auto, none, required or the name of a tool offered", choice)
	}
	return oa.ToolChoice{Type: oa.ToolTypeFunction, Function: oa.ToolFunction{Name: choice}}, nil
}

// responseFormatOf is response_format for an output schema.
func responseFormatOf(schema json.RawMessage, name, mode string) (any, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		if mode != "" && mode != StructuredNone {
			return nil, fmt.Errorf("openai: structured output %q needs an output schema", mode)
		}
		return nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(schema, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("openai: the output schema must be a JSON object: %s", clipJSON(schema))
	}
	if name == "" {
		name = "answer"
	}
	switch mode {
	case "", StructuredJSONSchema:
		return map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": name, "schema": schema}}, nil
	case StructuredJSONObject:
		return map[string]string{"type": "json_object"}, nil
	case StructuredNone:
		return nil, nil
	}
	return nil, fmt.Errorf("openai: structured output %q: want json_schema, json_object or none", mode)
}

// clipJSON cuts raw JSON quoted in an error to 80 bytes (textcut.Clip).
func clipJSON(raw json.RawMessage) string { return textcut.Clip(string(raw), 80) }

// bodyKey carries an attempt's request body to capturingDoer.
type bodyKey struct{}

// withBody makes the request carry body instead of what go-openai built.
func withBody(ctx context.Context, body []byte) context.Context {
	return context.WithValue(ctx, bodyKey{}, body)
}

// swapBody puts the body the context carries into req.
func swapBody(req *http.Request) {
	body, ok := req.Context().Value(bodyKey{}).([]byte)
	if !ok {
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}
