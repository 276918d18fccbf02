// Package live is escapement's live driver: it runs the pure kernel against
// the real world — a Model (an OpenAI-compatible endpoint), Tools (files and
// processes), the real clock and real interrupts.
//
// It is the kernel's only goroutine wrapper (etcd-io/raft's node.go to the
// kernel's rawnode): one goroutine, the one that calls Run, owns the kernel
// and is the only caller of Step (F9). Streams and tools run in goroutines
// that only send events to it; timers live in a heap inside the loop, so no
// goroutine exists per timer. Effects become goroutine starts, context
// cancellations and heap updates, executed in the order the kernel returned
// them.
//
// # Goroutine ownership
//
// The host owns the goroutine that calls Run; the driver starts no other
// goroutine of its own. Every other goroutine it starts runs one op — one
// model request (EffStartLLM) or one tool call (EffStartTool) — with a
// context of its own, and ends by delivering one terminal event (a stream's
// end or error, a tool's result). The loop owns each of them until the
// kernel ends the op:
//
//   - When the op ends by its terminal event (completed, or cancelled and
//     acknowledged), its goroutine is returning: Run waits for it.
//   - When the op's cancel is not acknowledged within the kernel's Grace,
//     the kernel abandons it (a LifeOpEnded with End == kernel.OpAbandoned,
//     F3). From then on the driver disowns the goroutine: Run does not wait
//     for it, Abandoned lists it until it returns, and the process may exit
//     while it still runs (the host decides, e.g. after logging Abandoned).
//
// Run returns after a shutdown — its context ended, or Shutdown was called —
// once the kernel is quiescent (every op acknowledged or abandoned, which
// the kernel guarantees by the shutdown's time + Grace, I3), and after the
// goroutines it still owns have returned; those have already delivered their
// terminal event, so that wait is short. A stuck tool or model therefore
// delays Run by at most Grace.
//
// An abandoned goroutine never blocks and never touches the kernel: once
// its op is cancelled its sink drops everything (the kernel would record
// each chunk as late), so it neither waits on the loop nor floods it; its
// terminal event reaches the loop while the loop runs (the kernel records
// it as stale, once) and is dropped after Run has returned. Its context is
// cancelled, so a tool that honours contexts late still cleans up.
//
// Everything else is bounded by what the kernel keeps live: an op context
// per live op, a timer entry per live timer (stopped timers are dropped
// lazily, and the heap is compacted when dead entries outnumber live
// ones), a fixed event buffer (a fast stream waits: back-pressure, never a
// drop), and a record per op goroutine not yet returned.
//
// # Durability
//
// Config.WriteAhead is called after every Step and before any of its
// effects is executed, so a host that persists the step there (adapters/wal)
// has on disk every event whose consequences reached the world; a failed
// write stops the driver before it acts. Resume starts a driver on a
// kernel rebuilt from such a log: Run steps kernel.Recover first, and its
// clock goes on from the last logged event (docs/durable.md).
//
// Cancellation flows through contexts only; no global state; time is read
// with the time package alone, so the whole driver runs under
// testing/synctest with an in-memory Model and Tools.
//
// Event.At is time since Run started, read from the monotonic clock and
// clamped so it never decreases (the kernel panics on time going backwards).
//
// # Using it
//
// New takes a Config with a Model (adapters/openai, or your own) and Tools
// (adapters/toolset composes the workspace tools, MCP servers and Go
// functions; or your own); Run it on a goroutine, send input with Submit,
// Say, Interject and Cancel, watch it through the Observer, and end it by
// cancelling Run's context or with Shutdown. Example does all of that with
// a scripted model and a tool of its own; Example_cancel cancels a running
// tool. An input the kernel refuses comes back as an error wrapping
// ErrRejected and the kernel's reason (kernel.ErrEmptyText,
// kernel.ErrUnknownAgent, a *fsm.UndeclaredError), so errors.Is and
// errors.As tell them apart. For the common case — one turn at a time, its
// events as an iterator, a typed result — adapters/agent wraps the driver
// (the README's "Embed it" program); adapters/session keeps a driver's
// session file and write-ahead log. docs/embedding.md ("The live driver")
// and docs/durable.md say more.
package live
