package spans

import "github.com/escapement/escapement/kernel"

// Attribute keys: the GenAI conventions' (open-telemetry/
// semantic-conventions-genai, gen-ai-spans.md and gen-ai-agent-spans.md)
// and escapement's own, under escapement.* (docs/otel.md lists them all).
const (
	KeyOperation      = "gen_ai.operation.name"
	KeyProvider       = "gen_ai.provider.name"
	KeyConversation   = "gen_ai.conversation.id"
	KeyRequestModel   = "gen_ai.request.model"
	KeyRequestStream  = "gen_ai.request.stream"
	KeyAgentName      = "gen_ai.agent.name"
	KeyToolName       = "gen_ai.tool.name"
	KeyToolCallID     = "gen_ai.tool.call.id"
	KeyToolType       = "gen_ai.tool.type"
	KeyTransferTarget = "gen_ai.transfer.target.name"
	KeyTransferMode   = "gen_ai.transfer.mode"
	KeyInputTokens    = "gen_ai.usage.input_tokens"
	KeyOutputTokens   = "gen_ai.usage.output_tokens"
	KeyFinishReasons  = "gen_ai.response.finish_reasons"
	KeyFirstChunk     = "gen_ai.response.time_to_first_chunk"
	KeyErrorType      = "error.type"
	KeyServerAddress  = "server.address"
	KeyServerPort     = "server.port"

	// Opt-in content (docs/otel.md, "Message content").
	KeyInputMessages  = "gen_ai.input.messages"
	KeyOutputMessages = "gen_ai.output.messages"
	KeyToolArguments  = "gen_ai.tool.call.arguments"
	KeyToolResult     = "gen_ai.tool.call.result"

	KeyAgentPath  = "escapement.agent.path"
	KeyTurn       = "escapement.turn"
	KeyOp         = "escapement.op"
	KeyReason     = "escapement.reason"
	KeyOutcome    = "escapement.outcome"
	KeyOpEnd      = "escapement.op.end"
	KeyCallStatus = "escapement.call.status"
	// An approval wait's end and its arguments' digest (docs/semantics.md,
	// "Approvals").
	KeyApproval       = "escapement.approval"
	KeyApprovalDigest = "escapement.approval.digest"
	// Why a request is a compaction's summarising request.
	KeyCompaction = "escapement.compaction"
	// The parts of a request's usage the server broke down (the
	// conventions': included in the input and output counts).
	KeyCachedTokens    = "gen_ai.usage.cache_read.input_tokens"
	KeyReasoningTokens = "gen_ai.usage.reasoning.output_tokens"
)

// Attr is one attribute. Value is a string, an int64, a float64, a bool
// or a []string.
type Attr struct {
	Key   string
	Value any
}

// StartAttrs are the attributes known when the span starts — those the
// conventions want at creation for sampling among them.
func (s *Span) StartAttrs() []Attr {
	a := []Attr{
		{KeyOperation, s.Kind.Operation()},
		{KeyAgentName, s.AgentName},
		{KeyAgentPath, s.AgentPath},
		{KeyTurn, int64(s.Turn)},
	}
	switch s.Kind {
	case KindChat:
		if s.Model != "" {
			a = append(a, Attr{KeyRequestModel, s.Model})
		}
		a = append(a, Attr{KeyRequestStream, true}, Attr{KeyOp, int64(s.Op)})
		if s.Compaction != "" {
			a = append(a, Attr{KeyCompaction, s.Compaction})
		}
	case KindTool:
		a = append(a, Attr{KeyToolName, s.Tool}, Attr{KeyToolCallID, s.CallID}, Attr{KeyToolType, "function"}, Attr{KeyOp, int64(s.Op)})
	case KindDelegation:
		a = append(a, Attr{KeyToolName, s.Tool}, Attr{KeyToolCallID, s.CallID}, Attr{KeyToolType, "function"},
			Attr{KeyTransferTarget, s.ChildName}, Attr{KeyTransferMode, "return_to_caller"})
	}
	return a
}

