package live

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// AbandonedOp is an op goroutine — a model request or a tool call — that
// the kernel abandoned because it did not stop within the grace period of
// its cancel (F3 in the README's failure table), and that has not returned yet.
// Run does not wait for it; a host that exits while one runs leaves it to
// the operating system.
type AbandonedOp struct {
	Op    kernel.OpID
	Agent kernel.AgentID
	// Path names the agent ("main/explore").
	Path string
	// Tool is the tool's name; empty for a model request.
	Tool string
	// At is the event time (since Run started) at which the kernel
	// abandoned it.
	At time.Duration
}

// opProc is the record of one op goroutine. The loop creates it when the
// kernel starts the op and marks it abandoned when the kernel gives up on
// it; the goroutine removes it when it returns. Guarded by Driver.mu.
type opProc struct {
	info      AbandonedOp
	abandoned bool
	done      chan struct{} // closed when the goroutine has returned
}

// spawn runs one op in a goroutine: its context is registered under op (so
// the kernel's cancel reaches it), its record lets Run wait for it unless
// the kernel abandons it, and the terminal event run returns is sent to the
// loop.
func (d *Driver) spawn(op kernel.OpID, agent kernel.AgentID, tool string, run func(ctx context.Context) kernel.Event) {
	ctx, cancel := context.WithCancel(d.base)
	d.ops[op] = cancel
	p := &opProc{info: AbandonedOp{Op: op, Agent: agent, Path: d.path(agent), Tool: tool}, done: make(chan struct{})}
	d.mu.Lock()
	d.procs[op] = p
	d.mu.Unlock()
	go func() {
		defer d.exited(p)
		d.send(run(ctx))
	}()
}

// exited removes a returning goroutine's record.
func (d *Driver) exited(p *opProc) {
	d.mu.Lock()
	delete(d.procs, p.info.Op)
	d.mu.Unlock()
	close(p.done)
}

// abandon is the kernel's verdict that op did not stop in time: its context
// is released (it was cancelled before its grace began) and its goroutine,
// if it still runs, is no longer waited for.
func (d *Driver) abandon(op kernel.OpID, at time.Duration) {
	if cancel, ok := d.ops[op]; ok {
		cancel()
		delete(d.ops, op)
	}
	d.mu.Lock()
	if p, ok := d.procs[op]; ok {
		p.abandoned = true
		p.info.At = at
	}
	d.mu.Unlock()
}

// waitOwned waits for every op goroutine the kernel has not abandoned. Run
// calls it once the kernel is quiescent and the loop has ended, so each of
// them has already delivered its terminal event and is returning.
func (d *Driver) waitOwned() {
	d.mu.Lock()
	var owned []chan struct{}
	for _, p := range d.procs {
		if !p.abandoned {
			owned = append(owned, p.done)
		}
	}
	d.mu.Unlock()
	for _, done := range owned {
		<-done
	}
}

// waitOwnedFor is waitOwned after a write-ahead failure, when the op
// goroutines were cancelled without the kernel's say: it waits at most
// grace for them, then disowns those still running (Abandoned lists them),
// so a tool that ignores its context cannot keep a failed run alive.
func (d *Driver) waitOwnedFor(grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	at := d.now
	d.mu.Lock()
	var owned []*opProc
	for _, p := range d.procs {
		if !p.abandoned {
			owned = append(owned, p)
		}
	}
	d.mu.Unlock()
	for _, p := range owned {
		select {
		case <-p.done:
			continue
		case <-deadline.C:
		}
		d.mu.Lock()
		for _, q := range d.procs {
			if !q.abandoned {
				q.abandoned, q.info.At = true, at
			}
		}
		d.mu.Unlock()
		return
	}
}

// Abandoned lists, by op id, the op goroutines the kernel abandoned that
// are still running. After Run has returned it is what the process leaves
// behind if it exits now (a host logs it, e.g. "1 abandoned tool call still
// running: grep in main"). Safe to call from any goroutine at any time.
func (d *Driver) Abandoned() []AbandonedOp {
	d.mu.Lock()
	var out []AbandonedOp
	for _, p := range d.procs {
		if p.abandoned {
			out = append(out, p.info)
		}
	}
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b AbandonedOp) int { return cmp.Compare(a.Op, b.Op) })
	return out
}

// send delivers an op's terminal event to the loop, waiting while the loop
// is busy (back-pressure, never a drop), or gives up once the loop has
// ended. An abandoned op's late result still reaches the kernel while the
// loop runs, which records it as stale (one record per op).
func (d *Driver) send(ev kernel.Event) {
	select {
	case d.events <- ev:
	case <-d.quit:
	}
}

