package spans

import (
	"fmt"
	"time"

	"github.com/escapement/escapement/kernel"
)

// Kind says what a span stands for.
type Kind uint8

// Span kinds.
const (
	KindNone Kind = iota
	// KindAgent is one turn of one agent: invoke_agent {agent}.
	KindAgent
	// KindChat is one model request (an EffStartLLM op): chat {model}.
	KindChat
	// KindTool is one tool op (an EffStartTool): execute_tool {tool}.
	KindTool
	// KindDelegation is a call of the delegate tool that spawned a child:
	// execute_tool {tool} {child}. The child's KindAgent span nests under it.
	KindDelegation
)

var kindNames = [...]string{"", "agent", "chat", "tool", "delegation"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Operation is the span's gen_ai.operation.name.
func (k Kind) Operation() string {
	switch k {
	case KindAgent:
		return "invoke_agent"
	case KindChat:
		return "chat"
	case KindTool, KindDelegation:
		return "execute_tool"
	}
	return ""
}

// ID numbers the spans of one derivation from 1, in the order they start;
// 0 is no span (the parent of a root turn's span). The same steps give the
// same ids, so a process that replays a crashed one's log derives its ids.
type ID uint64

// Span is one span and what the derivation knows of it so far. A Deriver
// owns it and changes it only inside Step; a reader may keep a copy.
type Span struct {
	ID     ID
	Parent ID
	// Trace is the number of the root's turn the span belongs to: every
	// root turn is one trace, its children's spans in it.
	Trace uint64
	Kind  Kind
	// Agent is the agent whose turn, request or call this is; AgentName
	// its instance name ("main", "helper#2") and AgentPath its path from
	// the root ("main/helper#2").
	Agent     kernel.AgentID
	AgentName string
	AgentPath string
	// Turn is the agent's turn (every kind: the turn the span runs in).
	Turn uint64
	// Op is a chat or tool span's op.
	Op kernel.OpID
	// CallID and Tool name a tool or delegation span's call.
	CallID string
	Tool   string
	// Child and ChildName are a delegation's child.
	Child     kernel.AgentID
	ChildName string
	// Model is a chat span's model (Config.Model).
	Model string
	// Compaction is why a chat span's request is a compaction's
	// summarising request (threshold, context_length, requested:
	// docs/semantics.md, "Compaction"); "" for any other request.
	Compaction string
	Start      time.Duration
	End        time.Duration
	Ended      bool

	// What ended it. Outcome: an agent span's turn outcome (a
	// delegation's: its child's). OpEnd: a chat or tool span's op end.
	// Status: a tool or delegation span's call result (CallNone while the
	// call has none). Failure: a failed request's class. Reason: the typed
	// reason an abort, a deadline, a failure or a crash gave; for a
	// cancelled op the reason its cancel was sent for (ReasonNone for an
	// interjection's cut).
	Outcome kernel.Outcome
	OpEnd   kernel.OpEnd
	Status  kernel.CallStatus
	Failure kernel.Failure
	Reason  kernel.Reason
	// Detail is a failed request's message, or why a turn that did not
	// complete ended (the failure, the cap that was hit).
	Detail string
	// A chat span's usage when the model reported it, the reason its
	// stream finished ("stop", "tool_calls"; "" when it did not finish on
	// its own) and when its first chunk came (FirstChunk, when GotChunk).
	Usage        *kernel.Usage
	FinishReason string
	GotChunk     bool
	FirstChunk   time.Duration
	// Cancelled is set once the op was told to stop (chat, tool).
	Cancelled bool
	Events    []Event

	// Content, recorded on spans only on the conventions' opt-in (the
	// exporter decides): a chat span's request messages (the kernel's
	// read-only view of the history), a tool span's arguments and result,
	// a delegation's task and its child's final or partial text, an agent
	// span's first user text and its turn's text, a compaction's summary
	// (a chat span's Output: its answer is not in the history it replaced).
	Input  []kernel.Message
	Args   string
	Result string
	Task   string
	Output string

	// The derivation's own bookkeeping.
	ownEnded bool // what the span stands for has ended
	children int  // spans under it not yet ended
}

// EventKind says what a span event reports.
type EventKind uint8

// Span events.
const (
	EventNone EventKind = iota
	// EventRetry (chat): the adapter retries the request (N attempt, Delay,
	// Text the cause).
	EventRetry
	// EventInterrupted (agent): the turn was aborted with Reason.
	EventInterrupted
	// EventTimedOut (agent, tool): a deadline fired with Reason.
	EventTimedOut
	// EventInterjected (agent): user text reached the agent (Queued:
	// it waits for the next request).
	EventInterjected
	// EventCall (agent): a call got its result without running — refused,
	// malformed, cancelled while it waited for a slot, denied, expired or
	// withdrawn while it waited for a decision (CallID, Tool, Status,
	// Reason).
	EventCall
	// EventCallDropped (agent): a half-streamed call was dropped (CallID,
	// Tool).
	EventCallDropped
	// EventRecovered (agent): a recovered host resolved N ops.
	EventRecovered
	// EventRequestWaiting (agent): the turn's N-th request — or, Tool
	// "compaction", a compaction's summarising request — waits for one of
	// the tree's max_parallel_requests slots; its chat span starts when it
	// gets one.
	EventRequestWaiting
	// EventApprovalRequested (agent): call CallID (Tool; its arguments'
	// Digest) waits for a person's decision, for at most Delay. A recovery
	// asks again for every wait it finds, so one wait may have two.
	EventApprovalRequested
	// EventApprovalResolved (agent): call CallID's wait ended (Approval,
	// with Reason when it was not approved) after Delay; an approved
	// call's execute_tool span starts when the call does.
	EventApprovalResolved
	// EventApprovalGranted (agent): a decision granted Tool for the
	// session: with any arguments, or — Digest set — with those only.
	EventApprovalGranted
	// EventCompacted (agent): a compaction replaced the agent's history,
	// N messages summarised.
	EventCompacted
)

var eventNames = [...]string{"", "escapement.retry", "escapement.interrupted", "escapement.timed_out",
	"escapement.interjected", "escapement.call", "escapement.call_dropped", "escapement.recovered",
	"escapement.request_waiting", "escapement.approval_requested", "escapement.approval_resolved", "escapement.approval_granted",
	"escapement.compacted"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) {
		return eventNames[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is a span event.
type Event struct {
	Kind   EventKind
	At     time.Duration
	N      int
	Delay  time.Duration
	Reason kernel.Reason
	Status kernel.CallStatus
	CallID string
	Tool   string
	Queued bool
	// Text is a retry's cause (diagnostics, not message content).
	Text string
	// Digest and Approval are an approval record's (its arguments'
	// digest, how its wait ended).
	Digest   string
	Approval kernel.ApprovalEnd
}

// ChangeKind says what happened to a span in a step.
type ChangeKind uint8

// Changes.
const (
	Started ChangeKind = iota + 1
	Evented
	Ended
)

var changeNames = [...]string{"", "started", "evented", "ended"}

func (k ChangeKind) String() string {
	if int(k) < len(changeNames) {
		return changeNames[k]
	}
	return fmt.Sprintf("change(%d)", uint8(k))
}

// Change is one thing a step did to a span: started it, added an event
// (Event), or ended it. Span points at the Deriver's span, valid until the
// next Step; copy it to keep it.
type Change struct {
	Kind  ChangeKind
	Span  *Span
	Event Event
}

// Name is the span's name by the GenAI conventions: invoke_agent
// {gen_ai.agent.name}, {gen_ai.operation.name} {gen_ai.request.model},
// execute_tool {gen_ai.tool.name}, and for a delegation execute_tool
// {gen_ai.tool.name} {gen_ai.transfer.target.name}.
func (s *Span) Name() string {
	op := s.Kind.Operation()
	switch s.Kind {
	case KindAgent:
		return joinName(op, s.AgentName)
	case KindChat:
		return joinName(op, s.Model)
	case KindTool:
		return joinName(op, s.Tool)
	case KindDelegation:
		return joinName(joinName(op, s.Tool), s.ChildName)
	}
	return op
}

func joinName(a, b string) string {
	if b == "" {
		return a
	}
	return a + " " + b
}

// ErrorType is the span's error.type: "" when what it stands for
// completed; otherwise a low-cardinality class (docs/otel.md lists them):
// an agent span's or a delegation's turn outcome (interrupted, timed_out,
// failed, budget_exhausted), a failed request's failure class
// (rate_limit, server, disconnect, stream, bad_response), a failed tool's
// tool_error, and an op that did not end on its own answer: cancelled,
// abandoned, lost.
func (s *Span) ErrorType() string {
	if !s.Ended {
		return ""
	}
	switch s.Kind {
	case KindAgent, KindDelegation:
		if s.Outcome != kernel.OutcomeCompleted {
			return s.Outcome.String()
		}
	case KindChat, KindTool:
		switch s.OpEnd {
		case kernel.OpCompleted:
			return ""
		case kernel.OpFailed:
			if s.Kind == KindTool {
				return "tool_error"
			}
			if s.Failure != kernel.FailureNone {
				return s.Failure.String()
			}
			return "_OTHER"
		default:
			return s.OpEnd.String()
		}
	}
	return ""
}
