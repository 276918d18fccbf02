package agent

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// ErrInterrupted is what Result.Err wraps for a turn that was interrupted
// (cancelled: reason user_cancel; shut down: reason shutdown).
var ErrInterrupted = errors.New("turn interrupted")

// ErrFailed is what Result.Err wraps for a turn that failed (a model
// error, a timeout, a cap).
var ErrFailed = errors.New("turn failed")

// Event is one lifecycle record of the tree during a turn
// (kernel.Lifecycle, the replayable log of F10): a streamed chunk, a tool call started
// or finished, a delegation, a retry, a transition, the turn's end.
type Event struct {
	kernel.Lifecycle
	// Path names the agent ("main", "main/explore").
	Path string
}

// Answer is the root's streamed answer text this event carries ("" for
// every other event): printing it for every event prints the answer as it
// streams.
func (e Event) Answer() string {
	if e.Kind == kernel.LifeDelta && e.Agent == kernel.Root {
		return e.Text
	}
	return ""
}

// Result is how a turn ended.
type Result struct {
	// Turn is the root's turn number (1 for the first of a session).
	Turn uint64
	// Answer is the root's last answer of the turn: its final message,
	// or, for a turn cut short, the text it had streamed (kept as
	// partial).
	Answer string
	// Outcome and Reason are the turn's end (completed; interrupted by
	// user_cancel or shutdown; failed or timed out, and why).
	Outcome kernel.Outcome
	Reason  kernel.Reason
	// Detail is the cause of a turn that did not complete: a failed
	// request's HTTP status and the server's message, the cap that was hit.
	Detail string
	// Usage is the turn's total as its turn_ended record carries it
	// (docs/semantics.md, "Usage"): what the requests of the whole tree —
	// compactions included — reported, with Requests counting them and
	// Unreported those that reported nothing (then the sums are a lower
	// bound). UsageKnown says at least one request reported usage.
	Usage      kernel.Usage
	UsageKnown bool
}

// Completed reports whether the turn completed.
func (r Result) Completed() bool { return r.Outcome == kernel.OutcomeCompleted }

// Err is nil for a completed turn, else an error that says how it ended,
// wrapping ErrInterrupted or ErrFailed.
func (r Result) Err() error {
	what := ErrFailed
	switch {
	case r.Completed():
		return nil
	case r.Outcome == kernel.OutcomeInterrupted:
		what = ErrInterrupted
	}
	msg := fmt.Sprintf("turn %d %s: %s", r.Turn, r.Outcome, r.Reason)
	if r.Detail != "" {
		msg += ": " + r.Detail
	}
	return fmt.Errorf("%w (%s)", what, msg)
}

// Turn is one turn of the root agent, running or ended.
type Turn struct {
	a      *Agent
	prompt string // a recovered turn's prompt, submitted again by Continue

	mu      sync.Mutex
	number  uint64
	from    int // the root's history length when the turn started
	started bool
	events  []Event
	changed chan struct{} // closed and replaced when events grow or the turn ends
	ended   chan struct{} // closed when the turn has ended (or failed)
	result  Result
	err     error
	watched func() bool // stops the context watch (context.AfterFunc)
	cancel  chan struct{}
}

// Events yields the turn's events, from its first, as they happen; it
// ends when the turn has ended. The turn keeps its events, so Events may
// be ranged over again, from any goroutine.
func (t *Turn) Events() iter.Seq[Event] {
	return func(yield func(Event) bool) {
		for i := 0; ; i++ {
			ev, ok := t.event(i)
			if !ok || !yield(ev) {
				return
			}
		}
	}
}

// event waits for the turn's i-th event; false once the turn has ended
// with fewer.
func (t *Turn) event(i int) (Event, bool) {
	for {
		t.mu.Lock()
		if i < len(t.events) {
			ev := t.events[i]
			t.mu.Unlock()
			return ev, true
		}
		changed := t.changed
		t.mu.Unlock()
		if isDone(t.ended) {
			t.mu.Lock()
			more := i < len(t.events)
			t.mu.Unlock()
			if !more {
				return Event{}, false
			}
			continue
		}
		<-changed
	}
}