func (d *Driver) startStream(e *kernel.Effect) {
	req := ports.Request{Op: e.Op, Agent: e.Agent, Path: d.path(e.Agent), Messages: e.Messages, Compaction: e.Compact, Profile: e.Profile}
	d.spawn(req.Op, req.Agent, "", func(ctx context.Context) kernel.Event {
		s := &streamSink{d: d, ctx: ctx, op: req.Op}
		err := d.stream(ctx, req, s)
		switch {
		case ctx.Err() != nil:
			return kernel.LLMError(0, req.Op, kernel.FailureCancelled, "cancelled")
		case err == nil:
			ev := kernel.LLMEnd(0, req.Op)
			ev.Usage, ev.Reasoning = s.usage, s.reasoning
			return ev
		default:
			return kernel.LLMError(0, req.Op, ports.FailureOf(err, int(s.chunk)), err.Error())
		}
	})
}

// stream runs the model, turning a panic into a bad-response failure: a
// broken adapter must fail its request, not the process.
func (d *Driver) stream(ctx context.Context, req ports.Request, s *streamSink) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = ports.Fail(kernel.FailureBadResponse, errors.New(panicText("model", v)))
		}
	}()
	return d.cfg.Model.Stream(ctx, req, s)
}

func (d *Driver) startTool(e *kernel.Effect) {
	call := ports.Call{Op: e.Op, Agent: e.Agent, Path: d.path(e.Agent), ToolCall: e.Call}
	d.spawn(call.Op, call.Agent, call.Name, func(ctx context.Context) kernel.Event {
		r := d.runTool(ctx, call)
		return kernel.ToolResult(0, call.Op, r.Status, r.Content)
	})
}

// runTool runs a tool, turning a panic into an error result (never a crash).
func (d *Driver) runTool(ctx context.Context, call ports.Call) (r ports.ToolResult) {
	defer func() {
		if v := recover(); v != nil {
			r = ports.ToolResult{Status: kernel.ToolError, Content: panicText("tool "+call.Name, v)}
		}
	}()
	return d.cfg.Tools.Run(ctx, call)
}

// streamSink turns one stream's output into numbered kernel events. Only the
// stream's goroutine calls it.
type streamSink struct {
	d         *Driver
	ctx       context.Context // the op's: done once the kernel cancelled it
	op        kernel.OpID
	chunk     uint32
	usage     *kernel.Usage
	reasoning *kernel.Reasoning
}

func (s *streamSink) Text(text string) {
	if text == "" {
		return
	}
	s.chunk++
	s.emit(kernel.TextDelta(0, s.op, s.chunk, text))
}

// Call sends a fragment on, unless it adds nothing (no id, no name, no
// arguments): that is no progress for the watchdogs and no event, so a
// model streaming empty fragments cannot keep a request alive or fill a
// write-ahead log (docs/semantics.md, "Deadlines").
func (s *streamSink) Call(c kernel.CallDelta) {
	if c.ID == "" && c.Name == "" && c.Args == "" {
		return
	}
	s.chunk++
	s.emit(kernel.CallFragment(0, s.op, s.chunk, c))
}

// Progress is a chunk without text: output that is no part of the answer
// (a reasoning model's thinking) keeps the request's watchdogs fed.
func (s *streamSink) Progress() {
	s.chunk++
	s.emit(kernel.TextDelta(0, s.op, s.chunk, ""))
}

func (s *streamSink) Retry(attempt int, delay time.Duration, cause string) {
	s.emit(kernel.LLMRetry(0, s.op, attempt, delay, cause))
}

func (s *streamSink) Usage(u kernel.Usage) { s.usage = &u }

// Reasoning keeps the model's reasoning for the stream's end event.
func (s *streamSink) Reasoning(r kernel.Reasoning) { s.reasoning = &r }

// emit sends one stream event to the loop, waiting while the loop is busy
// (back-pressure: a fast stream cannot queue unbounded memory, and nothing
// is dropped). Once the kernel has cancelled the request nothing the stream
// says can reach the model (the kernel would record each chunk as late), so
// the event is dropped and the sink never waits again: a stream that
// ignores its context can neither flood the loop nor block on it.
func (s *streamSink) emit(ev kernel.Event) {
	if s.ctx.Err() != nil {
		return
	}
	select {
	case s.d.events <- ev:
	case <-s.ctx.Done():
	case <-s.d.quit:
	}
}
