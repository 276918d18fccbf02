package protocol

import (
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// Operation kinds (op_ended's op_kind).
const (
	OpRequest = "request"
	OpTool    = "tool"
)

// View turns the steps of one live run into protocol events: each
// lifecycle record of a step becomes the event of the same name, its
// fields filled from the record and from what the step holds beside it —
// the tool call an effect started (its arguments), the result the agent's
// history got (a call's result), the usage a request's end reported.
// It keeps what it needs across steps: which op is a request or a tool,
// each agent's path (a finished agent's outlives it) and the usage of each
// running turn. One goroutine uses a View: the driver's observer.
type View struct {
	primed bool
	ops    map[kernel.OpID]string    // live ops: OpRequest or OpTool
	paths  map[kernel.AgentID]string // every agent seen
	usage  map[kernel.AgentID]*Usage // each running turn's total so far
	parent map[kernel.AgentID]kernel.AgentID

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
	return &View{ops: map[kernel.OpID]string{}, paths: map[kernel.AgentID]string{}, usage: map[kernel.AgentID]*Usage{}, parent: map[kernel.AgentID]kernel.AgentID{}, start: time.Now()}
}

// step is what one Step holds beside its records.
type step struct {
	k      *kernel.Kernel
	calls  map[kernel.OpID]kernel.ToolCall // tools the step started
	endOp  kernel.OpID                     // the request whose end the step was
	endUse *kernel.Usage                   // what that end reported
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
	if st.Event.Kind == kernel.EvLLMEnd {
		s.endOp, s.endUse = st.Event.Op, st.Event.Usage
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
// kind.
func (v *View) prime(k *kernel.Kernel, first uint64) {
	v.primed = true
	_ = k.Log().Range(k.Log().Oldest(), func(l kernel.Lifecycle) bool {
		if l.Seq >= first {
			return false
		}
		v.pathOf(k, l.Agent)
		switch l.Kind {
		case kernel.LifeRequestStarted:
			v.ops[l.Op] = OpRequest
		case kernel.LifeToolStarted:
			v.ops[l.Op] = OpTool
		case kernel.LifeOpEnded:
			delete(v.ops, l.Op)
		case kernel.LifeDelegated:
			v.parent[l.Child] = l.Agent
			v.pathOf(k, l.Child)
		}
		return true
	})
}

// event is the protocol event of one record.
func (v *View) event(s *step, l *kernel.Lifecycle) Event {
	ev := Event{Type: l.Kind.String(), Agent: v.pathOf(s.k, l.Agent), Turn: l.Turn}
	if fill, ok := fillers[l.Kind]; ok {
		fill(v, s, l, &ev)
	}
	return ev
}

// pathOf is id's path, remembered from when the tree held it ("" for
// NoAgent, or an id never seen).
func (v *View) pathOf(k *kernel.Kernel, id kernel.AgentID) string {
	if p, ok := v.paths[id]; ok {
		return p
	}
	p := k.AgentPath(id)
	if p != "" {
		v.paths[id] = p
	}
	return p
}

// filler fills the fields of one record kind's event.
type filler func(v *View, s *step, l *kernel.Lifecycle, ev *Event)

// fillers has one entry per lifecycle kind (TestEveryKindMaps).
var fillers = map[kernel.LifeKind]filler{
	kernel.LifeTurnStarted: func(v *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Text = l.Text
		v.usage[l.Agent] = &Usage{}
	},
	kernel.LifeTransition: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.From, ev.Trigger, ev.To = l.From.String(), l.Trigger.String(), l.To.String()
	},
	kernel.LifeRequestWaiting: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.N = l.N },
	kernel.LifeRequestStarted: func(v *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Op, ev.N = uint64(l.Op), l.N
		v.ops[l.Op] = OpRequest
		v.requests++
		u := v.turnUsage(l.Agent)
		u.Requests++
		u.Unreported++ // until its end reports
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
		v.parent[l.Child] = l.Agent
		ev.Child, ev.CallID, ev.Name, ev.Task = v.pathOf(s.k, l.Child), l.CallID, l.Name, l.Text
	},
	kernel.LifeInterjected: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Text, ev.Queued = l.Text, l.Queued },
	kernel.LifeInterrupted: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Reason = l.Reason.String() },
	kernel.LifeTimedOut: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Reason, ev.Op, ev.SinceMS = l.Reason.String(), uint64(l.Op), ms(l.Since)
	},
	kernel.LifeTurnEnded: (*View).turnEnded,
	kernel.LifeLate:      func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Op, ev.Text = uint64(l.Op), l.Text },
	kernel.LifeStale:     func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Op, ev.Text = uint64(l.Op), l.Text },
	kernel.LifeIgnored:   func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.Text = l.Text },
	kernel.LifeRejected: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) {
		ev.Text = l.Text
		// An undeclared (state, trigger) pair names both; a malformed
		// input names neither (its record's zero pair, Idle and Submit,
		// is a declared one).
		if _, declared := fsm.Lookup(l.From, l.Trigger); !declared {
			ev.State, ev.Trigger = l.From.String(), l.Trigger.String()
		}
	},
	kernel.LifeRecovered: func(_ *View, _ *step, l *kernel.Lifecycle, ev *Event) { ev.N, ev.Text = l.N, l.Text },
}

// opEnded: a request's end carries the usage it reported (null when it
// reported none), which counts toward its turn.
func (v *View) opEnded(s *step, l *kernel.Lifecycle, ev *Event) {
	ev.Op, ev.End = uint64(l.Op), l.End.String()
	ev.OpKind = v.ops[l.Op]
	delete(v.ops, l.Op)
	if ev.OpKind != OpRequest || s.endOp != l.Op || s.endUse == nil {
		return
	}
	ev.Usage = &Usage{PromptTokens: s.endUse.PromptTokens, CompletionTokens: s.endUse.CompletionTokens, Requests: 1}
	u := v.turnUsage(l.Agent)
	u.PromptTokens += ev.Usage.PromptTokens
	u.CompletionTokens += ev.Usage.CompletionTokens
	if u.Unreported > 0 {
		u.Unreported--
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
	ev.Result, ev.Truncated = capText(toolMessage(s.k, l.Agent, l.CallID))
	if l.Status == kernel.CallChild {
		ev.Child, ev.Outcome = v.pathOf(s.k, l.Child), l.Outcome.String()
	}
}

// turnEnded: the turn's usage is its requests' and its sub-agents' turns';
// it counts toward the parent's turn, and a root turn toward the run.
func (v *View) turnEnded(_ *step, l *kernel.Lifecycle, ev *Event) {
	ev.Outcome, ev.Reason, ev.Text, ev.Detail = outcome(l.Outcome), l.Reason.String(), l.Text, l.Detail
	u := *v.turnUsage(l.Agent)
	delete(v.usage, l.Agent)
	ev.Usage = &u
	if p, ok := v.parent[l.Agent]; ok {
		v.turnUsage(p).Add(u)
		delete(v.parent, l.Agent)
	}
	if l.Agent == kernel.Root {
		v.turns++
		v.total.Add(u)
		last := *ev
		v.last = &last
	}
}

// turnUsage is id's running turn total.
func (v *View) turnUsage(id kernel.AgentID) *Usage {
	u, ok := v.usage[id]
	if !ok {
		u = &Usage{}
		v.usage[id] = u
	}
	return u
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
