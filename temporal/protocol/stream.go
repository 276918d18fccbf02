package protocol

import (
	"time"

	"github.com/escapement/escapement/kernel"
)

// StreamRequest is StreamActivity's input: one start_llm effect.
type StreamRequest struct {
	Op    kernel.OpID    `json:"op"`
	Agent kernel.AgentID `json:"agent"`
	Path  string         `json:"path"`
	// Messages is the agent's history the request sends.
	Messages Transcript `json:"messages"`
	// Compaction marks a compaction's summarising request
	// (kernel.Effect.Compact): it is sent without tools.
	Compaction bool `json:"compaction,omitempty"`
	// ChunkEvery is how often the activity signals the chunks it has
	// gathered; HeartbeatEvery how often it heartbeats.
	ChunkEvery     time.Duration `json:"chunk_every"`
	HeartbeatEvery time.Duration `json:"heartbeat_every"`
}

// Item is one thing a stream produced, in order: a text delta, a
// tool-call fragment, a retry before the first token, or — all fields
// empty — progress (a reasoning model's thinking, which feeds the
// kernel's watchdogs and nothing else).
type Item struct {
	Text  string            `json:"text,omitempty"`
	Call  *kernel.CallDelta `json:"call,omitempty"`
	Retry *Retry            `json:"retry,omitempty"`
}

// Retry is an adapter's retry of a request before its first token.
type Retry struct {
	Attempt int           `json:"attempt"`
	Delay   time.Duration `json:"delay"`
	Cause   string        `json:"cause,omitempty"`
}

// Chunks is ChunksSignal's payload: the items of stream Op numbered
// First, First+1, … (items are numbered from 1 per stream). A batch may
// repeat items an earlier batch carried (a signal whose answer was lost
// is sent again); the workflow feeds each number once, in order.
type Chunks struct {
	Op    kernel.OpID `json:"op"`
	First uint32      `json:"first"`
	Items []Item      `json:"items"`
}

// StreamResult is StreamActivity's result: the items no signal was
// acknowledged for (numbered from First), then how the stream ended.
type StreamResult struct {
	First uint32        `json:"first"`
	Items []Item        `json:"items,omitempty"`
	Usage *kernel.Usage `json:"usage,omitempty"`
	// Reasoning is the model's hidden reasoning, reported when the stream
	// ended normally; it rides on the stream's end event.
	Reasoning *kernel.Reasoning `json:"reasoning,omitempty"`
	// Failure is kernel.FailureNone when the stream finished normally;
	// otherwise how it failed, Detail saying why (already redacted by the
	// model adapter).
	Failure kernel.Failure `json:"failure,omitempty"`
	Detail  string         `json:"detail,omitempty"`
}

// Progress is a stream activity's heartbeat detail: the answer's text
// that no acknowledged signal carried yet (Text, starting at byte Offset
// of the whole answer's text). When the worker is lost, the workflow
// keeps what it adds to the text it already had before it restarts the
// request, so the partial answer kept is the last heartbeat's or the
// last batch's, whichever is longer.
type Progress struct {
	Offset int    `json:"offset"`
	Text   string `json:"text,omitempty"`
}

// ToolRequest is ToolActivity's input: one start_tool effect.
type ToolRequest struct {
	Op             kernel.OpID     `json:"op"`
	Agent          kernel.AgentID  `json:"agent"`
	Path           string          `json:"path"`
	Call           kernel.ToolCall `json:"call"`
	HeartbeatEvery time.Duration   `json:"heartbeat_every"`
}

// ToolResult is ToolActivity's result.
type ToolResult struct {
	Status  kernel.ToolStatus `json:"status"`
	Content string            `json:"content"`
}

// Toolbox is ToolboxActivity's result: what the workflow must know of the
// worker's tools. Every worker of a task queue must offer the same tools.
type Toolbox struct {
	// Tools names every tool the worker runs (for the record).
	Tools []string `json:"tools"`
	// Idempotent names the tools that may run again after their worker
	// was lost (kernel.Config.Idempotent); any other call then gets a
	// tool_lost result.
	Idempotent []string `json:"idempotent,omitempty"`
}

// WorkerLost is the Type of the error an activity returns when its worker
// stops while it runs (a graceful shutdown): the workflow treats it as a
// lost worker at once, without waiting for the heartbeat timeout.
const WorkerLost = "worker_lost"
