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
// Ownership: every goroutine the driver starts is counted and waited for;
// Run returns only after the last one has ended. Cancellation flows through
// contexts only; no global state; time is read with the time package alone,
// so the whole driver runs under testing/synctest with an in-memory Model
// and Tools.
//
// Event.At is time since Run started, read from the monotonic clock and
// clamped so it never decreases (the kernel panics on time going backwards).
package live
