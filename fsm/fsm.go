// Package fsm is the agent state machine: five states, the triggers that move
// between them, and the one table that declares every legal (state, trigger)
// pair. The kernel, the diagrams (Mermaid, DOT, text table) and the tests are all
// built from Table, so what is drawn is what runs.
//
// The machine is executed by github.com/qmuntal/stateless with external storage:
// the state lives in the agent's own struct, and one configured machine serves a
// whole tree by being pointed at the agent being stepped (see Machine.Fire).
//
// The FSM decides only what is legal and where a trigger leads. The kernel does
// the work (starting requests, cancelling tools, writing history) in its own
// per-state functions after the machine accepted the trigger. For that reason
// internal transitions are configured as stateless Ignore: declared, no exit or
// entry, and no per-fire context allocation.
//
// F1 by construction: Interrupted has no edge to Streaming, Tooling or
// Delegating. After an interrupt the only way forward is Settled → Idle, and only
// a new user submission leaves Idle.
package fsm

import (
	"fmt"

	"github.com/escapement/escapement/internal/enumtext"
)

// State is where an agent is in its turn. The zero value is Idle.
type State uint8

// The five agent states (docs/semantics.md, "States and transitions").
const (
	// Idle: no turn is running; the agent waits for a submission.
	Idle State = iota
	// Streaming: an LLM request is in flight (or about to restart after an
	// interjection's debounce window).
	Streaming
	// Tooling: the model asked for tool calls; they run in parallel.
	Tooling
	// Delegating: the model asked for at least one sub-agent (possibly beside
	// tool calls); the agent waits for its children.
	Delegating
	// Interrupted: the turn was cancelled or timed out; in-flight work is being
	// cancelled and the agent waits for it to settle or for the grace period.
	Interrupted
)

// NumStates is the number of states; states are 0..NumStates-1.
const NumStates = 5

