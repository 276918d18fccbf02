package kernel

import (
	"fmt"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/textcut"
)

// Kernel is one agent tree. It is not safe for concurrent use: exactly one
// goroutine (the simulator, or the live driver's owner goroutine) calls Step.
type Kernel struct {
	cfg Config
	m   *fsm.Machine
	// agents: index is the AgentID (the root is 0); a freed child's slot
	// is nil. held counts the others; finished are the children whose
	// turn ended in the current step, freed at the start of the next
	// (free.go).
	agents   []*agent
	held     int
	finished []AgentID
	// streaming counts the request ops not yet ended (cancelled ones
	// included); waiting are the agents whose next request waits for one
	// of the Limits.MaxParallelRequests slots, in the order asked
	// (requests.go).
	streaming int
	waiting   []AgentID
	ops       map[OpID]op
	nextOp    OpID
	now       time.Duration
	log       *Log
	// out is the effect buffer of the current Step, reused across Steps.
	out []Effect
	// instances counts spawned agents per script name, for name#N.
	instances map[string]int
	shutdown  bool
	// idempotent holds Config.Idempotent as a set.
	idempotent map[string]bool
	// approvals is which calls ask (Config.Ask) and the session's grants.
	approvals approvalPolicy
	// scratch for subtree traversals (no allocation per cancel once warm).
	stack []AgentID
	order []AgentID
}

// opKind says what an op is.
type opKind uint8

const (
	opLLM opKind = iota + 1
	opTool
	opTimer
)

// op is the kernel's record of one operation in the world.
//
// Invariant: an op is in Kernel.ops from the effect that starts it until the
// event (or grace timer) that ends it; nothing else names a live op.
type op struct {
	kind  opKind
	agent AgentID
	start time.Duration
	// cancelling: a cancel was sent (or, for a tool, its call was closed by a
	// timeout); the next answer is an acknowledgement, any content is dropped.
	cancelling bool
	// timer is the timer op watching this op (watchdog, tool deadline or grace).
	timer OpID
	// call is a tool op's index in its agent's open calls.
	call int32
	// tkind and target describe a timer op: what it is and which op (if any) it
	// watches; at is when it is due (so recovery can arm it again).
	tkind  TimerKind
	target OpID
	at     time.Duration
	// A request's: the turn of its agent it was started in, whether it is
	// a compaction's summarising request, and how many history messages
	// it sent (docs/semantics.md, "Usage", "Compaction").
	turn    uint64
	compact bool
	sent    int
}

// New returns a kernel for one tree with an Idle root.
func New(cfg Config) (*Kernel, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kernel config: %w", err)
	}
	cfg = cfg.withDefaults()
	m := cfg.Machine
	if m == nil {
		m = fsm.NewMachine()
	}
	k := &Kernel{
		cfg:       cfg,
		m:         m,
		ops:       make(map[OpID]op),
		log:       newLog(cfg.LogCapacity),
		instances: make(map[string]int),
	}
	if len(cfg.Idempotent) > 0 {
		k.idempotent = make(map[string]bool, len(cfg.Idempotent))
		for _, name := range cfg.Idempotent {
			k.idempotent[name] = true
		}
	}
	k.approvals = newApprovalPolicy(cfg.Ask, cfg.Grants)
	root := k.newAgent(nil, cfg.RootName, cfg.profileIndex(cfg.RootProfile))
	root.turn = cfg.Turns
	// The system prompt comes first, unless a resumed history brings its own.
	if sys := cfg.rootSystem(); sys != "" && (len(cfg.History) == 0 || cfg.History[0].Role != RoleSystem) {
		root.history = append(root.history, Message{Role: RoleSystem, Content: sys})
	}
	root.history = append(root.history, cfg.History...)
	for _, m := range cfg.History {
		for _, c := range m.ToolCalls {
			root.claimID(c.ID) // validated above: ids are unique
		}
	}
	return k, nil
}

// MustNew is New for configurations known to be valid (tests, benchmarks).
func MustNew(cfg Config) *Kernel {
	k, err := New(cfg)
	if err != nil {
		panic(err)
	}
	return k
}

// Step feeds one event and returns the effects it caused, in the order they
// must be executed. The returned slice is reused by the next Step; copy what
// you keep. Event times must not decrease (a driver bug; Step panics naming
// both times).
func (k *Kernel) Step(ev Event) []Effect {
	k.out = k.out[:0]
	if ev.At < k.now {
		panic(fmt.Sprintf("kernel: time went backwards: %s is before now=%v", ev.Describe(), k.now))
	}
	k.now = ev.At
	k.freeFinished()
	switch ev.Kind {
	case EvSubmit:
		k.onSubmit(ev)
	case EvInterject:
		k.onInterject(ev)
	case EvCancel:
		if !k.cancelFreed(ev) {
			k.onCancel(ev)
		}
	case EvShutdown:
		k.onShutdown()
	case EvLLMDelta:
		k.onDelta(ev)
	case EvLLMEnd:
		k.onLLMEnd(ev)
	case EvLLMError:
		k.onLLMError(ev)
	case EvLLMRetry:
		k.onLLMRetry(ev)
	case EvToolResult:
		k.onToolResult(ev)
	case EvTimer:
		k.onTimer(ev)
	case EvRecover:
		k.onRecover()
	case EvDecision:
		k.onDecision(ev)
	case EvCompact:
		k.onCompact(ev)
	default:
		k.reject(NoAgent, fmt.Errorf("unknown event kind %d", ev.Kind))
	}
	k.sendWaiting()
	return k.out
}