// EndAttrs are the attributes known when it ends: what ended it
// (error.type and the typed reason when anything but its own success did),
// and a request's usage, finish reason and time to its first chunk.
func (s *Span) EndAttrs() []Attr {
	var a []Attr
	if et := s.ErrorType(); et != "" {
		a = append(a, Attr{KeyErrorType, et})
	}
	if s.Reason != kernel.ReasonNone {
		a = append(a, Attr{KeyReason, s.Reason.String()})
	}
	switch s.Kind {
	case KindAgent, KindDelegation:
		a = append(a, Attr{KeyOutcome, s.Outcome.String()})
	case KindChat:
		a = append(a, Attr{KeyOpEnd, s.OpEnd.String()})
		if u := s.Usage; u != nil {
			a = append(a, Attr{KeyInputTokens, int64(u.PromptTokens)}, Attr{KeyOutputTokens, int64(u.CompletionTokens)})
			if u.CachedTokens > 0 {
				a = append(a, Attr{KeyCachedTokens, int64(u.CachedTokens)})
			}
			if u.ReasoningTokens > 0 {
				a = append(a, Attr{KeyReasoningTokens, int64(u.ReasoningTokens)})
			}
		}
		if s.FinishReason != "" {
			a = append(a, Attr{KeyFinishReasons, []string{s.FinishReason}})
		}
		if s.GotChunk {
			a = append(a, Attr{KeyFirstChunk, (s.FirstChunk - s.Start).Seconds()})
		}
	case KindTool:
		a = append(a, Attr{KeyOpEnd, s.OpEnd.String()})
	}
	if s.Status != kernel.CallNone {
		a = append(a, Attr{KeyCallStatus, s.Status.String()})
	}
	return a
}

// Attrs are an event's attributes.
func (e Event) Attrs() []Attr {
	var a []Attr
	switch e.Kind {
	case EventRetry:
		a = append(a, Attr{"escapement.attempt", int64(e.N)}, Attr{"escapement.delay", e.Delay.Seconds()}, Attr{"escapement.cause", e.Text})
	case EventInterrupted, EventTimedOut:
		a = append(a, Attr{KeyReason, e.Reason.String()})
	case EventInterjected:
		a = append(a, Attr{"escapement.queued", e.Queued})
	case EventCall:
		a = append(a, Attr{KeyToolCallID, e.CallID}, Attr{KeyToolName, e.Tool}, Attr{KeyCallStatus, e.Status.String()})
		if e.Reason != kernel.ReasonNone {
			a = append(a, Attr{KeyReason, e.Reason.String()})
		}
	case EventCallDropped:
		a = append(a, Attr{KeyToolCallID, e.CallID}, Attr{KeyToolName, e.Tool})
	case EventRecovered:
		a = append(a, Attr{"escapement.ops", int64(e.N)})
	case EventRequestWaiting:
		if e.Tool == compactionRequest {
			a = append(a, Attr{KeyCompaction, "waiting"})
		} else {
			a = append(a, Attr{"escapement.request", int64(e.N)})
		}
	case EventCompacted:
		a = append(a, Attr{"escapement.messages", int64(e.N)})
	case EventApprovalRequested:
		a = append(a, Attr{KeyToolCallID, e.CallID}, Attr{KeyToolName, e.Tool}, Attr{KeyApprovalDigest, e.Digest},
			Attr{"escapement.approval.expires_in", e.Delay.Seconds()})
	case EventApprovalResolved:
		a = append(a, Attr{KeyToolCallID, e.CallID}, Attr{KeyToolName, e.Tool}, Attr{KeyApproval, e.Approval.String()},
			Attr{"escapement.approval.waited", e.Delay.Seconds()})
		if e.Reason != kernel.ReasonNone {
			a = append(a, Attr{KeyReason, e.Reason.String()})
		}
	case EventApprovalGranted:
		a = append(a, Attr{KeyToolName, e.Tool}, Attr{KeyToolCallID, e.CallID})
		if e.Digest != "" {
			a = append(a, Attr{"escapement.approval.grant", "arguments"}, Attr{KeyApprovalDigest, e.Digest})
		} else {
			a = append(a, Attr{"escapement.approval.grant", "tool"})
		}
	}
	return a
}
