package protocol

import (
	"strconv"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// Operation kinds (op_ended's op_kind).
const (
	OpRequest = "request"
	// OpCompaction is a compaction's summarising request: a model request
	// too, counted in its turn's usage (docs/semantics.md, "Compaction").
	OpCompaction = "compaction"
	OpTool       = "tool"
)

// View turns the steps of one live run into protocol events: each
// lifecycle record of a step becomes the event of the same name, its
// fields filled from the record and from what the step holds beside it —
// the tool call an effect started (its arguments), the result the agent's
// history got (a call's result), the waits for approval the kernel lists.
// Usage is the kernel's (docs/semantics.md, "Usage"): each request's on
// its end, each turn's total on the turn's end.
// It keeps what it needs across steps: which op is a request, a
// compaction or a tool, and each agent's path, learnt from the records
// that name it (a delegation's names its child), so an agent the kernel
// has freed keeps its path. One goroutine uses a View: the driver's
// observer.
type View struct {
	primed bool
	ops    map[kernel.OpID]string    // live ops: OpRequest, OpCompaction or OpTool
	paths  map[kernel.AgentID]string // every agent seen

	// What the run did: its root turns, their usage summed, the requests
	// it made, and the root's last turn_ended.
	turns    int
	requests int
	total    Usage
	last     *Event
	start    time.Time // when the view was made: the run's start
}

// NewView returns a View with nothing seen yet.
func NewView() *View {
	return &View{ops: map[kernel.OpID]string{}, paths: map[kernel.AgentID]string{}, start: time.Now()}
}

// step is what one Step holds beside its records. A record read without
// its kernel (Record) has k nil and its context in rec.
type step struct {
	k     *kernel.Kernel
	calls map[kernel.OpID]kernel.ToolCall // tools the step started
	rec   *Context
}

// Step appends to dst the events of st's lifecycle records, in order.
func (v *View) Step(st ports.Step, dst []Event) []Event {
	s := step{k: st.Kernel}
	for i := range st.Effects {
		if e := &st.Effects[i]; e.Kind == kernel.EffStartTool {
			if s.calls == nil {
				s.calls = map[kernel.OpID]kernel.ToolCall{}
			}
			s.calls[e.Op] = e.Call
		}
	}
	for i := range st.Effects {
		e := &st.Effects[i]
		if e.Kind != kernel.EffEmit {
			continue
		}
		if !v.primed {
			v.prime(st.Kernel, e.Life.Seq)
		}
		dst = append(dst, v.event(&s, &e.Life))
	}
	return dst
}

// prime learns, from the records the kernel logged before the first step
// this view sees (a session's replay of a crashed run's log), which ops
// were live and the agents' paths, so a recovery's op_ended names its op's
// kind and a child freed since keeps its path.
func (v *View) prime(k *kernel.Kernel, first uint64) {
	v.primed = true
	_ = k.Log().Range(k.Log().Oldest(), func(l kernel.Lifecycle) bool {
		if l.Seq >= first {
			return false
		}
		v.track(k, &l)
		return true
	})
}

// track follows the ops and the agents' paths through one record.
func (v *View) track(k *kernel.Kernel, l *kernel.Lifecycle) {
	switch l.Kind {
	case kernel.LifeRequestStarted:
		v.ops[l.Op] = OpRequest
	case kernel.LifeCompactionStarted:
		v.ops[l.Op] = OpCompaction
	case kernel.LifeToolStarted:
		v.ops[l.Op] = OpTool
	case kernel.LifeOpEnded:
		delete(v.ops, l.Op)
	case kernel.LifeDelegated:
		v.paths[l.Child] = v.pathOf(k, l.Agent) + "/" + l.Name
	}
}

// event is the protocol event of one record.
func (v *View) event(s *step, l *kernel.Lifecycle) Event {
	kind := v.ops[l.Op]
	v.track(s.k, l)
	ev := Event{Type: l.Kind.String(), Agent: v.pathOf(s.k, l.Agent), Turn: l.Turn}
	if l.Kind == kernel.LifeOpEnded {
		ev.OpKind = kind
	}
	if fill, ok := fillers[l.Kind]; ok {
		fill(v, s, l, &ev)
	}
	return ev
}

// pathOf is id's path: remembered from the record that named it (its
// delegation), else the tree's; "" for NoAgent. An agent neither names —
// one a crashed run spawned, its delegation no longer in the log, freed
// since — is "#ID", never "".
func (v *View) pathOf(k *kernel.Kernel, id kernel.AgentID) string {
	if id == kernel.NoAgent {
		return ""
	}
	if p, ok := v.paths[id]; ok {
		return p
	}
	p := ""
	if k != nil {
		p = k.AgentPath(id)
	}
	if p == "" {
		return "#" + strconv.Itoa(int(id))
	}
	v.paths[id] = p
	return p
}

// filler fills the fields of one record kind's event.
type filler func(v *View, s *step, l *kernel.Lifecycle, ev *Event)

// fillers has one entry per lifecycle kind (TestEveryKindMaps).
var fillers = map[kernel.LifeKind]filler{
	kernel.LifeTurnStarted: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Text = l.Text },
	kernel.LifeTransition: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.From, ev.Trigger, ev.To = l.From.String(), l.Trigger.String(), l.To.String()
	},
	kernel.LifeRequestWaiting: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		// A compaction's request waits with no number (none of the turn's
		// max_requests).
		ev.N, ev.Compaction = l.N, l.Name == "compaction"
	},
	kernel.LifeRequestStarted: func(v *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Op, ev.N = uint64(l.Op), l.N
		v.requests++
	},
	kernel.LifeDelta: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Op, ev.Text = uint64(l.Op), l.Text },
	kernel.LifeRetry: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Op, ev.Attempt, ev.DelayMS, ev.Cause = uint64(l.Op), l.N, ms(l.Delay), l.Text
	},
	kernel.LifeOpEnded:      (*View).opEnded,
	kernel.LifeToolStarted:  (*View).toolStarted,
	kernel.LifeCallFinished: (*View).callFinished,
	kernel.LifeCallDropped: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.CallID, ev.Tool = l.CallID, l.Name
		ev.Arguments, ev.Truncated = capText(l.Text)
	},
	kernel.LifeDelegated: func(v *View, s *step, l *kernel.Lifecycle, ev *Event) {
		ev.Child, ev.CallID, ev.Name, ev.Profile, ev.Task = v.pathOf(s.k, l.Child), l.CallID, l.Name, l.Profile, l.Text
	},
	kernel.LifeInterjected: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Text, ev.Queued = l.Text, l.Queued },
	kernel.LifeInterrupted: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Reason = l.Reason.String() },
	kernel.LifeTimedOut: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Reason, ev.Op, ev.SinceMS = l.Reason.String(), uint64(l.Op), ms(l.Since)
	},
	kernel.LifeTurnEnded: (*View).turnEnded,
	kernel.LifeLate:      func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Op, ev.Text = uint64(l.Op), l.Text },
	kernel.LifeStale: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Op, ev.CallID, ev.Text = uint64(l.Op), l.CallID, l.Text // a decision's names its call
	},
	kernel.LifeIgnored: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Text = l.Text },
	kernel.LifeRejected: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Text = l.Text
		// An undeclared (state, trigger) pair names both; a malformed
		// input names neither (its record's zero pair, Idle and Submit,
		// is a declared one).
		if _, declared := fsm.Lookup(l.From, l.Trigger); !declared {
			ev.State, ev.Trigger = l.From.String(), l.Trigger.String()
		}
	},
	kernel.LifeRecovered:         func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.N, ev.Text = l.N, l.Text },
	kernel.LifeApprovalRequested: (*View).approvalRequested,
	kernel.LifeApprovalResolved: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.CallID, ev.Tool, ev.Approval, ev.Reason, ev.Note, ev.Digest = l.CallID, l.Name, l.Approval.String(), l.Reason.String(), l.Text, l.Digest
		ev.WaitedMS = ms(l.At - l.Since)
	},
	kernel.LifeApprovalGranted: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.CallID, ev.Tool, ev.Digest = l.CallID, l.Name, l.Digest
		ev.Arguments, _ = capText(l.Text) // only an approve_args grant's
	},
	kernel.LifeCompactionStarted: func(v *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Op, ev.Why, ev.Estimate, ev.Focus = uint64(l.Op), l.Name, l.N, l.Text
		v.requests++
	},
	kernel.LifeCompacted: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Op, ev.Summarised = uint64(l.Op), l.N
		ev.Summary, ev.Truncated = capText(l.Text)
	},
}

