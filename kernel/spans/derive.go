package spans

import (
	"cmp"
	"slices"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// Config says what the derivation cannot read from the steps.
type Config struct {
	// RootName is the root agent's name (kernel.Config.RootName; "main"
	// when empty).
	RootName string
	// Model names the model every request asks (gen_ai.request.model); ""
	// when unknown (the simulator's scripted models).
	Model string
	// DelegateTool is the tool name the kernel treats as a delegation
	// (kernel.Config.DelegateTool; kernel.DefaultDelegateTool when empty).
	DelegateTool string
}

// maxDetail bounds a failure's message a span keeps.
const maxDetail = 1 << 10

// Deriver turns steps into span changes. Feed it every step of one kernel,
// in order, from the kernel's first (a recovered host: every step its log
// replays, then the recovery's); it is not safe for concurrent use.
type Deriver struct {
	cfg  Config
	next ID
	// open holds every span started and not ended; ops and calls the
	// chat, tool and delegation spans whose op or call has not ended;
	// tools the tool spans whose call has no result yet.
	open  map[ID]*Span
	ops   map[kernel.OpID]*Span
	calls map[callKey]*Span
	tools map[callKey]*Span
	// agents are the agents whose turn may start or runs (the root; a
	// child until its one turn ends).
	agents map[kernel.AgentID]agentSpans

	out []Change
	// block is where the next spans are allocated, a few at a time (a
	// simulator builds a derivation per run).
	block []Span
	// Scratch of one step: the agents whose turn was aborted and the tool
	// deadlines that fired (with their reasons), the ops cancelled, the
	// spans whose own end came, the request whose stream finished on its
	// own and the transitions that say how.
	aborted   []kernel.Lifecycle
	deadline  []kernel.Lifecycle
	cancels   []*Span
	ends      []*Span
	completed *Span
	finished  []kernel.Lifecycle
}

type callKey struct {
	agent kernel.AgentID
	id    string
}

// agentSpans is what the derivation keeps of an agent: its name and path,
// the delegation span that spawned it (until its turn starts) and its
// running turn's span.
type agentSpans struct {
	name, path string
	spawnedBy  *Span
	turn       *Span
}

// New returns a Deriver for a kernel configured as cfg says.
func New(cfg Config) *Deriver {
	if cfg.RootName == "" {
		cfg.RootName = "main"
	}
	if cfg.DelegateTool == "" {
		cfg.DelegateTool = kernel.DefaultDelegateTool
	}
	return &Deriver{
		cfg:    cfg,
		open:   make(map[ID]*Span),
		ops:    make(map[kernel.OpID]*Span),
		calls:  make(map[callKey]*Span),
		tools:  make(map[callKey]*Span),
		agents: map[kernel.AgentID]agentSpans{kernel.Root: {name: cfg.RootName, path: cfg.RootName}},
	}
}

// Step derives what one kernel step did to the spans: ev as the kernel was
// fed it (At stamped) and the effects it returned. The changes come in the
// order the step's records gave them, every end after the ends of the
// spans under it; they are valid until the next Step.
func (d *Deriver) Step(ev kernel.Event, effs []kernel.Effect) []Change {
	d.out = d.out[:0]
	if ev.Kind == kernel.EvLLMDelta {
		// A chunk starts and ends nothing; its only mark is the first one.
		if sp := d.ops[ev.Op]; sp != nil && sp.Kind == KindChat && !sp.GotChunk && !sp.Cancelled {
			sp.GotChunk, sp.FirstChunk = true, ev.At
		}
	}
	for i := range effs {
		e := &effs[i]
		switch e.Kind {
		case kernel.EffStartLLM:
			if sp := d.ops[e.Op]; sp == nil {
				sp := d.startOp(KindChat, e.Agent, e.Op, ev.At)
				sp.Input = e.Messages
				if e.Compact {
					sp.Compaction = compactionRequest // compaction_started says why
				}
			}
		case kernel.EffStartTool:
			if sp := d.ops[e.Op]; sp == nil {
				sp := d.startOp(KindTool, e.Agent, e.Op, ev.At)
				sp.CallID, sp.Tool, sp.Args = e.Call.ID, e.Call.Name, e.Call.Arguments
				d.tools[callKey{e.Agent, e.Call.ID}] = sp
			}
		case kernel.EffCancelLLM, kernel.EffCancelTool:
			if sp := d.ops[e.Op]; sp != nil && !sp.Cancelled {
				sp.Cancelled = true
				d.cancels = append(d.cancels, sp)
			}
		case kernel.EffEmit:
			d.record(&ev, &e.Life)
		}
	}
	for _, sp := range d.cancels {
		sp.Reason = d.cancelReason(sp)
	}
	if sp := d.completed; sp != nil {
		for _, l := range d.finished {
			if l.Agent == sp.Agent {
				sp.FinishReason = finishReason(l.Trigger)
			}
		}
	}
	for _, sp := range d.ends {
		d.end(sp, ev.At)
	}
	d.aborted, d.deadline = d.aborted[:0], d.deadline[:0]
	d.cancels, d.ends, d.completed, d.finished = d.cancels[:0], d.ends[:0], nil, d.finished[:0]
	return d.out
}

// cancelReason is why an op cancelled in this step was: its tool's
// deadline, else its agent's abort (nothing for an interjection's cut).
func (d *Deriver) cancelReason(sp *Span) kernel.Reason {
	for _, l := range d.deadline {
		if l.Op == sp.Op {
			return l.Reason
		}
	}
	for _, l := range d.aborted {
		if l.Agent == sp.Agent {
			return l.Reason
		}
	}
	return kernel.ReasonNone
}

// turnOf is the span of agent's running turn (nil when none).
func (d *Deriver) turnOf(agent kernel.AgentID) *Span { return d.agents[agent].turn }

// record reads one lifecycle record.
func (d *Deriver) record(ev *kernel.Event, l *kernel.Lifecycle) {
	switch l.Kind {
	case kernel.LifeTurnStarted:
		d.startTurn(l)
	case kernel.LifeDelegated:
		d.startDelegation(l)
	case kernel.LifeTransition:
		if finishReason(l.Trigger) != "" {
			d.finished = append(d.finished, *l)
		}
	case kernel.LifeRetry:
		if sp := d.ops[l.Op]; sp != nil {
			d.event(sp, Event{Kind: EventRetry, At: l.At, N: l.N, Delay: l.Delay, Text: textcut.Clip(l.Text, maxDetail)})
		}
	case kernel.LifeInterrupted:
		d.aborted = append(d.aborted, *l)
		if sp := d.turnOf(l.Agent); sp != nil {
			d.event(sp, Event{Kind: EventInterrupted, At: l.At, Reason: l.Reason})
		}
	case kernel.LifeTimedOut:
		if sp := d.ops[l.Op]; sp != nil && sp.Kind == KindTool {
			d.deadline = append(d.deadline, *l)
			d.event(sp, Event{Kind: EventTimedOut, At: l.At, Reason: l.Reason})
		} else if sp := d.turnOf(l.Agent); sp != nil {
			d.event(sp, Event{Kind: EventTimedOut, At: l.At, Reason: l.Reason})
		}
	case kernel.LifeInterjected:
		if sp := d.turnOf(l.Agent); sp != nil {
			d.event(sp, Event{Kind: EventInterjected, At: l.At, Queued: l.Queued})
		}
	case kernel.LifeCallDropped:
		if sp := d.turnOf(l.Agent); sp != nil {
			d.event(sp, Event{Kind: EventCallDropped, At: l.At, CallID: l.CallID, Tool: l.Name})
		}
	case kernel.LifeRecovered:
		if sp := d.turnOf(l.Agent); sp != nil {
			d.event(sp, Event{Kind: EventRecovered, At: l.At, N: l.N})
		}
	case kernel.LifeRequestWaiting, kernel.LifeApprovalRequested, kernel.LifeApprovalResolved, kernel.LifeApprovalGranted:
		if sp := d.turnOf(l.Agent); sp != nil {
			d.event(sp, waitEvent(l))
		}
	case kernel.LifeCompactionStarted:
		if sp := d.ops[l.Op]; sp != nil && l.Name != "" {
			sp.Compaction = l.Name
		}
	case kernel.LifeCompacted:
		if sp := d.completed; sp != nil && sp.Op == l.Op {
			sp.FinishReason = "stop" // the summary: text (no transition says so)
			sp.Output = l.Text
		}
		if sp := d.turnOf(l.Agent); sp != nil {
			d.event(sp, Event{Kind: EventCompacted, At: l.At, N: l.N})
		}
	case kernel.LifeOpEnded:
		d.opEnded(ev, l)
	case kernel.LifeCallFinished:
		d.callFinished(l)
	case kernel.LifeTurnEnded:
		d.turnEnded(l)
	}
}

// waitEvent is the turn's event of a wait the step records: a request's
// for a slot, a call's for a person's decision, that wait's end, a grant
// (docs/semantics.md, "Spans").
func waitEvent(l *kernel.Lifecycle) Event {
	e := Event{At: l.At, N: l.N, CallID: l.CallID, Tool: l.Name, Digest: l.Digest}
	switch l.Kind {
	case kernel.LifeRequestWaiting:
		e.Kind = EventRequestWaiting
	case kernel.LifeApprovalRequested:
		e.Kind, e.Delay = EventApprovalRequested, l.Delay
	case kernel.LifeApprovalResolved:
		e.Kind, e.Delay, e.Approval, e.Reason = EventApprovalResolved, l.At-l.Since, l.Approval, l.Reason
	case kernel.LifeApprovalGranted:
		e.Kind = EventApprovalGranted
	}
	return e
}

// newSpan allocates a span from the current block.
func (d *Deriver) newSpan(sp Span) *Span {
	if len(d.block) == 0 {
		d.block = make([]Span, 8)
	}
	p := &d.block[0]
	d.block = d.block[1:]
	*p = sp
	return p
}

// start opens a span under parent (nil: a root span, a trace of its own).
func (d *Deriver) start(sp *Span, parent *Span) *Span {
	d.next++
	sp.ID = d.next
	if parent != nil {
		sp.Parent, sp.Trace = parent.ID, parent.Trace
		parent.children++
	}
	d.open[sp.ID] = sp
	d.out = append(d.out, Change{Kind: Started, Span: sp})
	return sp
}

func (d *Deriver) event(sp *Span, e Event) {
	sp.Events = append(sp.Events, e)
	d.out = append(d.out, Change{Kind: Evented, Span: sp, Event: e})
}

// startTurn opens an agent span: the root's is a trace of its own; a
// child's nests under the delegation that spawned it.
func (d *Deriver) startTurn(l *kernel.Lifecycle) {
	a := d.agents[l.Agent]
	sp := d.newSpan(Span{Kind: KindAgent, Agent: l.Agent, AgentName: a.name, AgentPath: a.path, Turn: l.Turn, Start: l.At, Task: l.Text})
	parent := a.spawnedBy
	if parent == nil {
		sp.Trace = l.Turn
	}
	a.spawnedBy, a.turn = nil, d.start(sp, parent)
	d.agents[l.Agent] = a
}

// startDelegation opens the span of a delegation that spawned a child,
// under the delegating agent's turn.
func (d *Deriver) startDelegation(l *kernel.Lifecycle) {
	parent := d.agents[l.Agent]
	turn := parent.turn
	sp := d.newSpan(Span{Kind: KindDelegation, Agent: l.Agent, AgentName: parent.name, AgentPath: parent.path, Turn: l.Turn,
		CallID: l.CallID, Tool: d.cfg.DelegateTool, Child: l.Child, ChildName: l.Name, Start: l.At, Task: l.Text})
	d.start(sp, turn)
	d.calls[callKey{l.Agent, l.CallID}] = sp
	d.agents[l.Child] = agentSpans{name: l.Name, path: parent.path + "/" + l.Name, spawnedBy: sp}
}

// startOp opens a chat or tool span under its agent's turn.
func (d *Deriver) startOp(kind Kind, agent kernel.AgentID, op kernel.OpID, at time.Duration) *Span {
	a := d.agents[agent]
	turn := a.turn
	sp := d.newSpan(Span{Kind: kind, Agent: agent, AgentName: a.name, AgentPath: a.path, Op: op, Start: at})
	if turn != nil {
		sp.Turn = turn.Turn
	}
	if kind == KindChat {
		sp.Model = d.cfg.Model
	}
	d.ops[op] = d.start(sp, turn)
	return sp
}

// opEnded: a request or a tool op ended. What ended it is the record's
// end; a request that finished or failed on its own answer says more.
func (d *Deriver) opEnded(ev *kernel.Event, l *kernel.Lifecycle) {
	sp := d.ops[l.Op]
	if sp == nil {
		return
	}
	delete(d.ops, l.Op)
	sp.OpEnd = l.End
	own := ev.Op == l.Op
	switch {
	case l.End == kernel.OpLost:
		sp.Reason = kernel.ReasonCrash
	case sp.Kind == KindChat && own && ev.Kind == kernel.EvLLMEnd:
		sp.Usage = ev.Usage
		if l.End == kernel.OpCompleted {
			d.completed = sp
		}
	case sp.Kind == KindChat && own && ev.Kind == kernel.EvLLMError && l.End == kernel.OpFailed:
		sp.Failure, sp.Reason, sp.Detail = ev.Failure, kernel.ReasonLLMError, textcut.Clip(ev.Text, maxDetail)
	case sp.Kind == KindTool && own && ev.Kind == kernel.EvToolResult && l.End != kernel.OpAbandoned:
		sp.Result = ev.Text
		if l.End == kernel.OpFailed {
			sp.Reason = kernel.ReasonToolError
		}
	}
	d.ownEnd(sp)
}

// callFinished: a call got its one result. A tool span notes it; a
// delegation's own end needs its child's turn to have ended too; a call
// answered without running is an event of its agent's turn.
func (d *Deriver) callFinished(l *kernel.Lifecycle) {
	k := callKey{l.Agent, l.CallID}
	if sp := d.calls[k]; sp != nil {
		sp.Status, sp.Tool = l.Status, l.Name
		delete(d.calls, k)
		if sp.childEnded() {
			d.ownEnd(sp)
		}
		return
	}
	if sp := d.tools[k]; sp != nil {
		delete(d.tools, k)
		if !sp.Ended {
			sp.Status = l.Status
			if l.Status != kernel.CallOK && sp.Reason == kernel.ReasonNone {
				sp.Reason = l.Reason
			}
		}
		return
	}
	if l.Op == 0 {
		if sp := d.turnOf(l.Agent); sp != nil {
			d.event(sp, Event{Kind: EventCall, At: l.At, CallID: l.CallID, Tool: l.Name, Status: l.Status, Reason: l.Reason})
		}
	}
}

// childEnded reports whether a delegation's child's turn has ended.
func (sp *Span) childEnded() bool { return sp.Outcome != kernel.OutcomeNone }

// turnEnded: an agent's turn ended. Its span's own end; a child's ends
// the delegation that spawned it too, once the delegation's call has its
// result.
func (d *Deriver) turnEnded(l *kernel.Lifecycle) {
	a := d.agents[l.Agent]
	sp := a.turn
	if sp == nil {
		return
	}
	a.turn = nil
	d.agents[l.Agent] = a
	sp.Outcome, sp.Reason, sp.Output = l.Outcome, l.Reason, l.Text
	if l.Outcome != kernel.OutcomeCompleted {
		sp.Detail = textcut.Clip(l.Detail, maxDetail)
	}
	d.ownEnd(sp)
	if l.Agent == kernel.Root {
		return
	}
	delete(d.agents, l.Agent) // a child has one turn
	if del := d.open[sp.Parent]; del != nil && del.Kind == KindDelegation {
		del.Outcome, del.Reason, del.Output = l.Outcome, l.Reason, l.Text
		if _, open := d.calls[callKey{del.Agent, del.CallID}]; !open {
			d.ownEnd(del)
		}
	}
}

// ownEnd notes that what sp stands for has ended: the span ends at the
// end of this step, once the spans under it have.
func (d *Deriver) ownEnd(sp *Span) {
	if sp.ownEnded {
		return
	}
	sp.ownEnded = true
	d.ends = append(d.ends, sp)
}

// end ends sp when nothing under it is open, and then its parent when
// that was the last thing the parent waited for.
func (d *Deriver) end(sp *Span, at time.Duration) {
	for sp != nil && sp.ownEnded && sp.children == 0 && !sp.Ended {
		sp.Ended, sp.End = true, at
		delete(d.open, sp.ID)
		d.out = append(d.out, Change{Kind: Ended, Span: sp})
		parent := d.open[sp.Parent]
		if parent == nil {
			return
		}
		parent.children--
		sp = parent
	}
}

// Open returns the spans started and not yet ended, in id order (parents
// before their children): what a process holds open when it stops, and
// what a recovered one holds after replaying the log.
func (d *Deriver) Open() []*Span {
	out := make([]*Span, 0, len(d.open))
	for _, sp := range d.open { // determinism: sorted below
		out = append(out, sp)
	}
	slices.SortFunc(out, func(a, b *Span) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// compactionRequest names a compaction's summarising request where the
// kernel does (a request_waiting record's Name).
const compactionRequest = "compaction"

// finishReason is the reason a request's stream finished, read from the
// agent's transition in the step its op completed (a compaction's, whose
// Compacted is internal, from its compacted record).
func finishReason(t fsm.Trigger) string {
	switch t {
	case fsm.StreamText:
		return "stop"
	case fsm.StreamTools, fsm.StreamDelegations:
		return "tool_calls"
	}
	return ""
}