// Result waits for the turn to end and returns how it ended. err is set
// only when the turn could not run or its end is unknown: it was refused,
// or the driver stopped under it (ErrClosed, wrapping the cause). A turn
// that was cancelled, failed or timed out ends with a Result saying so
// (Result.Err turns it into an error) and a nil err.
func (t *Turn) Result() (Result, error) {
	<-t.ended
	if t.cancel != nil {
		<-t.cancel // the cancel a done context sent has returned
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.result, t.err
}

// watch cancels the turn when ctx is done before it ends (the user's Esc);
// the turn's end stops the watch.
func (t *Turn) watch(ctx context.Context) {
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(done)
		t.mu.Lock()
		n := t.number
		t.mu.Unlock()
		if n > 0 && !isDone(t.ended) {
			_ = t.a.driver.Cancel(context.Background(), kernel.Root, n)
		}
	})
	t.mu.Lock()
	t.watched, t.cancel = stop, done
	ended := isDone(t.ended)
	t.mu.Unlock()
	if ended && stop() {
		close(done)
	}
}

// observe takes one Step's records (on the kernel's goroutine).
func (t *Turn) observe(st ports.Step) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if isDone(t.ended) {
		return
	}
	if !t.started {
		// A turn the last run left, taken up from this run's first step.
		t.started, t.from = true, len(st.Kernel.Agent(kernel.Root).History())
	}
	for i := range st.Effects {
		e := &st.Effects[i]
		if e.Kind != kernel.EffEmit {
			continue
		}
		t.take(st.Kernel, e.Life)
	}
	t.broadcast()
}

// take records one lifecycle record (mu held); the root's turn end ends
// the turn.
func (t *Turn) take(k *kernel.Kernel, l kernel.Lifecycle) {
	if isDone(t.ended) {
		return // a queued turn starting in the Step that ended this one
	}
	root := l.Agent == kernel.Root
	if root && l.Kind == kernel.LifeTurnStarted {
		t.number, t.started = l.Turn, true
		t.from = len(k.Agent(kernel.Root).History())
	}
	t.events = append(t.events, Event{Lifecycle: l, Path: pathOf(k, l.Agent)})
	if root && l.Kind == kernel.LifeTurnEnded {
		t.result.Turn, t.result.Outcome, t.result.Reason, t.result.Detail = l.Turn, l.Outcome, l.Reason, l.Detail
		if u := l.Usage; u != nil {
			t.result.Usage, t.result.UsageKnown = *u, u.Unreported < u.Requests
		}
		t.result.Answer = lastAnswer(k.Agent(kernel.Root).History(), t.from)
		t.end()
	}
}

// fail ends a turn that has not ended with err.
func (t *Turn) fail(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if isDone(t.ended) {
		return
	}
	t.err = err
	t.end()
	t.broadcast()
}

// end marks the turn ended and stops its context watch (mu held).
func (t *Turn) end() {
	close(t.ended)
	if t.watched != nil && t.watched() {
		close(t.cancel)
	}
}

// broadcast wakes every Events waiting for more (mu held).
func (t *Turn) broadcast() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// lastAnswer is the content of the last assistant message with text at or
// after from.
func lastAnswer(hist []kernel.Message, from int) string {
	for i := len(hist) - 1; i >= min(from, len(hist)); i-- {
		if m := hist[i]; m.Role == kernel.RoleAssistant && m.Content != "" {
			return m.Content
		}
	}
	return ""
}

// pathOf names an agent of k ("?" for an id it does not hold).
func pathOf(k *kernel.Kernel, id kernel.AgentID) string {
	if id < 0 || int(id) >= k.NumAgents() {
		return "?"
	}
	return k.Agent(id).Path()
}
