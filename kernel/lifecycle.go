package kernel

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/enumtext"
)

// LifeKind says what a lifecycle event reports.
type LifeKind uint8

// Lifecycle event kinds. Every state change and every start/end of an
// operation, call or turn has one, so a subscriber (a UI, a trace, the oracle)
// can follow the whole tree from the log alone.
const (
	LifeNone LifeKind = iota
	// LifeTurnStarted: Agent began turn Turn; Text is its (first) user text.
	LifeTurnStarted
	// LifeTransition: Agent moved From --Trigger--> To.
	LifeTransition
	// LifeRequestStarted: LLM request Op started (N is its number in the turn).
	LifeRequestStarted
	// LifeDelta: a text chunk of request Op.
	LifeDelta
	// LifeRetry: the adapter retries request Op (N attempt, Delay, Text cause).
	LifeRetry
	// LifeOpEnded: operation Op (request or tool) ended: End says how (I9).
	LifeOpEnded
	// LifeToolStarted: tool op Op started for call CallID (Name).
	LifeToolStarted
	// LifeCallFinished: call CallID (a tool or a delegation) got its one
	// terminal result (I13): Status names it, Reason says why when not ok.
	LifeCallFinished
	// LifeCallDropped: a tool call still being streamed when its request was
	// cut was dropped, never started (F12). Text holds its partial arguments.
	LifeCallDropped
	// LifeDelegated: Agent spawned Child for call CallID (Name is the
	// child's, Profile its profile's when the tree has profiles).
	LifeDelegated
	// LifeInterjected: user text Text reached Agent; Queued tells whether it
	// waits for the next request or submission.
	LifeInterjected
	// LifeInterrupted: Agent's turn was aborted with Reason.
	LifeInterrupted
	// LifeTimedOut: a deadline fired (Reason) for Agent; Op is what it watched;
	// Since is the start of the silence or wait that justified it (I5).
	LifeTimedOut
	// LifeTurnEnded: Agent's turn Turn ended with Outcome and Reason (I13);
	// Text is the final or partial text; Detail says why a turn that did
	// not complete ended (a failed request's cause, the cap that was hit).
	LifeTurnEnded
	// LifeLate: an event for an op that was cancelled or timed out (its call
	// already answered) arrived and was dropped (F3); Text describes it. An
	// event for an op already abandoned or ended is LifeStale.
	LifeLate
	// LifeStale: an event named an op the kernel no longer tracks (ended or
	// abandoned: Agent is then NoAgent, Op and Text identify it), or a
	// duplicate chunk; it changed nothing (I8).
	LifeStale
	// LifeIgnored: an input was legal but a no-op: a cancel for an ended turn,
	// a repeated cancel of a turn already interrupted (F14, I11).
	LifeIgnored
	// LifeRejected: an input was refused (see the matching EffError).
	LifeRejected
	// LifeRecovered: the kernel resolved what a crashed host had in flight
	// (EvRecover); N is how many operations it resolved, Text says how
	// (requests restarted, tools run again, tool calls lost, approval
	// requests asked again).
	LifeRecovered
	// LifeRequestWaiting: Agent's next request (its N-th of the turn) waits
	// for one of the tree's Limits.MaxParallelRequests slots; its
	// request_started follows when it gets one. A compaction's summarising
	// request waits too: Name is "compaction", N 0, and its
	// compaction_started follows.
	LifeRequestWaiting
	// LifeApprovalRequested: call CallID of Agent (tool Name, arguments
	// Text, their Digest) waits for a decision; Delay is how long the wait
	// may last before it ends by itself (docs/semantics.md, "Approvals").
	// A recovery emits it again for every wait it finds.
	LifeApprovalRequested
	// LifeApprovalResolved: call CallID's wait ended: Approval says how,
	// Reason why when it was not approved, Text is a denial's note, Since
	// is when the wait began.
	LifeApprovalResolved
	// LifeApprovalGranted: a decision granted tool Name for the session,
	// with any arguments, or only arguments Text (Digest) when those are
	// set; CallID is the call the decision named.
	LifeApprovalGranted
	// LifeCompactionStarted: Agent's compaction sent its summarising
	// request Op (docs/semantics.md, "Compaction"): Name says why
	// (threshold, context_length, requested), N is the estimate of the
	// history in tokens, Text the focus asked for.
	LifeCompactionStarted
	// LifeCompacted: the compaction of request Op completed and replaced
	// Agent's history: N messages were summarised into Text.
	LifeCompacted
)