// gate is the stale-event filter (I8): it returns the op an event names, or
// records the event as stale (unknown op) or rejects it (op of another kind).
func (k *Kernel) gate(ev Event, want opKind) (op, bool) {
	o, ok := k.ops[ev.Op]
	if !ok {
		k.emit(Lifecycle{Kind: LifeStale, Agent: NoAgent, Op: ev.Op, Text: ev.Kind.String()})
		return op{}, false
	}
	if o.kind != want {
		k.reject(o.agent, fmt.Errorf("%s names op %d, which is not a %s", ev.Kind, ev.Op, kindName(want)))
		return op{}, false
	}
	return o, true
}

// opEnded is the common gate of an op's terminal event: a stream's end or
// failure, a tool's result. A stale event is recorded. A cancelled op's
// answer is its acknowledgement — or, for a tool, a late result that must
// not reach the model (F3) — and ends the op, which may settle the agent.
// Otherwise the op ends completed and opEnded returns its agent and op for
// the caller to apply the result; nil when there is nothing to apply.
func (k *Kernel) opEnded(ev Event, kind opKind) (*agent, op) {
	o, ok := k.gate(ev, kind)
	if !ok {
		return nil, op{}
	}
	a := k.agents[o.agent]
	if o.cancelling {
		if kind == opTool && ev.Status != ToolCancelled {
			k.emit(Lifecycle{Kind: LifeLate, Agent: a.id, Op: ev.Op, Text: "result after cancel dropped: " + textcut.Clip(ev.Text, 80)})
		}
		k.endOpUsage(a, ev.Op, o, OpCancelled, usageOf(ev))
		k.startWaiting(a) // a timed-out tool's slot is free once it stopped
		k.settleUp(a)
		return nil, op{}
	}
	// An op nobody cancelled lives only while its agent waits for it: a
	// request while Streaming, a tool while Tooling or Delegating. Every
	// way out of those states cancels the op first (cutRequest, graceOp).
	if live := (kind == opLLM && a.state == fsm.Streaming && a.req == ev.Op) ||
		(kind == opTool && (a.state == fsm.Tooling || a.state == fsm.Delegating)); !live {
		panic(fmt.Sprintf("kernel: %s op %d of %s is live in state %s", kindName(kind), ev.Op, a.path, a.state))
	}
	end := OpCompleted
	if ev.Kind == EvLLMError || (kind == opTool && ev.Status != ToolOK) {
		end = OpFailed
	}
	k.endOpUsage(a, ev.Op, o, end, usageOf(ev))
	return a, o
}

func kindName(k opKind) string {
	switch k {
	case opLLM:
		return "request"
	case opTool:
		return "tool call"
	case opTimer:
		return "timer"
	}
	return "op"
}

// fire moves a through the FSM. On an undeclared pair it reports an EffError
// naming the state and trigger and returns false; the caller must not proceed.
func (k *Kernel) fire(a *agent, t fsm.Trigger) bool {
	from := a.state
	if err := k.m.Fire(&a.state, t); err != nil {
		k.out = append(k.out, Effect{Kind: EffError, Agent: a.id, Code: ErrCodeUndeclared, State: from, Trigger: t, Detail: err.Error(), Err: err})
		k.emit(Lifecycle{Kind: LifeRejected, Agent: a.id, From: from, To: from, Trigger: t, Text: err.Error()})
		return false
	}
	if a.state != from {
		k.emit(Lifecycle{Kind: LifeTransition, Agent: a.id, From: from, To: a.state, Trigger: t})
	}
	return true
}

// reject refuses a malformed input: an EffError carrying err (and its text)
// plus a LifeRejected record.
func (k *Kernel) reject(id AgentID, err error) {
	detail := err.Error()
	k.out = append(k.out, Effect{Kind: EffError, Agent: id, Code: ErrCodeBadInput, Detail: detail, Err: err})
	k.emit(Lifecycle{Kind: LifeRejected, Agent: id, Text: detail})
}

// emit stamps and logs a lifecycle event and adds the EffEmit.
func (k *Kernel) emit(l Lifecycle) {
	l.At = k.now
	if a := k.agentAt(l.Agent); a != nil && l.Turn == 0 {
		l.Turn = a.turn
	}
	l = k.log.append(l)
	k.out = append(k.out, Effect{Kind: EffEmit, Agent: l.Agent, Life: l})
}

func (k *Kernel) newOp(o op) OpID {
	k.nextOp++
	o.start = k.now
	if o.kind == opLLM {
		k.streaming++
	}
	k.ops[k.nextOp] = o
	return k.nextOp
}

