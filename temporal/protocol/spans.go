package protocol

import (
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
)

// SpanExport is what the workflow must know to derive the spans a worker
// exports (docs/temporal.md, "OpenTelemetry"): what the exporter would be
// told by a live run.
type SpanExport struct {
	// Model names the model in every chat span (gen_ai.request.model).
	Model string `json:"model,omitempty"`
	// Content is the conventions' opt-in to message content: the batches
	// carry each span's content (a request's messages, packed).
	Content bool `json:"content,omitempty"`
}

// SpanBatch is SpansActivity's input: the spans one workflow task ended,
// every span whole (its start, events and end), in the order they ended.
type SpanBatch struct {
	// Conversation is the workflow's id: the conversation every run of
	// the chain shares (gen_ai.conversation.id; it names the traces).
	Conversation string `json:"conversation"`
	// Origin is the wall time of the run's kernel time 0.
	Origin time.Time   `json:"origin"`
	Spans  []EndedSpan `json:"spans"`
}

// EndedSpan is one span of a SpanBatch. Without the content opt-in it
// carries no message content; with it, a chat span's messages travel
// packed (Input) and its answer beside it.
type EndedSpan struct {
	Span   spans.Span      `json:"span"`
	Input  Transcript      `json:"input,omitzero"`
	Answer *kernel.Message `json:"answer,omitempty"`
}