var lifeNames = [...]string{
	"", "turn_started", "transition", "request_started", "delta", "retry", "op_ended",
	"tool_started", "call_finished", "call_dropped", "delegated", "interjected",
	"interrupted", "timed_out", "turn_ended", "late", "stale", "ignored", "rejected",
	"recovered", "request_waiting", "approval_requested", "approval_resolved", "approval_granted",
	"compaction_started", "compacted",
}

func (k LifeKind) String() string {
	if int(k) < len(lifeNames) {
		return lifeNames[k]
	}
	return fmt.Sprintf("life(%d)", uint8(k))
}

// MarshalText prints lifecycle kinds by name.
func (k LifeKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// OpEnd says how an operation ended (I9: exactly once each).
type OpEnd uint8

// Op ends.
const (
	OpEndNone OpEnd = iota
	// OpCompleted: it finished on its own and succeeded (a stream end, a
	// tool's ok result).
	OpCompleted
	// OpCancelled: it acknowledged a cancel.
	OpCancelled
	// OpAbandoned: it did not stop within the grace period; any later result
	// is dropped.
	OpAbandoned
	// OpFailed: it ended on its own without success: a request's stream
	// failed (after the adapter's retries), or a tool reported an error or
	// stopped without being asked to.
	OpFailed
	// OpLost: the process that ran it stopped (a crash) and the recovered
	// kernel resolved it (EvRecover): a request is restarted, a tool run
	// again or answered tool_lost.
	OpLost
)

var opEndNames = [...]string{"", "completed", "cancelled", "abandoned", "failed", "lost"}

func (e OpEnd) String() string {
	if int(e) < len(opEndNames) {
		return opEndNames[e]
	}
	return fmt.Sprintf("op_end(%d)", uint8(e))
}

// MarshalText prints op ends by name.
func (e OpEnd) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// CallStatus is the terminal result of one tool call or delegation.
type CallStatus uint8

// Call statuses.
const (
	CallNone CallStatus = iota
	CallOK
	CallError
	CallCancelled
	CallTimedOut
	CallRefused
	CallMalformed
	// CallChild: a delegation's result; the child's Outcome says how it went.
	CallChild
	// CallLost: the tool was running when the host crashed, and it is not
	// safe to run again: it may or may not have taken effect (tool_lost).
	CallLost
	// CallDenied: the call needed approval and a decision denied it.
	CallDenied
	// CallExpired: the call needed approval and nobody decided in time.
	CallExpired
)

var callStatusNames = [...]string{"", "ok", "error", "cancelled", "timed_out", "refused", "malformed", "child", "lost", "denied", "expired"}

func (s CallStatus) String() string {
	if int(s) < len(callStatusNames) {
		return callStatusNames[s]
	}
	return fmt.Sprintf("call_status(%d)", uint8(s))
}

// MarshalText prints call statuses by name.
func (s CallStatus) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Lifecycle is one event of the replayable log (F10). Seq numbers are dense
// and start at 1.
type Lifecycle struct {
	Seq     uint64        `json:"seq"`
	At      time.Duration `json:"at"`
	Kind    LifeKind      `json:"kind"`
	Agent   AgentID       `json:"agent"`
	Turn    uint64        `json:"turn,omitempty"`
	Op      OpID          `json:"op,omitempty"`
	Child   AgentID       `json:"child,omitempty"`
	CallID  string        `json:"call_id,omitempty"`
	Name    string        `json:"name,omitempty"`
	Text    string        `json:"text,omitempty"`
	From    fsm.State     `json:"from,omitempty"`
	To      fsm.State     `json:"to,omitempty"`
	Trigger fsm.Trigger   `json:"trigger,omitempty"`
	Outcome Outcome       `json:"outcome,omitempty"`
	Reason  Reason        `json:"reason,omitempty"`
	End     OpEnd         `json:"end,omitempty"`
	Status  CallStatus    `json:"status,omitempty"`
	// Approval is how an approval wait ended (approval_resolved).
	Approval ApprovalEnd   `json:"approval,omitempty"`
	N        int           `json:"n,omitempty"`
	Queued   bool          `json:"queued,omitempty"`
	Since    time.Duration `json:"since,omitempty"`
	Delay    time.Duration `json:"delay,omitempty"`
	Detail   string        `json:"detail,omitempty"`
	// Digest is an approval record's digest of the call's arguments.
	Digest string `json:"digest,omitempty"`
	// Usage is a request's usage on its op_ended record (nil: it reported
	// none) and a turn's total on turn_ended (nil: it made no request)
	// (docs/semantics.md, "Usage").
	Usage *Usage `json:"usage,omitempty"`
	// Profile is a delegated child's profile (docs/semantics.md,
	// "Profiles"); "" in a tree without profiles.
	Profile string `json:"profile,omitempty"`
}

// Describe prints the lifecycle event on one line.
func (l Lifecycle) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d @%v %s agent=%d", l.Seq, l.At, l.Kind, l.Agent)
	switch l.Kind {
	case LifeTurnStarted:
		fmt.Fprintf(&b, " turn=%d %q", l.Turn, l.Text)
	case LifeTransition:
		fmt.Fprintf(&b, " %s --%s--> %s", l.From, l.Trigger, l.To)
	case LifeRequestStarted:
		fmt.Fprintf(&b, " op=%d n=%d", l.Op, l.N)
	case LifeRequestWaiting:
		if l.Name != "" {
			fmt.Fprintf(&b, " %s", l.Name) // a compaction's request
		} else {
			fmt.Fprintf(&b, " n=%d", l.N)
		}
	case LifeDelta:
		fmt.Fprintf(&b, " op=%d %q", l.Op, l.Text)
	case LifeRetry:
		fmt.Fprintf(&b, " op=%d attempt=%d after=%v %s", l.Op, l.N, l.Delay, l.Text)
	case LifeOpEnded:
		fmt.Fprintf(&b, " op=%d %s", l.Op, l.End)
		if l.Usage != nil {
			fmt.Fprintf(&b, " usage(%s)", l.Usage)
		}
	case LifeToolStarted:
		fmt.Fprintf(&b, " op=%d call=%s %s", l.Op, l.CallID, l.Name)
	case LifeCallFinished:
		fmt.Fprintf(&b, " call=%s %s %s", l.CallID, nameOrEmpty(l.Name), l.Status)
		if l.Status == CallChild {
			fmt.Fprintf(&b, " child=%d %s", l.Child, l.Outcome)
		}
		if l.Reason != ReasonNone {
			fmt.Fprintf(&b, " reason=%s", l.Reason)
		}
	case LifeCallDropped:
		fmt.Fprintf(&b, " call=%s %s args=%s", l.CallID, nameOrEmpty(l.Name), quoteArgs(l.Text))
	case LifeDelegated:
		fmt.Fprintf(&b, " child=%d %s call=%s task=%q", l.Child, l.Name, l.CallID, l.Text)
		if l.Profile != "" {
			fmt.Fprintf(&b, " profile=%s", l.Profile)
		}
	case LifeInterjected:
		fmt.Fprintf(&b, " %q queued=%v", l.Text, l.Queued)
	case LifeInterrupted:
		fmt.Fprintf(&b, " turn=%d reason=%s", l.Turn, l.Reason)
	case LifeTimedOut:
		fmt.Fprintf(&b, " reason=%s op=%d since=%v", l.Reason, l.Op, l.Since)
	case LifeApprovalRequested, LifeApprovalResolved, LifeApprovalGranted:
		describeApproval(&b, l)
	case LifeTurnEnded:
		fmt.Fprintf(&b, " turn=%d %s", l.Turn, l.Outcome)
		if l.Reason != ReasonNone {
			fmt.Fprintf(&b, " reason=%s", l.Reason)
		}
		if l.Text != "" {
			fmt.Fprintf(&b, " text=%q", l.Text)
		}
		if l.Detail != "" {
			fmt.Fprintf(&b, " detail=%q", l.Detail)
		}
		if l.Usage != nil {
			fmt.Fprintf(&b, " usage(%s)", l.Usage)
		}
	case LifeCompactionStarted:
		fmt.Fprintf(&b, " op=%d why=%s estimate=%d", l.Op, l.Name, l.N)
		if l.Text != "" {
			fmt.Fprintf(&b, " focus=%q", l.Text)
		}
	case LifeCompacted:
		fmt.Fprintf(&b, " op=%d summarised=%d summary=%q", l.Op, l.N, l.Text)
	default:
		if l.Op != 0 {
			fmt.Fprintf(&b, " op=%d", l.Op)
		}
		if l.Text != "" {
			fmt.Fprintf(&b, " %s", l.Text)
		}
	}
	return b.String()
}

