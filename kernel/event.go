package kernel

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/internal/enumtext"
)

// EventKind says what happened in the world. Events are the kernel's only
// input; time arrives inside them (At).
type EventKind uint8

// Event kinds. Inputs from the user address an agent; results from the world
// name the OpID of the effect they answer.
const (
	EventNone EventKind = iota
	// EvSubmit: the user submits Text to the root.
	EvSubmit
	// EvInterject: the user types Text while the root works (F8).
	EvInterject
	// EvCancel: the user cancels Agent's turn. Turn binds the cancel to the turn
	// it was issued for (0: whatever turn is current) (F14).
	EvCancel
	// EvShutdown: the host is stopping; every turn is aborted with reason
	// shutdown and no new turn may start.
	EvShutdown
	// EvLLMDelta: a streamed chunk for request Op: Text, or a tool-call fragment
	// in Call. Chunk numbers the chunks of one request from 1; a chunk whose
	// number is not above the last one seen is a duplicate and is dropped.
	EvLLMDelta
	// EvLLMEnd: request Op's stream finished normally.
	EvLLMEnd
	// EvLLMError: request Op failed (Failure says how). For a request the
	// kernel cancelled, this (with FailureCancelled or any other) is the ack.
	EvLLMError
	// EvLLMRetry: the adapter is retrying request Op before its first token
	// of answer (rate limit, server error, a connection lost while only
	// progress had arrived); informational.
	EvLLMRetry
	// EvToolResult: tool op Op finished: Text is its content; Status says how.
	EvToolResult
	// EvTimer: timer Op fired.
	EvTimer
	// EvRecover: the host restarted after a crash, and the kernel was
	// rebuilt by replaying the events it had logged: every operation the
	// old process ran is gone. The kernel resolves each one by kind
	// (docs/semantics.md, "Recovery"): a request restarts, an idempotent
	// tool runs again, any other tool call gets a tool_lost result, a
	// cancelled op ends, and every timer is armed again.
	EvRecover
	// EvDecision: a person (or a host's policy) decides on call CallID of
	// Agent, which waits for approval: Verdict approves or denies it,
	// Digest names the arguments decided on, Text is a denial's note
	// (docs/semantics.md, "Approvals").
	EvDecision
	// EvCompact: the user asks for the root's history to be compacted now
	// (chat's /compact); Text is the focus, if any (docs/semantics.md,
	// "Compaction").
	EvCompact
)

