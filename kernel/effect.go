package kernel

import (
	"fmt"
	"strings"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/enumtext"
)

// EffectKind says what the kernel wants done.
type EffectKind uint8

// Effect kinds. Every effect that starts something names the OpID that the
// answering events will carry.
const (
	EffectNone EffectKind = iota
	// EffStartLLM: send Messages as a chat request for Agent; answer with
	// EvLLMDelta / EvLLMEnd / EvLLMError / EvLLMRetry carrying Op.
	EffStartLLM
	// EffCancelLLM: cancel request Op; answer with EvLLMError (any failure,
	// typically FailureCancelled) or EvLLMEnd when it stops. A request that never
	// answers is abandoned after the grace period.
	EffCancelLLM
	// EffStartTool: run Call for Agent; answer with EvToolResult carrying Op.
	EffStartTool
	// EffCancelTool: cancel tool Op; it should answer with EvToolResult
	// (ToolCancelled) within the grace period or it is abandoned (F3).
	EffCancelTool
	// EffSetTimer: fire EvTimer{Op} at time At (absolute, on the event clock).
	EffSetTimer
	// EffStopTimer: timer Op is no longer wanted. A firing that races the stop
	// is recognised as stale, so drivers need not guarantee it never fires.
	EffStopTimer
	// EffEmit: a lifecycle event for subscribers (also appended to the Log).
	EffEmit
	// EffError: an input was refused; State and Trigger name an undeclared FSM
	// pair, Detail says what was wrong and Err is the same as an error value
	// (errors.Is with ErrEmptyText, ErrShutdown, ErrUnknownAgent; errors.As
	// with *fsm.UndeclaredError). Nothing else happened.
	EffError
)

var effectNames = [...]string{"none", "start_llm", "cancel_llm", "start_tool", "cancel_tool", "set_timer", "stop_timer", "emit", "error"}

func (k EffectKind) String() string {
	if int(k) < len(effectNames) {
		return effectNames[k]
	}
	return fmt.Sprintf("effect(%d)", uint8(k))
}