// nameOrEmpty prints a call's name, or "" for a call streamed without one,
// so a Describe line keeps one word per field.
func nameOrEmpty(name string) string {
	if name == "" {
		return `""`
	}
	return name
}

// ErrCompacted is returned when a subscriber asks for events older than the
// log still holds.
var ErrCompacted = errors.New("lifecycle log: requested events were compacted")

// Log is the replayable lifecycle log (F10): a bounded ring of the most
// recent events with dense sequence numbers. A subscriber that starts late
// reads from any sequence number the ring still holds; older ones return
// ErrCompacted with the oldest available, so it can resynchronise.
//
// The ring holds at most its capacity in events and LogTextBytes of their
// text (a turn's end carries its whole answer, a delegation its task), so
// what it keeps of finished agents is bounded too (docs/semantics.md,
// "Finished agents"): past either bound the oldest events are dropped.
type Log struct {
	ring     []Lifecycle // grows up to capacity, then wraps
	capacity int
	first    uint64 // seq of the oldest retained event (1 when none dropped)
	next     uint64 // seq the next append gets
	text     int    // text bytes of the retained events (textBytes)
}

// LogTextBytes bounds the text the lifecycle log retains.
const LogTextBytes = 16 << 20

func newLog(capacity int) *Log {
	// The ring grows on demand: a simulator builds thousands of short-lived
	// kernels, and most never fill a large ring.
	return &Log{ring: make([]Lifecycle, 0, min(capacity, 64)), capacity: capacity, first: 1, next: 1}
}