var eventNames = [...]string{
	"none", "submit", "interject", "cancel", "shutdown",
	"llm_delta", "llm_end", "llm_error", "llm_retry", "tool_result", "timer", "recover",
	"decision",
	"compact",
}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// MarshalText prints event kinds by name in JSON traces.
func (k EventKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Failure classifies an LLM request failure.
type Failure uint8

// Failures.
const (
	FailureNone Failure = iota
	// FailureCancelled: the request stopped because it was cancelled.
	FailureCancelled
	// FailureRateLimit: the provider kept refusing (429) after retries.
	FailureRateLimit
	// FailureServer: 5xx after retries.
	FailureServer
	// FailureDisconnect: the connection dropped.
	FailureDisconnect
	// FailureStream: the stream broke after tokens arrived (a typed stream error).
	FailureStream
	// FailureBadResponse: the provider sent something unparseable.
	FailureBadResponse
	// FailureContextLength: the server refused the request as longer than
	// the model's context window (OpenAI's context_length_exceeded and its
	// equivalents); it leads to one compaction and one retry
	// (docs/semantics.md, "Compaction").
	FailureContextLength
)

var failureNames = [...]string{"", "cancelled", "rate_limit", "server", "disconnect", "stream", "bad_response", "context_length"}

func (f Failure) String() string {
	if int(f) < len(failureNames) {
		return failureNames[f]
	}
	return fmt.Sprintf("failure(%d)", uint8(f))
}

// MarshalText prints failures by name.
func (f Failure) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// ToolStatus says how a tool op ended.
type ToolStatus uint8

// Tool statuses.
const (
	ToolOK ToolStatus = iota
	// ToolError: the tool ran and reported an error (or crashed).
	ToolError
	// ToolCancelled: the tool stopped because it was cancelled (the ack).
	ToolCancelled
)

var toolStatusNames = [...]string{"ok", "error", "cancelled"}

func (s ToolStatus) String() string {
	if int(s) < len(toolStatusNames) {
		return toolStatusNames[s]
	}
	return fmt.Sprintf("tool_status(%d)", uint8(s))
}

// MarshalText prints tool statuses by name.
func (s ToolStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// CallDelta is one streamed fragment of a tool call, in the OpenAI streaming
// shape: Index says which call; ID and Name arrive in the call's first
// fragment; Args fragments are concatenated.
type CallDelta struct {
	Index int    `json:"index"`
	ID    string `json:"id,omitempty"`
	Name  string `json:"name,omitempty"`
	Args  string `json:"args,omitempty"`
}

// Event is one input to Step. It is a flat value (raft's Message style) so
// traces, goldens and tests can compare and print it.
type Event struct {
	// Kind says what happened; the constructors (Submit, TextDelta, …) set
	// it with the fields that kind reads.
	Kind EventKind `json:"kind"`
	// At is when it happened on the host's clock, as a duration from an
	// origin the host picks (the simulator's virtual zero, the live
	// driver's start). It must never be earlier than the previous event's:
	// Step panics on time going backwards.
	At time.Duration `json:"at"`
	// Agent is the target of EvCancel and the agent whose call an
	// EvDecision decides.
	Agent AgentID `json:"agent,omitempty"`
	// Turn binds EvCancel to a turn; 0 means the current one.
	Turn uint64 `json:"turn,omitempty"`
	// Op is the operation a world event answers.
	Op OpID `json:"op,omitempty"`
	// Chunk numbers EvLLMDelta chunks from 1 (0: unnumbered, never deduplicated).
	Chunk uint32 `json:"chunk,omitempty"`
	// Text: submitted or interjected text, a text delta, a tool's content, an
	// error's detail, a retry's cause, a decision's note.
	Text string `json:"text,omitempty"`
	// Call is a tool-call fragment (EvLLMDelta).
	Call *CallDelta `json:"call,omitempty"`
	// Failure classifies an EvLLMError.
	Failure Failure `json:"failure,omitempty"`
	// Status is how a tool ended (EvToolResult).
	Status ToolStatus `json:"status,omitempty"`
	// Verdict is what an EvDecision decides (beside the small fields, so
	// it takes no room of its own in an Event).
	Verdict Verdict `json:"verdict,omitempty"`
	// Attempt and Delay are an EvLLMRetry's next attempt and its wait.
	Attempt int           `json:"attempt,omitempty"`
	Delay   time.Duration `json:"delay,omitempty"`
	// Usage is token accounting riding on EvLLMEnd; nil when the server
	// reported none (docs/semantics.md, "Usage").
	Usage *Usage `json:"usage,omitempty"`
	// CallID and Digest are an EvDecision's: the call it decides on, and
	// the digest of the arguments it decides on (kernel.Digest).
	CallID string `json:"call_id,omitempty"`
	Digest string `json:"digest,omitempty"`
	// Reasoning is the model's hidden reasoning, riding on EvLLMEnd: kept
	// with the message the end appends, never shown (docs/semantics.md,
	// "Reasoning"); nil when there was none.
	Reasoning *Reasoning `json:"reasoning,omitempty"`
}

// Describe prints the event on one line, for logs, goldens and panics.
func (e Event) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "@%v %s", e.At, e.Kind)
	switch e.Kind {
	case EvSubmit, EvInterject:
		fmt.Fprintf(&b, " %q", e.Text)
	case EvCancel:
		fmt.Fprintf(&b, " agent=%d", e.Agent)
		if e.Turn != 0 {
			fmt.Fprintf(&b, " turn=%d", e.Turn)
		}
	case EvLLMDelta:
		fmt.Fprintf(&b, " op=%d", e.Op)
		if e.Chunk != 0 {
			fmt.Fprintf(&b, " chunk=%d", e.Chunk)
		}
		if c := e.Call; c != nil {
			fmt.Fprintf(&b, " call[%d]", c.Index)
			if c.ID != "" {
				fmt.Fprintf(&b, " id=%s", c.ID)
			}
			if c.Name != "" {
				fmt.Fprintf(&b, " name=%s", c.Name)
			}
			if c.Args != "" {
				b.WriteString(" args=" + quoteArgs(c.Args))
			}
		} else {
			fmt.Fprintf(&b, " %q", e.Text)
		}
	case EvLLMEnd:
		fmt.Fprintf(&b, " op=%d", e.Op)
		if e.Usage != nil {
			fmt.Fprintf(&b, " usage(%s)", e.Usage)
		}
		if r := e.Reasoning; r != nil {
			fmt.Fprintf(&b, " reasoning(%d bytes)", len(r.Text)+len(r.Details))
		}
	case EvCompact:
		if e.Text != "" {
			fmt.Fprintf(&b, " %q", e.Text)
		}
	case EvLLMError:
		fmt.Fprintf(&b, " op=%d %s", e.Op, e.Failure)
		if e.Text != "" {
			fmt.Fprintf(&b, " %q", e.Text)
		}
	case EvLLMRetry:
		fmt.Fprintf(&b, " op=%d attempt=%d after=%v", e.Op, e.Attempt, e.Delay)
	case EvToolResult:
		fmt.Fprintf(&b, " op=%d %s", e.Op, e.Status)
		if e.Text != "" {
			fmt.Fprintf(&b, " %q", e.Text)
		}
	case EvTimer:
		fmt.Fprintf(&b, " op=%d", e.Op)
	case EvDecision:
		describeDecision(&b, e)
	}
	return b.String()
}

