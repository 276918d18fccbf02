// Package wal is escapement's write-ahead event log: the live driver's
// record of every event it fed the kernel, written before anything the
// event caused happens in the world, so a process killed at any instant
// can be rebuilt exactly and resumed (docs/durable.md).
//
// The kernel is pure and deterministic: replaying the events it was fed
// rebuilds its exact state, histories, op ids and lifecycle sequence
// numbers included. The log therefore needs nothing but the events (and
// the configuration they were fed to); it also holds each step's effects,
// so a rebuild can prove it reproduced the run, step by step, as
// `escapement sim replay` does for a trace.
//
// # Format
//
// A log is a kernel/trace file (JSON Lines, format 4): a header that
// records the kernel configuration (trace.HeaderOf: limits, root name,
// system prompts, the seeded history, prior turns, the idempotent tools,
// the tools that ask for approval, the delegate tool), then one "step" line
// per event with the effects it caused, and, when the run ended cleanly, an
// "end" line. A streamed chunk whose step did only what every chunk does
// (echo its text) is a "delta" record instead — its time, op and text,
// nothing repeated — so the log grows with the text, not with about 300
// bytes of framing per token (delta.go). A log without an end line is the
// log of a process that crashed; after a recovery the resumed process
// appends to the same file, its first step the EvRecover, so a second crash
// replays the first recovery too.
//
// # Write ordering and fsync
//
// Writer.Record is the driver's Config.WriteAhead hook: it runs after the
// kernel's Step and before the driver executes any of its effects, and
// writes the step's line with one write(2). So a record that is not in the
// file caused nothing in the world, and a record cut by the crash (a torn
// last line, which Read drops) caused nothing either: its write had not
// returned when the process died.
//
// A write survives the process (kill -9 included); only an operating
// system crash or a power cut can lose what was not fsynced. Record
// fsyncs after writing a step that
//
//   - starts a tool call of a tool not in the idempotent set: a log that
//     lost that record would rebuild a kernel that never started the call,
//     and the model could ask for it again — a second run of a command
//     that may already have taken effect;
//   - starts an LLM request: a request costs money and acts on the user's
//     input, which must not vanish once the model has seen it; one fsync
//     (about a millisecond) is small against a request's latency, and the
//     stream's chunks, the bulk of the log, are never synced one by one;
//   - is a user's input (submit, interjection, cancel, compact, shutdown,
//     an approval decision) or a recovery: human-rate events whose loss
//     the user would notice (an Esc forgotten, a restarted request that was
//     cancelled, an approval asked again);
//   - ends a turn of the root: a completed answer is durable before the
//     next prompt is shown.
//
// Everything else (chunks, tool results, timers) is written but not synced
// on its own; after a power cut the log is still a prefix of the run, and
// a prefix is always a valid history to rebuild from: what it lost is
// redone (a request restarted, an idempotent tool run again) or reported
// (tool_lost), never run twice without the model being told. A host that
// derives a file from the steps (a transcript) calls Writer.Sync before it
// writes to that file, so the file can lag the log after a power cut but
// never hold what the log lost.
//
// # Recovery
//
// Read parses a log (dropping a torn last line), Log.Rebuild feeds its
// events to a fresh kernel and checks that every step reproduces its
// logged line byte for byte (a mismatch names the step and its line; a log
// written through a redactor is compared redacted, Log.Redact), and
// Reopen opens the log for appending after its last step. A live driver
// resumed on the rebuilt kernel (adapters/live.Resume, with the reopened
// Writer as its write-ahead hook; adapters/session does both) resumes its
// clock at the last logged event's time, and its first step is
// kernel.Recover, which resolves every op that was in flight
// (docs/durable.md). The package records the driver's Steps
// (adapters/ports) and never imports the driver.
package wal