// textBytes is what an event counts against LogTextBytes.
func textBytes(ev *Lifecycle) int {
	return len(ev.Text) + len(ev.Detail) + len(ev.Name) + len(ev.CallID) + len(ev.Digest) + len(ev.Profile)
}

// append stamps ev with the next sequence number and stores it, dropping
// the oldest events past the ring's bounds (never the one just stored).
func (l *Log) append(ev Lifecycle) Lifecycle {
	ev.Seq = l.next
	l.next++
	l.text += textBytes(&ev)
	if len(l.ring) < l.capacity {
		l.ring = append(l.ring, ev)
	} else {
		slot := &l.ring[int((ev.Seq-1)%uint64(l.capacity))]
		if slot.Seq >= l.first { // still retained: the wrap drops it
			l.text -= textBytes(slot)
		}
		*slot = ev
		l.first = max(l.first, ev.Seq-uint64(l.capacity)+1)
	}
	for l.text > LogTextBytes && l.first < ev.Seq {
		slot := &l.ring[int((l.first-1)%uint64(l.capacity))]
		l.text -= textBytes(slot)
		*slot = Lifecycle{} // its strings are released now, not at the wrap
		l.first++
	}
	return ev
}

// Next is the sequence number the next event will get.
func (l *Log) Next() uint64 { return l.next }

// Oldest is the sequence number of the oldest event still held.
func (l *Log) Oldest() uint64 { return l.first }

// Capacity is how many events the log retains.
func (l *Log) Capacity() int { return l.capacity }

// Range calls fn for every held event with Seq ≥ seq, in order, until fn
// returns false; like From but without copying.
func (l *Log) Range(seq uint64, fn func(Lifecycle) bool) error {
	if seq == 0 {
		seq = 1
	}
	if seq < l.first {
		return fmt.Errorf("from seq %d, oldest held %d: %w", seq, l.first, ErrCompacted)
	}
	c := uint64(l.capacity)
	for s := seq; s < l.next; s++ {
		if !fn(l.ring[int((s-1)%c)]) {
			break
		}
	}
	return nil
}

// From appends to dst every held event with Seq ≥ seq, in order. If seq is
// older than Oldest it returns ErrCompacted and nothing; a seq at or beyond
// Next returns dst unchanged.
func (l *Log) From(seq uint64, dst []Lifecycle) ([]Lifecycle, error) {
	err := l.Range(seq, func(e Lifecycle) bool {
		dst = append(dst, e)
		return true
	})
	return dst, err
}

// UnmarshalText parses a lifecycle kind name.
func (k *LifeKind) UnmarshalText(b []byte) error {
	return enumtext.Parse(k, lifeNames[:], b, "lifecycle kind")
}

// UnmarshalText parses an op end name.
func (e *OpEnd) UnmarshalText(b []byte) error { return enumtext.Parse(e, opEndNames[:], b, "op end") }

// UnmarshalText parses a call status name.
func (s *CallStatus) UnmarshalText(b []byte) error {
	return enumtext.Parse(s, callStatusNames[:], b, "call status")
}
