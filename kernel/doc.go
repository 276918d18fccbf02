// Package kernel is escapement's pure core: a tree of agents, each an
// fsm.Machine-governed state plus an OpenAI-shaped chat history, driven by
// events and answering with effects.
//
// The kernel never reads a clock, never starts a goroutine, never does I/O and
// holds no global state (F9). Time arrives in Event.At; everything it wants
// done leaves Step as Effect values: start/cancel an LLM request, start/cancel
// a tool, set/stop a timer, emit a lifecycle event, report an error. The same
// event sequence always produces the same effect sequence (I6).
//
// Step first drops stale events (an op id the kernel no longer tracks, a
// duplicate chunk, an interrupt bound to an ended turn) and only then
// dispatches to small per-state functions. Every state change goes through the
// FSM; a (state, trigger) pair the FSM does not declare becomes an EffError
// naming both, and nothing else happens.
//
// Semantics (docs/semantics.md), with the failure each rule rules out:
//   - Cancel aborts the target and its whole live subtree in one Step: streams
//     and tools get exactly one cancel each, partial text is kept and flagged
//     (F7), half-streamed tool calls are dropped (F12), every open call gets a
//     synthetic or typed result (F11), one marker is appended (F6), and each
//     agent returns to Idle when its operations have ended or their grace
//     expired (F3). Children learn through explicit links, not a bus (F2, F4).
//   - From Interrupted there is no edge to Streaming: no request can follow an
//     interrupt until the user submits again (F1).
//   - A child's outcome reaches its parent as structured tool content with a
//     typed outcome and reason (F5, F13); UI strings never enter a history.
//   - Interject and cancel are separate inputs; interjected text is kept
//     exactly once; repeated cancels are coalesced (F8, F14).
//   - Deadlines: the watchdog of a request watches only that stream's silence;
//     a child's turn deadline never exceeds its parent's (F4).
//   - Profiles: a delegation names its child's profile; a call outside the
//     caller's profile is refused and never runs, and a child never gets a
//     tool its parent lacks (profile.go).
//   - A call of a tool Config.Ask names waits for a decision (EvDecision,
//     bound to its agent, call and the Digest of its arguments) before it
//     starts; the wait ends once — approved, denied, expired or withdrawn
//     by its turn's abort — and never outlives its turn deadline.
//
// # Using it
//
// A host builds a tree with New (Config{Limits: DefaultLimits()} is a valid
// start), feeds it events made by Submit, Interject, Cancel, TextDelta,
// CallFragment, LLMEnd, ToolResult, TimerFired and the rest, and executes the
// effects each Step returns, in order: it starts and cancels what they name
// and answers with events carrying their op ids. Example drives a turn with
// a tool call that way; Example_cancel is an Esc mid-answer. The two hosts in
// this module are the simulator (package sim, virtual time) and the live
// driver (adapters/live, real time, goroutines); a program that only wants a
// live agent uses the driver and never calls Step itself.
//
// # Its behaviour as text
//
// The files in testdata/ tell the kernel's behaviour as stories, the way
// etcd-io/raft's interaction tests do: commands in (submit, chunk main
// "Hel", result c1 ok "42", cancel main, advance 2s, recover, ...), and
// under each the kernel's answer — the event as fed, then one Describe line
// per effect and lifecycle record, in the order Step returned them. Each
// file names what it shows, the docs/semantics.md sections it illustrates
// and the failure classes it covers; together they fire every row of
// fsm.Table() and cover F1–F14 (TestTranscriptCoverage). A change that
// alters behaviour fails TestTranscripts with a diff; an intended one is
// recorded with
//
//	go test ./kernel -run TestTranscripts -rewrite
//
// and reviewed as a text diff. docs/development.md, "Kernel transcripts",
// lists the commands and says how to add a file.
//
// An input the kernel refuses yields an EffError whose Err wraps
// ErrEmptyText, ErrShutdown, ErrUnknownAgent, ErrNotWaiting,
// ErrDigestMismatch or ErrNotIdle (a compact input while the root works),
// or is a *fsm.UndeclaredError; nothing else happens. Token usage,
// reasoning and compaction are in usage.go, compact.go and summary.go
// (docs/semantics.md, "Usage", "Reasoning", "Compaction"). docs/embedding.md, "The
// kernel contract", lists the effects and limits, docs/semantics.md what every input
// does in every state, and docs/durable.md how Recover rebuilds a tree after
// a crash.
package kernel