func (k *Kernel) setTimer(a *agent, kind TimerKind, at time.Duration, target OpID) OpID {
	id := k.newOp(op{kind: opTimer, agent: a.id, tkind: kind, target: target, at: at})
	k.out = append(k.out, Effect{Kind: EffSetTimer, Agent: a.id, Op: id, At: at, Timer: kind})
	return id
}

func (k *Kernel) stopTimer(id OpID) {
	if id == 0 {
		return
	}
	o, ok := k.ops[id]
	if !ok || o.kind != opTimer {
		panic(fmt.Sprintf("kernel: stopTimer(%d): not a live timer", id))
	}
	delete(k.ops, id)
	k.out = append(k.out, Effect{Kind: EffStopTimer, Agent: o.agent, Op: id, Timer: o.tkind})
}

// endOp records the end of a request or tool op (I9: exactly once).
func (k *Kernel) endOp(a *agent, id OpID, o op, end OpEnd) { k.endOpUsage(a, id, o, end, nil) }

// endOpUsage is endOp for an op whose end reported usage u (a request's
// stream end; nil: none).
func (k *Kernel) endOpUsage(a *agent, id OpID, o op, end OpEnd, u *Usage) {
	if o.kind == opLLM {
		k.noteRequestEnd(a, o, u)
	}
	k.stopTimer(o.timer)
	delete(k.ops, id)
	a.inflight--
	if o.kind == opTool {
		a.runningTools--
	}
	if o.kind == opLLM {
		k.streaming-- // its slot goes to a waiting request as the step ends
	}
	if a.req == id {
		a.req = 0
	}
	k.emit(Lifecycle{Kind: LifeOpEnded, Agent: a.id, Op: id, End: end, Usage: u})
	k.retire(a) // a finished child whose last op just ended
}

// Read-only view. Slices returned share the kernel's memory and must not be
// modified; they stay valid (as a snapshot of that moment) after later Steps.

// Now is the time of the last event.
func (k *Kernel) Now() time.Duration { return k.now }

// Config returns the kernel's configuration with defaults applied.
func (k *Kernel) Config() Config { return k.cfg }

// Log is the replayable lifecycle log.
func (k *Kernel) Log() *Log { return k.log }

// NumAgents is how many agents the tree has ever held; ids are
// 0..NumAgents-1. The finished children among them are freed (HeldAgents).
func (k *Kernel) NumAgents() int { return len(k.agents) }

// numOps is how many operations (requests, tools, timers) are live.
func (k *Kernel) numOps() int { return len(k.ops) }

// Quiescent reports whether every agent is Idle and no op or timer is live.
func (k *Kernel) Quiescent() bool {
	if len(k.ops) != 0 {
		return false
	}
	for _, a := range k.agents {
		if a != nil && a.state != fsm.Idle {
			return false
		}
	}
	return true
}

// Agent returns a read-only view of one agent, id one of 0..NumAgents-1.
// The view of a freed agent says Freed and nothing else.
func (k *Kernel) Agent(id AgentID) AgentView {
	a := k.agents[id]
	if a == nil {
		return freedView(id)
	}
	return AgentView{a: a}
}

// Find resolves an agent the tree holds by path ("main/task1/explore") or
// instance name ("task1", "task1#2"). Instance names are unique in a tree,
// freed agents' included: the first agent spawned from a script gets the
// script's name, later ones name#2, name#3, … A freed agent is not found.
func (k *Kernel) Find(name string) (AgentID, bool) {
	for _, a := range k.agents {
		if a != nil && (a.path == name || a.name == name) {
			return a.id, true
		}
	}
	return NoAgent, false
}

// Target returns the agent an event is addressed to, before it is stepped:
// the root for submissions and interjections, the cancel's or the
// decision's agent, or the agent owning the op a world event names. NoAgent
// when the event is stale or malformed. Traces use it to print the agent
// path and state before/after.
func (k *Kernel) Target(ev Event) AgentID {
	switch ev.Kind {
	case EvSubmit, EvInterject, EvShutdown, EvRecover, EvCompact:
		return Root
	case EvCancel, EvDecision:
		if ev.Agent >= 0 && int(ev.Agent) < len(k.agents) {
			return ev.Agent // a freed agent's too: the input names it
		}
		return NoAgent
	}
	if o, ok := k.ops[ev.Op]; ok {
		return o.agent
	}
	return NoAgent
}

// agentAt is the agent id names, or nil when it names none or a freed one
// (ids come from outside: events, shells, traces).
func (k *Kernel) agentAt(id AgentID) *agent {
	if id < 0 || int(id) >= len(k.agents) {
		return nil
	}
	return k.agents[id]
}

// AgentPath is the path of id, or "" when id names no agent the tree holds.
func (k *Kernel) AgentPath(id AgentID) string {
	if a := k.agentAt(id); a != nil {
		return a.path
	}
	return ""
}

// AgentState is the state of id (Idle when id names no agent).
func (k *Kernel) AgentState(id AgentID) fsm.State {
	if a := k.agentAt(id); a != nil {
		return a.state
	}
	return fsm.Idle
}