// opEnded: a request's end carries the usage it reported (null when it
// reported none; a tool's is always null).
func (v *View) opEnded(_ *step, l *kernel.Lifecycle, ev *Event) {
	ev.Op, ev.End = uint64(l.Op), l.End.String()
	if l.Usage != nil {
		u := usageOf(l.Usage, 1)
		ev.Usage = &u
	}
}

// UsageOf is the protocol's usage of the kernel's u (a session file's
// prior total, a turn's).
func UsageOf(u *kernel.Usage) Usage { return usageOf(u, u.Requests) }

// usageOf is the protocol's usage of the kernel's u, summing requests
// requests.
func usageOf(u *kernel.Usage, requests int) Usage {
	return Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens,
		ReasoningTokens: u.ReasoningTokens, Requests: requests, Unreported: u.Unreported}
}

// approvalRequested: ends_in_ms is when the wait ends by itself, and
// expires whether it ends then as expired (its approval_timeout) or
// withdrawn (its turn's deadline) — as the kernel's list of waits says.
func (v *View) approvalRequested(s *step, l *kernel.Lifecycle, ev *Event) {
	ev.CallID, ev.Tool, ev.Digest, ev.EndsInMS = l.CallID, l.Name, l.Digest, ms(l.Delay)
	ev.Arguments, ev.Truncated = capText(l.Text)
	ev.Args = ev.Arguments // the same text under the name scripts read (docs/protocol.md)
	if s.k == nil {
		ev.Expires = s.rec.Expires[l.CallID]
		return
	}
	for _, w := range s.k.Approvals(nil) {
		if w.Agent == l.Agent && w.CallID == l.CallID {
			ev.Expires = w.Expires
		}
	}
}