var stateNames = [NumStates]string{"Idle", "Streaming", "Tooling", "Delegating", "Interrupted"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// States lists every state in declaration order.
func States() []State { return []State{Idle, Streaming, Tooling, Delegating, Interrupted} }

// Trigger is what happened to an agent. Triggers are fired by the kernel, one
// per meaningful input; stale inputs never reach the machine.
type Trigger uint8

// The triggers: the inputs (submit, interject, cancel), the world's answers
// (a stream's chunks, end, failure; a tool's result; a child's outcome), the
// deadlines (timeout, restart, settled), and the ones the kernel needs to say
// why a turn moves on or ends (docs/semantics.md, "States and transitions").
const (
	// Submit: the user submitted text (the root) or a parent delegated a task.
	Submit Trigger = iota
	// Delta: a streamed chunk (text or a tool-call fragment) arrived.
	Delta
	// StreamText: the stream finished with text only; the turn is complete.
	StreamText
	// StreamTools: the stream finished with tool calls, none of them a
	// delegation that spawns a child.
	StreamTools
	// StreamDelegations: the stream finished with at least one delegation
	// that spawns a child.
	StreamDelegations
	// StreamFailed: the stream failed after retries (a typed LLM error).
	StreamFailed
	// ToolResult: one tool call got its result (or an immediate error/refusal).
	ToolResult
	// ChildOutcome: a child agent ended its turn with a typed outcome.
	ChildOutcome
	// ResultsIn: every call of the last assistant message has its result; the
	// next request starts.
	ResultsIn
	// BudgetExhausted: the next request would exceed the per-turn request budget.
	BudgetExhausted
	// Interject: the user typed while the agent works (or while idle: a submit).
	Interject
	// Restart: the interjection debounce window closed; the cut request restarts.
	Restart
	// Cancel: the user (or an ancestor's abort) cancelled the turn.
	Cancel
	// Timeout: one of the agent's deadlines fired (first token, stall, turn).
	Timeout
	// Settled: every cancelled operation has ended or been abandoned.
	Settled
	// OutputLimit: the streamed message went past its size cap; the stream
	// is cut and the turn aborted like a timeout, with reason output_limit.
	OutputLimit
	// Compact: a compaction starts (docs/semantics.md, "Compaction"): on
	// demand from Idle (a compaction turn), or before a request that would
	// not fit, or after the server refused one as too long.
	Compact
	// Compacted: the compaction completed; the history is replaced and the
	// request it preceded goes out.
	Compacted
	// ContextExhausted: the history cannot be made to fit the context
	// window; the turn ends failed, reason context_exhausted.
	ContextExhausted
)

// NumTriggers is the number of triggers; triggers are 0..NumTriggers-1.
const NumTriggers = 19

var triggerNames = [NumTriggers]string{
	"Submit", "Delta", "StreamText", "StreamTools", "StreamDelegations", "StreamFailed",
	"ToolResult", "ChildOutcome", "ResultsIn", "BudgetExhausted",
	"Interject", "Restart", "Cancel", "Timeout", "Settled", "OutputLimit",
	"Compact", "Compacted", "ContextExhausted",
}

func (t Trigger) String() string {
	if int(t) < len(triggerNames) {
		return triggerNames[t]
	}
	return fmt.Sprintf("Trigger(%d)", uint8(t))
}

// Triggers lists every trigger in declaration order.
func Triggers() []Trigger {
	ts := make([]Trigger, NumTriggers)
	for i := range ts {
		ts[i] = Trigger(i)
	}
	return ts
}

// Kind says what a declared transition does to the state.
type Kind uint8

const (
	// Move changes the state to To.
	Move Kind = iota
	// Internal keeps the state; the kernel acts (To == From).
	Internal
	// Ignore keeps the state and the kernel records the input as a no-op
	// (To == From). Used where an input is legal but meaningless, e.g. a cancel
	// that arrives once the turn has ended (F14).
	Ignore
)

func (k Kind) String() string {
	switch k {
	case Move:
		return "move"
	case Internal:
		return "internal"
	case Ignore:
		return "ignore"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Transition is one declared row of the machine.
type Transition struct {
	From    State
	Trigger Trigger
	To      State
	Kind    Kind
	// Why says what the kernel does on this row, for the table output and docs.
	Why string
}

// Table returns the declared transitions, in a stable order. It is the single
// definition of the machine: the stateless configuration, the diagrams and the
// exhaustive tests are all generated from it. Each call returns a fresh slice.
func Table() []Transition {
	return []Transition{
		{Idle, Submit, Streaming, Move, "start a turn: append the user text, send the first request"},
		{Idle, Interject, Streaming, Move, "text typed after the turn ended starts a new turn (never lost, F8)"},
		{Idle, Cancel, Idle, Ignore, "the turn already ended: the cancel is a recorded no-op (F14)"},
		{Idle, Compact, Streaming, Move, "on-demand compaction: a compaction turn sends its summarising request"},

		{Streaming, Delta, Streaming, Internal, "append text or a tool-call fragment; progress for the stall watchdog"},
		{Streaming, StreamText, Idle, Move, "final answer: the turn completes"},
		{Streaming, StreamTools, Tooling, Move, "start every finished tool call in parallel (F12)"},
		{Streaming, StreamDelegations, Delegating, Move, "spawn children (and start tools) in parallel"},
		{Streaming, StreamFailed, Idle, Move, "typed LLM failure: keep partial text, marker, outcome failed"},
		{Streaming, Interject, Streaming, Internal, "cut the stream, keep the partial, append the text, restart after debounce (a compaction is not cut: the text waits)"},
		{Streaming, Restart, Streaming, Internal, "debounce window closed: send the next request"},
		{Streaming, BudgetExhausted, Idle, Move, "no request budget left for the restart: outcome budget_exhausted"},
		{Streaming, Cancel, Interrupted, Move, "cancel the request and the subtree"},
		{Streaming, Timeout, Interrupted, Move, "first-token, stall or turn deadline: abort like a cancel, typed reason"},
		{Streaming, OutputLimit, Interrupted, Move, "the message went past max_message_bytes: cut the stream, keep what fit as partial, reason output_limit"},
		{Streaming, Compact, Streaming, Internal, "the next request would not fit, or the server refused it as too long: send the summarising request first"},
		{Streaming, Compacted, Streaming, Internal, "the summary replaces the history at once: send the request it preceded"},
		{Streaming, ContextExhausted, Idle, Move, "the history cannot be made to fit the window: marker, outcome failed, reason context_exhausted"},

		{Tooling, ToolResult, Tooling, Internal, "record one result; wait for the rest"},
		{Tooling, ResultsIn, Streaming, Move, "all results in: send the follow-up request (with queued interjections)"},
		{Tooling, BudgetExhausted, Idle, Move, "all results in but no request budget left"},
		{Tooling, Interject, Tooling, Internal, "queue the text for the next request"},
		{Tooling, Cancel, Interrupted, Move, "cancel every tool; synthetic results close the calls"},
		{Tooling, Timeout, Interrupted, Move, "turn deadline: abort like a cancel, typed reason"},

		{Delegating, ToolResult, Delegating, Internal, "record one tool result or refusal; wait for the rest"},
		{Delegating, ChildOutcome, Delegating, Internal, "record a child's typed outcome as its tool result"},
		{Delegating, ResultsIn, Streaming, Move, "all results in: send the follow-up request"},
		{Delegating, BudgetExhausted, Idle, Move, "all results in but no request budget left"},
		{Delegating, Interject, Delegating, Internal, "queue the text for the next request"},
		{Delegating, Cancel, Interrupted, Move, "cancel every child subtree and tool (F2)"},
		{Delegating, Timeout, Interrupted, Move, "turn deadline: abort the subtree, typed reason"},

		{Interrupted, Submit, Interrupted, Internal, "queue the submission until the tree has settled"},
		{Interrupted, Interject, Interrupted, Internal, "queue the text as the next submission"},
		{Interrupted, Cancel, Interrupted, Ignore, "repeated interrupt: a recorded no-op, coalesced into the first (F8, I11)"},
		{Interrupted, Settled, Idle, Move, "everything stopped or was abandoned: outcome recorded"},
	}
}

// Lookup returns the declared transition for (from, trigger), if any.
func Lookup(from State, trigger Trigger) (Transition, bool) {
	for _, t := range Table() {
		if t.From == from && t.Trigger == trigger {
			return t, true
		}
	}
	return Transition{}, false
}

// UndeclaredError reports a (state, trigger) pair the table does not declare.
// The kernel turns it into an error effect and does not proceed.
type UndeclaredError struct {
	State   State
	Trigger Trigger
}

func (e *UndeclaredError) Error() string {
	return fmt.Sprintf("undeclared transition: trigger %s in state %s", e.Trigger, e.State)
}

// MarshalText prints states by name in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a state name.
func (s *State) UnmarshalText(b []byte) error { return enumtext.Parse(s, stateNames[:], b, "state") }

// MarshalText prints triggers by name in JSON.
func (t Trigger) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses a trigger name.
func (t *Trigger) UnmarshalText(b []byte) error {
	return enumtext.Parse(t, triggerNames[:], b, "trigger")
}
