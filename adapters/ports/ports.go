package ports

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/escapement/escapement/kernel"
)

// Model is the driver's port to a language model. The OpenAI-compatible
// adapter (adapters/openai) implements it over HTTP; tests implement it in
// memory (ModelFunc), so the driver runs unchanged under testing/synctest.
type Model interface {
	// Stream sends req as one chat request and reports what arrives through
	// sink, in order, from the calling goroutine. It returns nil when the
	// stream finished normally, an error (ideally a *FailureError naming the
	// kernel failure class) when it failed, and promptly after ctx is
	// cancelled (the driver then reports the cancel's acknowledgement
	// itself, whatever Stream returns). Retries before the first token are
	// the model's business; it reports each through sink.Retry.
	//
	// A Stream that has not returned within the kernel's Grace of its cancel
	// is abandoned: the driver stops waiting for it (Run may return and the
	// process exit while it still runs), its sink drops everything, and
	// what it returns is dropped too. It must hold nothing that outlives the
	// process but what the operating system reclaims.
	Stream(ctx context.Context, req Request, sink Sink) error
}

// Request is one chat request the kernel asked for (EffStartLLM).
type Request struct {
	// Op identifies this request among the tree's operations (in the
	// Observer's lifecycle records and Abandoned).
	Op kernel.OpID
	// Agent is the agent that asks (kernel.Root for the root).
	Agent kernel.AgentID
	// Path names the agent ("main/explore") for logs.
	Path string
	// Messages is a read-only view of the agent's history: the adapter sends
	// Role, Content, ToolCalls and ToolCallID, and the reasoning its
	// provider needs back (docs/semantics.md, "Reasoning"), nothing else.
	Messages []kernel.Message
	// Tools, when not nil, are the tools this request offers the model,
	// in place of any list the Model was built with. The driver leaves it
	// nil; adapters/agent sets it (the agent's tools, and the delegate
	// tool when the agent may delegate), and so does adapters/profiles
	// (its profile's). Read-only.
	Tools []ToolSpec
	// Compaction marks a compaction's summarising request
	// (kernel.Effect.Compact; docs/semantics.md, "Compaction"): the adapter
	// sends it without tools (Tools too), and its answer is the summary.
	Compaction bool
	// Profile names the agent's profile (kernel.Effect.Profile; "" for
	// none), so a host with profiles sends the request to that profile's
	// model (adapters/profiles; docs/semantics.md, "Profiles").
	Profile string
}

// Sink receives one stream's output. Each call becomes one kernel event, in
// order and never dropped while the request is live: it blocks while the
// kernel's goroutine is busy (back-pressure, so a fast stream cannot queue
// unbounded memory). Once the kernel has cancelled the request (an
// interrupt, a timeout, a shutdown) nothing more can reach the model: every
// call returns at once, also one already blocked, and drops its value.
type Sink interface {
	// Text is a streamed text delta.
	Text(text string)
	// Call is a streamed tool-call fragment, passed through raw: the kernel
	// assembles fragments and answers malformed arguments itself (F12, F11).
	Call(d kernel.CallDelta)
	// Retry reports that the request is being retried before its first
	// token: which attempt comes next, after what delay, and why.
	Retry(attempt int, delay time.Duration, cause string)
	// Usage records token accounting; it rides on the stream's end event.
	Usage(u kernel.Usage)
}

// ProgressSink is a Sink that can also be told the stream is alive and
// producing output that is no part of the answer — a reasoning model's
// thinking (reasoning_content), which the adapter neither shows nor keeps.
// The driver's sink implements it: each Progress becomes a chunk without
// text (an EvLLMDelta with empty Text), which the kernel counts like any
// chunk (docs/semantics.md: a delta is progress for the watchdogs), so a
// long reasoning phase is not taken for a silent server and ended as a
// first-token or stall timeout. A Model finds it with a type assertion;
// a Sink without it only loses the progress.
type ProgressSink interface {
	Sink
	Progress()
}

