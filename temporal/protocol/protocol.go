// Package protocol is what crosses the wire between the escapement
// workflow, its activities and its clients when an agent tree runs on
// Temporal (docs/durable.md, "On Temporal"): the names
// of the workflow, its activities, signals, updates and query, and the
// payloads each carries. The workflow and the activities live in package
// host, the client in package remote; both import this one, so a client
// needs no worker code.
//
// Every payload is plain JSON through Temporal's default data converter;
// the kernel's types (kernel.Limits, kernel.Message, kernel.Lifecycle, …)
// travel in their own JSON form. The one exception is a transcript
// (Transcript), which is compressed: a request's transcript is the
// biggest thing a workflow sends, once per model request, and the
// service caps one payload (2 MB by default) and a whole history (50 MB).
package protocol

import (
	"time"

	"github.com/escapement/escapement/kernel"
)

// Names registered with Temporal. The workflow's own names (signals,
// updates, the query) are scoped to its executions; the activity names
// share a worker's registry with whatever else it runs, hence the prefix.
const (
	// Workflow is the workflow type: one execution runs one agent tree.
	Workflow = "escapement.tree"
	// StreamActivity streams one model request (a start_llm effect).
	StreamActivity = "escapement.stream"
	// ToolActivity runs one tool call (a start_tool effect).
	ToolActivity = "escapement.tool"
	// ToolboxActivity tells the workflow which of the worker's tools are
	// idempotent (kernel.Config.Idempotent), once per run.
	ToolboxActivity = "escapement.toolbox"

	// ChunksSignal carries a batch of a stream's chunks (Chunks) from the
	// stream activity to its workflow.
	ChunksSignal = "chunks"
	// ShutdownSignal shuts the tree down (kernel.EvShutdown) and ends the
	// workflow once the tree has settled. It carries nothing.
	ShutdownSignal = "shutdown"

	// SubmitUpdate, SayUpdate and InterjectUpdate carry a user text
	// (string) to the root; CancelUpdate carries a Cancel. Each returns
	// Accepted, or the kernel's refusal as an error (see Refusal types).
	SubmitUpdate    = "submit"
	SayUpdate       = "say"
	InterjectUpdate = "interject"
	CancelUpdate    = "cancel"
	// CompactUpdate asks for the root's history to be compacted now
	// (kernel.EvCompact); it carries the focus (a string, may be empty).
	CompactUpdate = "compact"
	// DecideUpdate carries a Decision on a call that waits for approval
	// (kernel.EvDecision).
	DecideUpdate = "decide"

	// LifecycleQuery reads the tree's lifecycle log from a sequence number
	// (its argument, a uint64) and returns a Page.
	LifecycleQuery = "lifecycle"

	// DefaultTaskQueue is the task queue workers poll and clients start
	// workflows on when none is named.
	DefaultTaskQueue = "escapement"
)

// Refusal types: the Type of the temporal.ApplicationError an update
// returns when the input was not stepped as asked. Refusals names the
// kernel's own, each with the kernel's error; RefusedUndeclared is an
// *fsm.UndeclaredError (a submit while the root works), RefusedOther a
// refusal with no type of its own; the last two are the workflow's.
const (
	RefusedUndeclared = "undeclared_transition"
	RefusedOther      = "rejected"
	// RefusedContinuing: this run is about to continue as new (or to end)
	// and takes no more input; the client sends it again, to the next run.
	RefusedContinuing = "continuing"
	// RefusedStopped: the tree was shut down; the workflow is ending.
	RefusedStopped = "stopped"
)

// Refusals pairs each refusal type with the kernel's error it stands for,
// so a client's error matches the kernel's with errors.Is wherever the
// tree runs.
var Refusals = []struct {
	Type string
	Err  error
}{
	{"empty_text", kernel.ErrEmptyText},
	{"shutdown", kernel.ErrShutdown},
	{"unknown_agent", kernel.ErrUnknownAgent},
	{"not_idle", kernel.ErrNotIdle},
	{"not_waiting", kernel.ErrNotWaiting},
	{"digest_mismatch", kernel.ErrDigestMismatch},
}

// Tree is the workflow's input: the kernel's configuration, and what a
// run that continued as new carries over from the run before it.
type Tree struct {
	// Limits are the tree's deadlines and budgets (kernel.Config.Limits).
	Limits kernel.Limits `json:"limits"`
	// System is the root's system prompt.
	System string `json:"system,omitempty"`
	// Ask names the tools whose calls wait for a decision (DecideUpdate)
	// before they start (kernel.Config.Ask).
	Ask []string `json:"ask,omitempty"`
	// Options tune the workflow itself; zero fields take their defaults.
	Options Options `json:"options,omitzero"`

	// Carried across Continue-As-New: the root's transcript and turn
	// count, exactly as a resumed session seeds a kernel
	// (kernel.Config.History and Turns), and how many runs came before.
	History Transcript `json:"history,omitzero"`
	Turns   uint64     `json:"turns,omitempty"`
	Run     int        `json:"run,omitempty"`
}

