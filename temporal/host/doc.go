// Package host runs escapement's kernel as a Temporal workflow: one
// workflow execution per agent tree, the kernel's effects carried out as
// activities and workflow timers, user input arriving as updates and a
// signal (docs/durable.md, "On Temporal"; docs/temporal.md
// says how to run it).
//
// The workflow (Tree) owns the kernel, unchanged: it steps every event on
// its main coroutine and executes the effects in order.
//
//   - start_llm starts StreamActivity, which streams through the worker's
//     ports.Model and sends the chunks back in batches (a ChunksSignal at
//     most every Options.ChunkEvery), so the kernel's first-token and
//     stall watchdogs stay its own workflow timers, reset by chunk events;
//     its result carries what no batch delivered.
//   - start_tool starts ToolActivity, which runs the worker's ports.Tools.
//     Both heartbeat often (protocol.HeartbeatEvery), so a cancel reaches
//     them within the kernel's grace and a lost worker is noticed within
//     the heartbeat timeout.
//   - cancel_llm and cancel_tool request the activity's cancellation; the
//     workflow waits for its acknowledgement (WAIT_CANCELLATION_COMPLETED)
//     and the kernel's own grace timer races it: whichever comes first
//     ends the op (cancelled, or abandoned).
//   - set_timer and stop_timer are cancellable workflow timers.
//   - a lost worker (an activity's heartbeat or start-to-close timeout, or
//     its worker stopping) is answered as a crashed host is: kernel.Recover
//     restarts requests with their partial text kept, runs idempotent tools
//     again and answers every other tool call tool_lost.
//
// Kernel time is workflow time since the run began: unlike a WAL's
// resumed clock, the time workers were down counts against deadlines.
//
// The workflow continues as new, carrying the root's transcript and turn
// count, at the first idle point after its history passes
// Options.ContinueAfterEvents or ContinueAfterBytes.
package host