// quoteArgs quotes a call's (JSON) arguments for Describe: in backquotes,
// so the JSON reads as sent, unless they hold what backquotes cannot (a
// backquote, a control character), then as a Go string.
func quoteArgs(s string) string {
	if strconv.CanBackquote(s) {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

// Constructors keep call sites short and readable in tests and drivers.

// Submit is the user submitting text to the root.
func Submit(at time.Duration, text string) Event { return Event{Kind: EvSubmit, At: at, Text: text} }

// Interject is the user typing while the root works.
func Interject(at time.Duration, text string) Event {
	return Event{Kind: EvInterject, At: at, Text: text}
}

// Cancel is the user cancelling agent's current turn.
func Cancel(at time.Duration, agent AgentID) Event {
	return Event{Kind: EvCancel, At: at, Agent: agent}
}

// CancelTurn is a cancel bound to a specific turn of agent (F14).
func CancelTurn(at time.Duration, agent AgentID, turn uint64) Event {
	return Event{Kind: EvCancel, At: at, Agent: agent, Turn: turn}
}

// Shutdown aborts everything with reason shutdown.
func Shutdown(at time.Duration) Event { return Event{Kind: EvShutdown, At: at} }

// TextDelta is a streamed text chunk of request op.
func TextDelta(at time.Duration, op OpID, chunk uint32, text string) Event {
	return Event{Kind: EvLLMDelta, At: at, Op: op, Chunk: chunk, Text: text}
}

// CallFragment is a streamed tool-call fragment of request op.
func CallFragment(at time.Duration, op OpID, chunk uint32, d CallDelta) Event {
	return Event{Kind: EvLLMDelta, At: at, Op: op, Chunk: chunk, Call: &d}
}

// LLMEnd is request op's stream finishing normally.
func LLMEnd(at time.Duration, op OpID) Event { return Event{Kind: EvLLMEnd, At: at, Op: op} }

// LLMError is request op failing.
func LLMError(at time.Duration, op OpID, f Failure, detail string) Event {
	return Event{Kind: EvLLMError, At: at, Op: op, Failure: f, Text: detail}
}

// LLMRetry reports an adapter retry of request op before its first token.
func LLMRetry(at time.Duration, op OpID, attempt int, delay time.Duration, cause string) Event {
	return Event{Kind: EvLLMRetry, At: at, Op: op, Attempt: attempt, Delay: delay, Text: cause}
}

// ToolResult is tool op finishing.
func ToolResult(at time.Duration, op OpID, status ToolStatus, content string) Event {
	return Event{Kind: EvToolResult, At: at, Op: op, Status: status, Text: content}
}

// TimerFired is timer op firing.
func TimerFired(at time.Duration, op OpID) Event { return Event{Kind: EvTimer, At: at, Op: op} }

// Recover is the host's restart after a crash, once the logged events have
// been replayed.
func Recover(at time.Duration) Event { return Event{Kind: EvRecover, At: at} }

// Compact is the user asking for the root's history to be compacted now,
// with focus (may be empty) for the summary.
func Compact(at time.Duration, focus string) Event {
	return Event{Kind: EvCompact, At: at, Text: focus}
}

// UnmarshalText parses an event kind name (traces are read back for replay).
// It also reads back the "event(N)" that String writes for a kind the kernel
// does not know: a host that fed one logged it, and a rebuild or replay must
// feed it again to reproduce the kernel's refusal (docs/durable.md).
func (k *EventKind) UnmarshalText(b []byte) error {
	if n, ok := unknownEventKind(b); ok {
		*k = n
		return nil
	}
	return enumtext.Parse(k, eventNames[:], b, "event kind")
}

// unknownEventKind reads "event(N)" for an N no event kind has, exactly as
// String writes it (decimal, no sign, no leading zeros).
func unknownEventKind(b []byte) (EventKind, bool) {
	digits, ok := bytes.CutPrefix(b, []byte("event("))
	if !ok {
		return 0, false
	}
	digits, ok = bytes.CutSuffix(digits, []byte(")"))
	if !ok || len(digits) == 0 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(digits), 10, 8)
	if err != nil || n < uint64(len(eventNames)) {
		return 0, false
	}
	return EventKind(n), true
}

// UnmarshalText parses a failure name.
func (f *Failure) UnmarshalText(b []byte) error {
	return enumtext.Parse(f, failureNames[:], b, "failure")
}

// UnmarshalText parses a tool status name.
func (s *ToolStatus) UnmarshalText(b []byte) error {
	return enumtext.Parse(s, toolStatusNames[:], b, "tool status")
}