// MarshalText prints effect kinds by name in JSON traces.
func (k EffectKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// TimerKind says what a timer watches; it is informational for drivers and
// traces (the kernel keeps its own record).
type TimerKind uint8

// Timer kinds.
const (
	TimerNone TimerKind = iota
	// TimerWatchdog watches one LLM request: first token, then stall.
	TimerWatchdog
	// TimerTool is one tool call's deadline.
	TimerTool
	// TimerTurn is an agent's turn deadline.
	TimerTurn
	// TimerGrace bounds a cancelled operation's time to stop.
	TimerGrace
	// TimerRestart ends an interjection's debounce window.
	TimerRestart
	// TimerApproval ends a call's wait for a decision (approval_timeout).
	TimerApproval
)

var timerNames = [...]string{"", "watchdog", "tool_deadline", "turn_deadline", "grace", "restart", "approval_deadline"}

func (k TimerKind) String() string {
	if int(k) < len(timerNames) {
		return timerNames[k]
	}
	return fmt.Sprintf("timer(%d)", uint8(k))
}

// MarshalText prints timer kinds by name.
func (k TimerKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// ErrorCode classifies an EffError.
type ErrorCode uint8

// Error codes.
const (
	ErrCodeNone ErrorCode = iota
	// ErrCodeUndeclared: the input maps to a (state, trigger) pair the FSM does
	// not declare (e.g. a submit while the root is streaming; use interject).
	ErrCodeUndeclared
	// ErrCodeBadInput: the event itself is malformed (unknown agent, empty text,
	// an op id of the wrong kind).
	ErrCodeBadInput
)

var errorCodeNames = [...]string{"", "undeclared_transition", "bad_input"}

func (c ErrorCode) String() string {
	if int(c) < len(errorCodeNames) {
		return errorCodeNames[c]
	}
	return fmt.Sprintf("error_code(%d)", uint8(c))
}

// MarshalText prints error codes by name.
func (c ErrorCode) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// Effect is one thing the kernel wants done, as plain data (never a closure),
// so tests can compare effects and traces can print them.
//
// Ordering contract: the effects of one Step must be executed in order. Within
// a Step, cancels precede the starts they make room for, and a SetTimer for an
// op follows the effect that started it. The Messages of EffStartLLM is a
// read-only view of the agent's history at that moment (messages are never
// modified once appended; the view's capacity is clipped so appending to it
// cannot touch the history).
type Effect struct {
	Kind  EffectKind    `json:"kind"`
	Agent AgentID       `json:"agent"`
	Op    OpID          `json:"op,omitempty"`
	At    time.Duration `json:"at,omitempty"`
	Timer TimerKind     `json:"timer,omitempty"`
	// Compact flags an EffStartLLM that is a compaction's summarising
	// request (docs/semantics.md, "Compaction"): send it without tools.
	Compact  bool      `json:"compact,omitempty"`
	Messages []Message `json:"-"`
	Call     ToolCall  `json:"call,omitzero"`
	Life     Lifecycle `json:"life,omitzero"`
	// EffError fields.
	Code    ErrorCode   `json:"code,omitempty"`
	State   fsm.State   `json:"-"`
	Trigger fsm.Trigger `json:"-"`
	Detail  string      `json:"detail,omitempty"`
	// Err is the refusal of an EffError as an error whose text is Detail.
	// A refused submit or interjection wraps ErrEmptyText or ErrShutdown,
	// a cancel of an agent the tree does not hold wraps ErrUnknownAgent
	// (match them with errors.Is), and an undeclared (state, trigger) pair
	// is a *fsm.UndeclaredError (errors.As). Traces keep only Detail.
	Err error `json:"-"`
	// Profile names the profile of an EffStartLLM's agent ("" for none),
	// so the host sends the request to that profile's model and offers
	// its tools (docs/semantics.md, "Profiles").
	Profile string `json:"profile,omitempty"`
}

// Describe prints the effect on one line.
func (e Effect) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s agent=%d", e.Kind, e.Agent)
	switch e.Kind {
	case EffStartLLM:
		fmt.Fprintf(&b, " op=%d messages=%d", e.Op, len(e.Messages))
		if e.Compact {
			b.WriteString(" compact")
		}
		if e.Profile != "" {
			fmt.Fprintf(&b, " profile=%s", e.Profile)
		}
	case EffCancelLLM, EffCancelTool:
		fmt.Fprintf(&b, " op=%d", e.Op)
	case EffStopTimer:
		fmt.Fprintf(&b, " op=%d %s", e.Op, e.Timer)
	case EffStartTool:
		fmt.Fprintf(&b, " op=%d call=%s %s(%s)", e.Op, e.Call.ID, e.Call.Name, e.Call.Arguments)
	case EffSetTimer:
		fmt.Fprintf(&b, " op=%d %s at=%v", e.Op, e.Timer, e.At)
	case EffEmit:
		b.WriteString(" ")
		b.WriteString(e.Life.Describe())
	case EffError:
		// State and Trigger mean something only for an undeclared pair;
		// a bad input's zero values would read as Idle and Submit.
		if e.Code == ErrCodeUndeclared {
			fmt.Fprintf(&b, " %s state=%s trigger=%s: %s", e.Code, e.State, e.Trigger, e.Detail)
		} else {
			fmt.Fprintf(&b, " %s: %s", e.Code, e.Detail)
		}
	}
	return b.String()
}

// UnmarshalText implementations let trace readers decode every record.

// UnmarshalText parses an effect kind name.
func (k *EffectKind) UnmarshalText(b []byte) error {
	return enumtext.Parse(k, effectNames[:], b, "effect kind")
}

// UnmarshalText parses a timer kind name.
func (k *TimerKind) UnmarshalText(b []byte) error {
	return enumtext.Parse(k, timerNames[:], b, "timer kind")
}

// UnmarshalText parses an error code name.
func (c *ErrorCode) UnmarshalText(b []byte) error {
	return enumtext.Parse(c, errorCodeNames[:], b, "error code")
}