// ReasoningSink is a Sink that can also keep the model's reasoning: the
// Model reports it once, when the stream ended normally, and the driver
// puts it on the stream's end event, so the kernel keeps it with the
// message that end appends and hands it back in later requests
// (docs/semantics.md, "Reasoning"). It is never shown. A Model finds it
// with a type assertion; a Sink without it only loses the reasoning (a
// provider that needs it back then refuses the follow-up request).
type ReasoningSink interface {
	Sink
	Reasoning(r kernel.Reasoning)
}

// FailureError is a model error that names the kernel failure class it must
// be reported as (rate limit, server, disconnect, stream, bad response).
type FailureError struct {
	Failure kernel.Failure
	Err     error
}

// Fail wraps err with the failure class the driver reports to the kernel; a
// Model returns it from Stream (an error that is not a *FailureError counts
// as a server failure before the first chunk, a stream failure after).
func Fail(f kernel.Failure, err error) error { return &FailureError{Failure: f, Err: err} }

func (e *FailureError) Error() string {
	if e.Err == nil {
		return e.Failure.String()
	}
	return e.Err.Error()
}

func (e *FailureError) Unwrap() error { return e.Err }

// FailureOf classifies a Stream error for the kernel, as every host does
// (the live driver, the Temporal worker): the failure a *FailureError
// names; else a stream error once chunks arrived (the kernel must not
// assume the answer is whole) and a server error before.
func FailureOf(err error, chunks int) kernel.Failure {
	var fe *FailureError
	if errors.As(err, &fe) && fe.Failure != kernel.FailureNone {
		return fe.Failure
	}
	if chunks > 0 {
		return kernel.FailureStream
	}
	return kernel.FailureServer
}

// Tools is the driver's port to tool execution. adapters/tools implements it
// with real files and processes; tests implement it in memory (ToolsFunc).
// The kernel handles the delegate tool itself: Run never sees it.
type Tools interface {
	// Run executes call and returns its result. It must return promptly
	// after ctx is cancelled (with ToolCancelled, or whatever actually
	// happened): the kernel waits the grace period for that answer. A Run
	// still running after it is abandoned: the driver stops waiting for it
	// (its Run may return and the process exit while the tool still runs),
	// and its late result never reaches the model. Anything it started
	// that must not outlive the process (a child process group) it must
	// stop itself on cancel. Unknown tools and bad arguments are ToolError
	// results; a panic becomes one.
	Run(ctx context.Context, call Call) ToolResult
}

// Call is one tool call the kernel started (EffStartTool).
type Call struct {
	// Op identifies this call among the tree's operations (in the
	// Observer's lifecycle records and Abandoned).
	Op kernel.OpID
	// Agent is the agent whose model asked for the call.
	Agent kernel.AgentID
	// Path names that agent ("main/explore") for logs.
	Path string
	// ToolCall is what the model asked for: the call's ID, the tool's Name
	// and its Arguments (JSON text as the model wrote it, not validated
	// against the tool's schema; empty when the model sent none).
	kernel.ToolCall
}

// ToolResult is what a tool produced: Content goes to the model as the tool
// message; Status says how the tool ended.
type ToolResult struct {
	// Status is kernel.ToolOK (the zero value), kernel.ToolError, or
	// kernel.ToolCancelled once ctx was cancelled. A ToolCancelled the
	// kernel did not ask for counts as a failure.
	Status kernel.ToolStatus
	// Content is the tool message the model reads, also for an error.
	Content string
}

// ToolSpec describes one tool to the model: a name, what it is for, and the
// JSON Schema of its arguments (an OpenAI function definition).
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// ModelFunc adapts a function to Model (in-memory models in tests).
type ModelFunc func(ctx context.Context, req Request, sink Sink) error

// Stream calls f.
func (f ModelFunc) Stream(ctx context.Context, req Request, sink Sink) error {
	return f(ctx, req, sink)
}

// ToolsFunc adapts a function to Tools (in-memory tools in tests).
type ToolsFunc func(ctx context.Context, call Call) ToolResult

// Run calls f.
func (f ToolsFunc) Run(ctx context.Context, call Call) ToolResult { return f(ctx, call) }