// Options tune how the workflow maps the kernel onto Temporal
// (docs/temporal.md, "Tuning"). Zero fields take the defaults below.
type Options struct {
	// HeartbeatTimeout is how long an activity may go without a heartbeat
	// before its worker counts as lost. Activities heartbeat far more
	// often (HeartbeatEvery), so this is the time to notice a dead worker.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	// ChunkEvery is how often a streaming activity sends the chunks it
	// has gathered to the workflow (one signal per batch).
	ChunkEvery time.Duration `json:"chunk_every,omitempty"`
	// ContinueAfterEvents and ContinueAfterBytes: once the run's history
	// holds this many events or bytes (or the service suggests it), the
	// workflow continues as new at the next point where the tree is idle.
	ContinueAfterEvents int `json:"continue_after_events,omitempty"`
	ContinueAfterBytes  int `json:"continue_after_bytes,omitempty"`
	// StopAtEvents and StopAtBytes: a turn still running when the history
	// reaches this size is shut down (reason shutdown) so the run can
	// continue as new before the service's hard limit ends it.
	StopAtEvents int `json:"stop_at_events,omitempty"`
	StopAtBytes  int `json:"stop_at_bytes,omitempty"`
}

// Option defaults. The service's limits are 51,200 events and 50 MB per
// history, with a warning at 10,240 events and 10 MB.
const (
	DefaultHeartbeatTimeout    = 10 * time.Second
	DefaultChunkEvery          = 500 * time.Millisecond
	DefaultContinueAfterEvents = 10_240
	DefaultContinueAfterBytes  = 10 << 20
	DefaultStopAtEvents        = 40_960
	DefaultStopAtBytes         = 40 << 20
)

// WithDefaults fills the zero fields.
func (o Options) WithDefaults() Options {
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if o.ChunkEvery <= 0 {
		o.ChunkEvery = DefaultChunkEvery
	}
	if o.ContinueAfterEvents <= 0 {
		o.ContinueAfterEvents = DefaultContinueAfterEvents
	}
	if o.ContinueAfterBytes <= 0 {
		o.ContinueAfterBytes = DefaultContinueAfterBytes
	}
	if o.StopAtEvents <= 0 {
		o.StopAtEvents = DefaultStopAtEvents
	}
	if o.StopAtBytes <= 0 {
		o.StopAtBytes = DefaultStopAtBytes
	}
	return o
}

// HeartbeatEvery is how often an activity heartbeats: often enough that
// a cancel (which reaches an activity only through a heartbeat's answer)
// arrives well within the kernel's grace, and several times per heartbeat
// timeout. The worker must not throttle heartbeats beyond it
// (host.WorkerOptions).
func HeartbeatEvery(grace, heartbeatTimeout time.Duration) time.Duration {
	return max(50*time.Millisecond, min(grace/8, heartbeatTimeout/4))
}

// Result is what the workflow returns when the tree was shut down.
type Result struct {
	// Turns is how many turns the root had, over every run.
	Turns uint64 `json:"turns"`
	// Outcome and Reason are the root's last turn's.
	Outcome kernel.Outcome `json:"outcome"`
	Reason  kernel.Reason  `json:"reason,omitempty"`
}

// Cancel is CancelUpdate's argument: the agent whose turn to cancel and,
// when not 0, the turn the cancel is bound to (kernel.CancelTurn).
type Cancel struct {
	Agent kernel.AgentID `json:"agent"`
	Turn  uint64         `json:"turn,omitempty"`
}

// Decision is DecideUpdate's argument (kernel.Decide): the verdict on call
// CallID of Agent, for the arguments whose digest is Digest
// (kernel.Digest; a denial may leave it empty), with a note for the model.
type Decision struct {
	Agent   kernel.AgentID `json:"agent"`
	CallID  string         `json:"call_id"`
	Digest  string         `json:"digest,omitempty"`
	Verdict kernel.Verdict `json:"verdict"`
	Note    string         `json:"note,omitempty"`
}

// Accepted is an update's answer once the kernel stepped the input: the
// root's turn and state right after, and where that step's lifecycle
// records end (the run and the last record's sequence number), so a
// client that follows the records knows whether it has read past them.
type Accepted struct {
	Turn  uint64 `json:"turn"`
	State string `json:"state"`
	Run   int    `json:"run"`
	Seq   uint64 `json:"seq"`
}
