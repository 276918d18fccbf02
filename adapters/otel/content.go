package otel

import (
	"encoding/json"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"go.opentelemetry.io/otel/attribute"
)

// Message content goes on spans only on the conventions' opt-in
// (EnvCaptureContent), as JSON strings in the conventions' message shape
// (gen-ai-input-messages.json, gen-ai-output-messages.json), every string
// in it redacted first (docs/otel.md, "Message content").

type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

type part struct {
	Type      string `json:"type"`
	Content   string `json:"content,omitempty"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments any    `json:"arguments,omitempty"`
	Response  any    `json:"response,omitempty"`
}

// toMessage is m in the conventions' shape.
func toMessage(m kernel.Message, redact func(string) string) message {
	out := message{Role: string(m.Role)}
	switch m.Role {
	case kernel.RoleTool:
		out.Parts = append(out.Parts, part{Type: "tool_call_response", ID: redact(m.ToolCallID), Response: redact(m.Content)})
	default:
		if m.Content != "" || len(m.ToolCalls) == 0 {
			out.Parts = append(out.Parts, part{Type: "text", Content: redact(m.Content)})
		}
		for _, c := range m.ToolCalls {
			out.Parts = append(out.Parts, part{Type: "tool_call", ID: redact(c.ID), Name: redact(c.Name), Arguments: arguments(c.Arguments, redact)})
		}
	}
	return out
}

// arguments is a call's arguments as an object when they are JSON (the
// conventions ask for the object), else as the text the model wrote.
func arguments(args string, redact func(string) string) any {
	args = redact(args)
	var v any
	if json.Unmarshal([]byte(args), &v) == nil {
		return v
	}
	return args
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// startContent is what a span records of the content at its start.
func startContent(sp *spans.Span, redact func(string) string) []attribute.KeyValue {
	switch sp.Kind {
	case spans.KindChat:
		ms := make([]message, 0, len(sp.Input))
		for _, m := range sp.Input {
			ms = append(ms, toMessage(m, redact))
		}
		return []attribute.KeyValue{attribute.String(spans.KeyInputMessages, encode(ms))}
	case spans.KindAgent:
		if sp.Task == "" {
			return nil
		}
		ms := []message{{Role: string(kernel.RoleUser), Parts: []part{{Type: "text", Content: redact(sp.Task)}}}}
		return []attribute.KeyValue{attribute.String(spans.KeyInputMessages, encode(ms))}
	case spans.KindTool:
		return []attribute.KeyValue{attribute.String(spans.KeyToolArguments, encode(arguments(sp.Args, redact)))}
	case spans.KindDelegation:
		args := map[string]string{"task": redact(sp.Task), "name": redact(sp.ChildName)}
		return []attribute.KeyValue{attribute.String(spans.KeyToolArguments, encode(args))}
	}
	return nil
}

// endContent is what it records at its end: a request's answer (out, the
// assistant message it added to its agent's history; nil when it added
// none), a tool's result, a turn's or a delegation's final or partial
// text.
func endContent(sp *spans.Span, out *kernel.Message, redact func(string) string) []attribute.KeyValue {
	switch sp.Kind {
	case spans.KindChat:
		if out == nil {
			return nil
		}
		m := toMessage(*out, redact)
		m.FinishReason = sp.FinishReason
		if m.FinishReason == "" {
			m.FinishReason = "error" // cut or failed: not the model's own stop
		}
		return []attribute.KeyValue{attribute.String(spans.KeyOutputMessages, encode([]message{m}))}
	case spans.KindTool:
		if sp.OpEnd != kernel.OpCompleted && sp.OpEnd != kernel.OpFailed {
			return nil
		}
		return []attribute.KeyValue{attribute.String(spans.KeyToolResult, encode(arguments(sp.Result, redact)))}
	case spans.KindDelegation:
		return []attribute.KeyValue{attribute.String(spans.KeyToolResult, encode(redact(sp.Output)))}
	case spans.KindAgent:
		if sp.Output == "" {
			return nil
		}
		m := message{Role: string(kernel.RoleAssistant), Parts: []part{{Type: "text", Content: redact(sp.Output)}}, FinishReason: "stop"}
		if sp.Outcome != kernel.OutcomeCompleted {
			m.FinishReason = "error"
		}
		return []attribute.KeyValue{attribute.String(spans.KeyOutputMessages, encode([]message{m}))}
	}
	return nil
}

// Answer is the assistant message the request sp added to its agent's
// history: the first one after the messages it sent; k is the kernel right
// after the step that ended sp. A host that sends the span elsewhere to be
// exported (ExportWhole) reads the answer with it where the kernel is. The kernel appends to
// a history but when a compaction replaces it, so the answer is there in
// the step the request ended, or never; a compaction's own answer, the
// summary, is never there as an answer (the derivation keeps it).
func Answer(k *kernel.Kernel, sp *spans.Span) *kernel.Message {
	if sp.Compaction != "" {
		if sp.Output == "" {
			return nil
		}
		return &kernel.Message{Role: kernel.RoleAssistant, Content: sp.Output}
	}
	if k == nil || int(sp.Agent) >= k.NumAgents() {
		return nil
	}
	h := k.Agent(sp.Agent).History()
	for i := len(sp.Input); i < len(h); i++ {
		if h[i].Role == kernel.RoleAssistant {
			m := h[i]
			return &m
		}
	}
	return nil
}
