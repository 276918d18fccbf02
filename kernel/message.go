package kernel

import (
	"fmt"
)

// Role is a chat role in the OpenAI chat shape.
type Role string

// Roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// ToolCall is one call the model asked for, in the OpenAI shape.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one entry of an agent's chat history, in the OpenAI chat shape
// (system / user / assistant with tool_calls / tool with tool_call_id) plus
// flags the kernel keeps for itself and the oracle. Adapters send Role,
// Content, ToolCalls and ToolCallID; the flags never reach the model except
// through the marker text.
//
// Invariant: once appended to a history a Message is never modified, so
// effects can hand out read-only views of a history without copying it.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Reasoning is the hidden reasoning of an assistant message, kept only
	// to be sent back where the provider needs it (docs/semantics.md,
	// "Reasoning"); nil when there was none.
	Reasoning *Reasoning `json:"reasoning,omitempty"`

	// Partial marks assistant text that was cut off by an interrupt,
	// interjection, timeout or failure (F7).
	Partial bool `json:"partial,omitempty"`
	// Marker marks the one message per aborted turn that tells the next request
	// the turn was cut off, and why (F6, F13).
	Marker bool `json:"marker,omitempty"`
	// Synthetic marks a tool message the kernel wrote for a call that did not
	// produce its own result (cancelled, timed out, refused, malformed) (F11).
	Synthetic bool `json:"synthetic,omitempty"`
	// Interjection marks user text typed while the agent worked (F8).
	Interjection bool `json:"interjection,omitempty"`
	// Summary marks the user message a compaction wrote in place of the
	// messages it summarised (docs/semantics.md, "Compaction").
	Summary bool `json:"summary,omitempty"`
}

// Reasoning is a model's hidden reasoning as its provider sent it. The
// kernel keeps it opaque: it never shows it, counts it towards the
// context, and hands it back with the history, so the adapter can send it
// back where the provider needs it (docs/semantics.md, "Reasoning").
type Reasoning struct {
	// Text is the reasoning's text.
	Text string `json:"text,omitempty"`
	// Field names the wire field Text came in (reasoning_content,
	// reasoning), so an adapter can send it back in the same one.
	Field string `json:"field,omitempty"`
	// Details is a provider's structured reasoning kept verbatim
	// (OpenRouter's reasoning_details, a JSON array whose signatures and
	// encrypted blocks must come back unchanged).
	Details string `json:"details,omitempty"`
}

// TranscriptError locates the first problem in a history.
type TranscriptError struct {
	Index  int
	Detail string
}

func (e *TranscriptError) Error() string {
	return fmt.Sprintf("invalid transcript at message %d: %s", e.Index, e.Detail)
}

// ValidateTranscript checks that msgs is a chat transcript a strict provider
// accepts (F11, I4): roles are known; a system message only comes first; no
// assistant message is empty; tool call ids are unique; the tool messages that
// answer an assistant message's calls follow it directly, one per call, each
// naming a call of that message. When openTail is true the last assistant
// message's calls may still lack results (the agent is waiting for them);
// otherwise every call must be answered.
func ValidateTranscript(msgs []Message, openTail bool) error {
	ids := make(map[string]struct{})
	var open map[string]bool // calls of the current assistant message awaiting results
	openAt := -1
	for i, m := range msgs {
		if open != nil && m.Role != RoleTool {
			if n := countFalse(open); n > 0 {
				return &TranscriptError{i, fmt.Sprintf("%d tool call(s) of message %d have no result before this %s message", n, openAt, m.Role)}
			}
			open = nil
		}
		switch m.Role {
		case RoleSystem:
			if i != 0 {
				return &TranscriptError{i, "system message after the start"}
			}
		case RoleUser:
			if m.Content == "" {
				return &TranscriptError{i, "empty user message"}
			}
		case RoleAssistant:
			if m.Content == "" && len(m.ToolCalls) == 0 {
				return &TranscriptError{i, "empty assistant message"}
			}
			if len(m.ToolCalls) > 0 {
				open = make(map[string]bool, len(m.ToolCalls))
				openAt = i
				for _, c := range m.ToolCalls {
					if c.ID == "" {
						return &TranscriptError{i, "tool call without id"}
					}
					if c.Name == "" {
						return &TranscriptError{i, fmt.Sprintf("tool call %s without name", c.ID)}
					}
					if _, dup := ids[c.ID]; dup {
						return &TranscriptError{i, fmt.Sprintf("tool call id %s used twice", c.ID)}
					}
					ids[c.ID] = struct{}{}
					open[c.ID] = false
				}
			}
		case RoleTool:
			if open == nil {
				return &TranscriptError{i, fmt.Sprintf("tool message for %q does not follow an assistant message with tool calls", m.ToolCallID)}
			}
			answered, ok := open[m.ToolCallID]
			if !ok {
				return &TranscriptError{i, fmt.Sprintf("tool message answers unknown call %q", m.ToolCallID)}
			}
			if answered {
				return &TranscriptError{i, fmt.Sprintf("call %s answered twice", m.ToolCallID)}
			}
			open[m.ToolCallID] = true
		default:
			return &TranscriptError{i, fmt.Sprintf("unknown role %q", m.Role)}
		}
	}
	if open != nil && !openTail {
		if n := countFalse(open); n > 0 {
			return &TranscriptError{len(msgs), fmt.Sprintf("%d tool call(s) of message %d have no result", n, openAt)}
		}
	}
	return nil
}

func countFalse(m map[string]bool) int {
	n := 0
	for _, v := range m { // determinism: a count, whatever the order
		if !v {
			n++
		}
	}
	return n
}