// toolStarted: the call's arguments, as the model wrote them, are the
// start effect's of the same step.
func (v *View) toolStarted(s *step, l *kernel.Lifecycle, ev *Event) {
	v.ops[l.Op] = OpTool
	ev.Op, ev.CallID, ev.Tool = uint64(l.Op), l.CallID, l.Name
	ev.Arguments, ev.Truncated = capText(s.calls[l.Op].Arguments)
}

// callFinished: the result is the tool message the step appended to the
// agent's history — what the model reads, a synthetic one included.
func (v *View) callFinished(s *step, l *kernel.Lifecycle, ev *Event) {
	ev.Op, ev.CallID, ev.Tool, ev.Status, ev.Reason = uint64(l.Op), l.CallID, l.Name, l.Status.String(), l.Reason.String()
	result := ""
	if s.k == nil {
		result = s.rec.Results[l.Op]
	} else {
		result = toolMessage(s.k, l.Agent, l.CallID)
	}
	ev.Result, ev.Truncated = capText(result)
	if l.Status == kernel.CallChild {
		ev.Child, ev.Outcome = v.pathOf(s.k, l.Child), l.Outcome.String()
	}
}

// turnEnded: the turn's usage is the kernel's total — its requests',
// compactions included, and its sub-agents' turns — all zero when it made
// no request; a root turn's counts toward the run.
func (v *View) turnEnded(_ *step, l *kernel.Lifecycle, ev *Event) {
	ev.Outcome, ev.Reason, ev.Text, ev.Detail = outcome(l.Outcome), l.Reason.String(), l.Text, l.Detail
	ev.Usage = &Usage{}
	if l.Usage != nil {
		*ev.Usage = UsageOf(l.Usage)
	}
	if l.Agent == kernel.Root {
		v.turns++
		v.total.Add(*ev.Usage)
		last := *ev
		v.last = &last
	}
}

// toolMessage is the content of the last tool message for callID in id's
// history ("" when there is none).
func toolMessage(k *kernel.Kernel, id kernel.AgentID, callID string) string {
	if id < 0 || int(id) >= k.NumAgents() {
		return ""
	}
	h := k.Agent(id).History()
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Role == kernel.RoleTool && h[i].ToolCallID == callID {
			return h[i].Content
		}
	}
	return ""
}

// capText cuts s to TextCap bytes at a character boundary; cut says it was.
func capText(s string) (_ string, cut bool) {
	if len(s) <= TextCap {
		return s, false
	}
	return textcut.Prefix(s, TextCap), true
}

// outcome is o's name, "" for none.
func outcome(o kernel.Outcome) string {
	if o == kernel.OutcomeNone {
		return ""
	}
	return o.String()
}

// ms is d in whole milliseconds.
func ms(d time.Duration) int64 { return d.Milliseconds() }
