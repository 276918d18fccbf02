package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// Violation is one broken invariant (I1–I14 of DESIGN §4), expectation
// ("expect"), liveness or limit, located in virtual time and in the tree.
type Violation struct {
	Invariant string
	At        time.Duration
	Agent     string
	Detail    string
	// Recent are the last events delivered before it, oldest first.
	Recent []string
}

// MarshalJSON writes times in Go duration syntax.
func (v Violation) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Invariant string   `json:"invariant"`
		At        string   `json:"at"`
		Agent     string   `json:"agent"`
		Detail    string   `json:"detail"`
		Recent    []string `json:"recent,omitempty"`
	}{v.Invariant, v.At.String(), v.Agent, v.Detail, v.Recent})
}

func (v Violation) String() string {
	return fmt.Sprintf("%s @%v %s: %s", v.Invariant, v.At, v.Agent, v.Detail)
}

// maxViolations bounds what one run records (a limit on everything).
const maxViolations = 64

// recentEvents is how many delivered events a violation quotes.
const recentEvents = 8

// oracle checks the invariants after every step. It judges from what it can
// observe — the events delivered, the effects returned, the lifecycle events
// and each agent's View — never from kernel internals, so a broken agent loop
// cannot hide from it.
type oracle struct {
	lim kernel.Limits
	// the configuration beyond Limits that refusals are judged by
	delegateTool string
	maxAgents    int
	c            Core
	now          time.Duration
	agents       []*agentObs
	ops          opTable
	timers       map[kernel.OpID]bool
	callFin      map[callKey]*callFinObs
	out          []Violation
	recent       [recentEvents]kernel.Event
	nrecent      int
	table        map[[2]uint8]fsm.State

	// user texts submitted or interjected, by text: how many times each must
	// appear in the root's history (I10).
	userTexts map[string]int
	// rootTexts counts each user text (not markers) in the root's history
	// as its messages arrive (I10).
	rootTexts map[string]int
	interjs   []interjObs
	shutdown  bool
	// pendingUser counts user inputs that arrived while the root was
	// Interrupted; they may start the next turn once it settles (I1).
	pendingUser int

	// per-step scratch
	step  uint32
	mark  []uint32
	dirty []kernel.AgentID
	// trans holds each agent's transitions of this step (index = agent
	// id); transUsed lists the agents that have any, so a step resets only
	// those and the slices are reused.
	trans     [][]kernel.Lifecycle
	transUsed []kernel.AgentID
	entered   []kernel.AgentID // agents that entered Interrupted this step
	stale     bool
	staleWhy  string
	cancelEv  *cancelObs
	// capCut is the request a chunk took past max_message_bytes in this
	// step: the step must cut it (I15).
	capCut    *opObs
	deadlines []quiesceDeadline // pending I3 deadlines
	userInput bool
	inputText string
	probes    *probeSet
	// busy counts agents not Idle; with live ops and timers it tells when the
	// tree is quiescent, and quietAt when it last became so.
	busy int
	// inFlight holds the ops started and not yet ended (o.ops keeps every
	// op ever started, to recognise stale events).
	inFlight map[kernel.OpID]*opObs
	quiet    bool
	quietAt  time.Duration
	// emitted keeps a hash of each of the last emittedRing lifecycle events
	// seen in effects (slot (seq-1) % emittedRing; it grows to the ring's
	// size, so a short run allocates little), to compare with the replayed
	// log at the end; nEmitted counts them all.
	emitted  []uint64
	nEmitted uint64
	// endedNow are turns that ended in this step, checked after refresh.
	endedNow []kernel.Lifecycle
	// partials are texts streamed by requests cut (or failed) in this
	// step, which the same step must keep as partial messages (F7, I10).
	partials []partialObs
	// lastActivity is the latest user input or fault (scheduled or
	// injected); liveChecked is set once the liveness bound was judged.
	lastActivity time.Duration
	liveChecked  bool
}

// emittedRing is how many lifecycle hashes the oracle keeps: at least a
// simulated kernel's whole log (the compile-time check below), so every
// event a late subscriber can replay is compared. A bounded ring instead of
// a slice of every hash: a long run's memory stays flat.
const emittedRing = 1024

const _ = uint(emittedRing - SimLogCapacity) // emittedRing ≥ SimLogCapacity

// lifeHash mixes a lifecycle event's identifying fields into 64 bits. It
// only has to tell a replayed event from the one emitted with the same
// sequence number (F10): missing, reordered or substituted events change
// seq, kind, agent, op or turn; texts are represented by their length, which
// keeps this off the per-chunk hot path.
func lifeHash(l kernel.Lifecycle) uint64 {
	h := uint64(14695981039346656037)
	for _, v := range [...]uint64{
		l.Seq, uint64(l.At),
		uint64(l.Kind) | uint64(l.From)<<8 | uint64(l.To)<<16 | uint64(l.Trigger)<<24 | uint64(l.Outcome)<<32 | uint64(l.Reason)<<40 | uint64(l.End)<<48 | uint64(l.Status)<<56,
		uint64(uint32(l.Agent)) | uint64(uint32(l.Child))<<32, l.Turn, uint64(l.Op),
		uint64(len(l.Text)) | uint64(len(l.CallID))<<24 | uint64(len(l.Name))<<48,
	} {
		h ^= v
		h *= 0x9e3779b97f4a7c15
		h ^= h >> 32
	}
	return h
}

// quiesceDeadline is one interrupt's I3 obligation: by `by`, every agent of
// the subtree has left the turn it was in, and every op in flight then has
// ended. (A new turn started afterwards by a queued user input is fine.)
type quiesceDeadline struct {
	by     time.Duration
	agents []agentTurn
	ops    []kernel.OpID
}

type agentTurn struct {
	id   kernel.AgentID
	turn uint64
}

type partialObs struct {
	agent kernel.AgentID
	text  string
	why   string
	kept  bool
}

type callKey struct {
	agent kernel.AgentID
	id    string
}

type interjObs struct {
	text    string
	partial string
	seen    bool
}

type cancelObs struct {
	target     kernel.AgentID
	shouldAct  bool
	activeSub  []kernel.AgentID
	beforeInt  bool
	wasShutdwn bool
}

// callFinObs is what the oracle knows of one call's terminal result.
type callFinObs struct {
	n int              // CallFinished events seen (exactly one, I13)
	l kernel.Lifecycle // the first of them
}

type agentObs struct {
	parent    kernel.AgentID
	path      string
	state     fsm.State
	turn      uint64
	turnStart time.Duration
	histLen   int
	last      kernel.Message
	// incremental transcript validation (I4)
	open      map[string]bool
	openCount int
	ids       map[string]struct{}
	calls     []string // every call id seen in this agent's assistant messages
	// I1
	frozen bool
	// I11
	interruptedTurn uint64
	markerTurn      uint64
	markers         int
	// I13 justification for the current turn
	userCancelled bool
	parentAborted bool
	timedOut      kernel.Reason
	llmFailed     bool
	requestsTurn  int
	lastReq       kernel.OpID
	endedTurn     uint64
	startedTurn   uint64
	// how the last turn ended, and which call of the parent is owed that
	// end as its typed result (a call closed before the child settled)
	endOutcome kernel.Outcome
	endReason  kernel.Reason
	owed       *callFinObs
	// the reason of the current turn's interrupt (LifeInterrupted)
	abortReason kernel.Reason
	// children spawned in the current turn (MaxChildren refusals)
	spawnedTurn int
	// delegated maps a call id to the child spawned for it
	delegated map[string]kernel.AgentID
	// expectations
	llmRequests int
	liveOps     int
	liveTools   int // tool ops started and not ended (max_parallel_tools)
	interrupted bool
}

type opObs struct {
	agent       kernel.AgentID
	tool        bool
	start       time.Duration
	lastChunk   uint32
	gotChunk    bool
	lastChunkAt time.Duration
	terminal    bool
	endedOK     bool
	result      kernel.ToolStatus // a tool's delivered result (when terminal)
	timedOut    bool              // a tool_timeout fired for this op
	cancels     int
	ended       bool
	text        []byte
	frags       []fragObs
	// msgBytes is what the stream delivered, counted as the kernel counts
	// it against max_message_bytes; overCapped is set once a chunk would
	// have taken it past the cap (the kernel must cut the stream, I15).
	msgBytes   int
	overCapped bool
}

// fragObs is one call a stream delivered, as the oracle assembled it.
type fragObs struct {
	index   int // the call's index in the stream
	name    string
	args    []byte
	started bool // a tool op started for it
}

func newOracle(c Core, cfg kernel.Config) *oracle {
	o := &oracle{
		lim: cfg.Limits, c: c,
		delegateTool: cmp.Or(cfg.DelegateTool, kernel.DefaultDelegateTool),
		maxAgents:    cmp.Or(cfg.MaxAgents, kernel.DefaultMaxAgents),
		inFlight:     make(map[kernel.OpID]*opObs),
		timers:       make(map[kernel.OpID]bool),
		callFin:      make(map[callKey]*callFinObs),
		table:        make(map[[2]uint8]fsm.State),
		userTexts:    make(map[string]int),
		rootTexts:    make(map[string]int),
		probes:       newProbeSet(),
	}
	for _, t := range fsm.Table() {
		o.table[[2]uint8{uint8(t.From), uint8(t.Trigger)}] = t.To
	}
	o.observe(kernel.Root)
	return o
}

func (o *oracle) violate(inv string, agent kernel.AgentID, format string, args ...any) {
	if len(o.out) >= maxViolations {
		return
	}
	path := ""
	if agent >= 0 && int(agent) < len(o.agents) && o.agents[agent] != nil {
		path = o.agents[agent].path
	}
	v := Violation{Invariant: inv, At: o.now, Agent: path, Detail: fmt.Sprintf(format, args...)}
	n := min(o.nrecent, recentEvents)
	for i := o.nrecent - n; i < o.nrecent; i++ {
		v.Recent = append(v.Recent, textcut.Clip(o.recent[i%recentEvents].Describe(), 160))
	}
	o.out = append(o.out, v)
}

// observe makes sure the oracle tracks agent id (new children appear as the
// kernel spawns them).
func (o *oracle) observe(id kernel.AgentID) *agentObs {
	for int(id) >= len(o.agents) {
		o.agents = append(o.agents, nil)
		o.mark = append(o.mark, 0)
	}
	if a := o.agents[id]; a != nil {
		return a
	}
	v := o.c.View(id)
	a := &agentObs{parent: v.Parent, path: v.Path, open: map[string]bool{}, ids: map[string]struct{}{}}
	o.agents[id] = a
	if v.Parent >= 0 && int(v.Parent) < len(o.agents) && o.agents[v.Parent] != nil && o.agents[v.Parent].frozen {
		// F14: a child spawned under a frozen parent is frozen from birth.
		a.frozen = true
	}
	return a
}

func isActive(s fsm.State) bool {
	return s == fsm.Streaming || s == fsm.Tooling || s == fsm.Delegating
}

// before is called with the event about to be stepped.
func (o *oracle) before(ev *kernel.Event, target kernel.AgentID) {
	o.now = ev.At
	o.step++
	o.dirty = o.dirty[:0]
	o.entered = o.entered[:0]
	for _, id := range o.transUsed {
		o.trans[id] = o.trans[id][:0]
	}
	o.transUsed = o.transUsed[:0]
	o.stale, o.staleWhy, o.cancelEv, o.userInput, o.inputText = false, "", nil, false, ""
	o.capCut = nil
	o.endedNow = o.endedNow[:0]
	o.partials = o.partials[:0]
	// Events are formatted only when a violation quotes them.
	o.recent[o.nrecent%recentEvents] = *ev
	o.nrecent++
	o.expireDeadlines()
	o.checkLiveness()
	root := o.agents[kernel.Root]

	switch ev.Kind {
	case kernel.EvSubmit, kernel.EvInterject:
		o.userInput, o.inputText = true, ev.Text
		o.userTexts[ev.Text]++
		if ev.Kind == kernel.EvInterject {
			ij := interjObs{text: ev.Text}
			if root.state == fsm.Streaming {
				if op := o.ops.get(root.lastReq); op != nil && !op.terminal && op.cancels == 0 {
					ij.partial = string(op.text)
				}
			}
			o.interjs = append(o.interjs, ij)
			o.probeInterject(root.state)
		}
		if root.state == fsm.Interrupted {
			o.pendingUser++
		}
	case kernel.EvCancel, kernel.EvShutdown:
		o.beforeCancel(ev)
	case kernel.EvLLMDelta, kernel.EvLLMEnd, kernel.EvLLMError, kernel.EvLLMRetry, kernel.EvToolResult:
		o.beforeWorld(ev)
	case kernel.EvTimer:
		if !o.timers[ev.Op] {
			o.stale, o.staleWhy = true, "timer that is not set"
		}
		delete(o.timers, ev.Op)
	}
}

func (o *oracle) beforeCancel(ev *kernel.Event) {
	target := kernel.Root
	if ev.Kind == kernel.EvCancel {
		target = ev.Agent
		if target < 0 || int(target) >= len(o.agents) || o.agents[target] == nil {
			return
		}
	} else {
		o.shutdown = true
	}
	a := o.agents[target]
	ce := &cancelObs{target: target, beforeInt: a.state == fsm.Interrupted, wasShutdwn: ev.Kind == kernel.EvShutdown}
	bound := ev.Turn == 0 || ev.Turn == a.turn
	// A cancel acts exactly when its turn is running: a repeat of a turn
	// already cancelled finds it Interrupted or ended (F8, I11).
	ce.shouldAct = isActive(a.state) && bound
	if ce.shouldAct && ev.Kind == kernel.EvCancel {
		// Recorded now: an agent with nothing in flight settles, and ends
		// its turn, within this very step (checkCancel verifies it acted).
		a.userCancelled = true
	}
	if ce.shouldAct {
		for id := range o.agents {
			x := o.agents[id]
			if x == nil || !isActive(x.state) || !o.descends(kernel.AgentID(id), target) {
				continue
			}
			ce.activeSub = append(ce.activeSub, kernel.AgentID(id))
			o.touch(kernel.AgentID(id))
		}
		o.probeCancel(target)
	} else if a.state == fsm.Interrupted {
		o.probes.hit(ProbeCancelDuringInterrupted)
	}
	o.cancelEv = ce
}

// descends reports whether id is target or below it.
func (o *oracle) descends(id, target kernel.AgentID) bool {
	for id >= 0 && int(id) < len(o.agents) && o.agents[id] != nil {
		if id == target {
			return true
		}
		id = o.agents[id].parent
	}
	return false
}

func (o *oracle) beforeWorld(ev *kernel.Event) {
	op := o.ops.get(ev.Op)
	switch {
	case op == nil:
		o.stale, o.staleWhy = true, "unknown op"
		return
	case op.ended:
		o.stale, o.staleWhy = true, "op already ended"
		if ev.Kind == kernel.EvToolResult || ev.Kind == kernel.EvLLMEnd {
			o.probes.hit(ProbeLateAfterAbandon)
		}
		return
	case op.terminal && ev.Kind != kernel.EvToolResult:
		o.stale, o.staleWhy = true, "event after the stream's end"
		return
	case op.terminal:
		o.stale, o.staleWhy = true, "second result"
		return
	}
	switch ev.Kind {
	case kernel.EvLLMDelta:
		if ev.Chunk != 0 && ev.Chunk <= op.lastChunk {
			o.stale, o.staleWhy = true, "duplicate chunk"
			return
		}
		if op.cancels > 0 {
			o.stale, o.staleWhy = true, "chunk after cancel"
			return
		}
		op.lastChunk = ev.Chunk
		if o.overCap(op, ev) {
			return
		}
		op.gotChunk, op.lastChunkAt = true, o.now
		op.text = append(op.text, ev.Text...)
		if ev.Call != nil {
			f := op.frag(ev.Call.Index)
			if ev.Call.Name != "" {
				f.name = ev.Call.Name
			}
			f.args = append(f.args, ev.Call.Args...)
		}
	case kernel.EvLLMRetry:
		if op.cancels > 0 {
			o.stale, o.staleWhy = true, "retry after cancel"
		}
	case kernel.EvLLMEnd:
		op.terminal = true
		op.endedOK = op.cancels == 0
	case kernel.EvLLMError:
		op.terminal = true
		if op.cancels == 0 {
			// Any failure nobody asked for — even one the provider calls
			// "cancelled" — is a stream failure of this turn.
			o.agents[op.agent].llmFailed = true
			if len(op.text) > 0 {
				o.partials = append(o.partials, partialObs{agent: op.agent, text: string(op.text), why: "a stream failure"})
			}
		}
	case kernel.EvToolResult:
		op.terminal = true
		op.result = ev.Status
		if op.cancels > 0 && ev.Status != kernel.ToolCancelled {
			o.probes.hit(ProbeLateResultAfterCancel)
		}
	}
	if ev.Kind != kernel.EvLLMDelta && ev.Kind != kernel.EvLLMRetry {
		o.probeRace(op.agent, false)
	}
}

func (o *oracle) touch(id kernel.AgentID) {
	if id < 0 {
		return
	}
	o.observe(id)
	if o.mark[id] != o.step {
		o.mark[id] = o.step
		o.dirty = append(o.dirty, id)
	}
}

// after checks the step's effects and the agents they touched.
func (o *oracle) after(ev *kernel.Event, target kernel.AgentID, effs []kernel.Effect) {
	o.checkRootTurn(ev, effs)
	rejected := false
	if o.stale && target != kernel.NoAgent {
		o.touch(target) // I8: a stale event must not have changed it
	}
	for i := range effs {
		e := &effs[i]
		// Agents named by structural effects are re-read below. Progress
		// (a chunk, a retry, a timer) cannot change an agent's state or
		// history, so it does not force a re-read.
		if e.Agent >= 0 && !progressOnly(e) {
			o.touch(e.Agent)
		}
		if o.stale && !(e.Kind == kernel.EffEmit && (e.Life.Kind == kernel.LifeStale || e.Life.Kind == kernel.LifeLate)) {
			o.violate("I8", e.Agent, "stale event (%s) caused %s", o.staleWhy, e.Describe())
		}
		switch e.Kind {
		case kernel.EffError:
			rejected = true
		case kernel.EffStartLLM:
			o.onStartLLM(e)
		case kernel.EffStartTool:
			o.onStartTool(e)
		case kernel.EffCancelLLM, kernel.EffCancelTool:
			op := o.ops.get(e.Op)
			switch {
			case op == nil || op.ended:
				o.violate("I2", e.Agent, "cancel for op %d, which is not in flight", e.Op)
			default:
				op.cancels++
				if op.cancels > 1 {
					o.violate("I2", e.Agent, "op %d cancelled %d times (exactly one cancel per op)", e.Op, op.cancels)
				}
				if e.Kind == kernel.EffCancelLLM && op.cancels == 1 && !op.terminal && len(op.text) > 0 {
					o.partials = append(o.partials, partialObs{agent: op.agent, text: string(op.text), why: "its cancel"})
				}
			}
		case kernel.EffSetTimer:
			o.timers[e.Op] = true
		case kernel.EffStopTimer:
			if !o.timers[e.Op] {
				o.violate("I9", e.Agent, "stop of timer %d, which is not set", e.Op)
			}
			delete(o.timers, e.Op)
		case kernel.EffEmit:
			o.onLife(e.Life)
		}
	}
	if o.userInput && rejected {
		o.userTexts[o.inputText]-- // refused: it was never the kernel's to keep
		if n := len(o.interjs); n > 0 && ev.Kind == kernel.EvInterject {
			o.interjs = o.interjs[:n-1]
		}
	}
	// Only agents named by this step (its target, its effects) are re-read:
	// every change the kernel makes to an agent comes with an effect naming
	// it. A core that changed an agent silently is still caught, at the
	// latest by the full sweep in finish.
	for i := 0; i < len(o.dirty); i++ {
		o.refresh(o.dirty[i])
	}
	o.checkMarkers()
	for _, p := range o.partials {
		if !p.kept {
			o.violate("I10", p.agent, "text %q streamed before %s was not kept as a partial message", textcut.Clip(p.text, 60), p.why)
		}
	}
	o.checkCut()
	o.checkCancel()
	o.checkDeadlines()
	quiet := o.busy == 0 && len(o.inFlight) == 0 && len(o.timers) == 0
	if quiet && !o.quiet {
		o.quietAt = o.now
	}
	o.quiet = quiet
}

// progressOnly reports effects that never accompany a change of an agent's
// state or history.
func progressOnly(e *kernel.Effect) bool {
	switch e.Kind {
	case kernel.EffSetTimer, kernel.EffStopTimer:
		return true
	case kernel.EffEmit:
		switch e.Life.Kind {
		case kernel.LifeDelta, kernel.LifeRetry, kernel.LifeStale, kernel.LifeLate, kernel.LifeOpEnded:
			return true
		}
	}
	return false
}

func (o *oracle) onStartLLM(e *kernel.Effect) {
	a := o.observe(e.Agent)
	if a.frozen {
		o.violate("I1", e.Agent, "LLM request %d after an interrupt of its subtree, before the user submitted again", e.Op)
	}
	a.requestsTurn++
	a.llmRequests++
	a.lastReq = e.Op
	a.liveOps++
	o.startOp(e, false)
	if err := kernel.ValidateTranscript(e.Messages, false); err != nil {
		o.violate("I4", e.Agent, "request %d sends an invalid transcript: %v", e.Op, err)
	}
	for _, m := range e.Messages {
		o.checkUI(e.Agent, m)
	}
}

// startOp records an op the effect starts. An id already used is an I9
// violation: the first op's accounting (did it end?) would be lost.
func (o *oracle) startOp(e *kernel.Effect, tool bool) {
	if o.ops.get(e.Op) != nil {
		o.violate("I9", e.Agent, "op %d started twice", e.Op)
	}
	op := &opObs{agent: e.Agent, tool: tool, start: o.now}
	o.ops.set(e.Op, op)
	o.inFlight[e.Op] = op
}

// onStartTool: a tool may start only as a call its agent's last stream
// delivered whole (I14) — at that stream's end, or later when a slot frees
// (Limits.MaxParallelTools) — once, within the message's first MaxCalls
// calls, and never beside MaxParallelTools others of its agent (I15).
func (o *oracle) onStartTool(e *kernel.Effect) {
	a := o.observe(e.Agent)
	a.liveOps++
	a.liveTools++
	o.startOp(e, true)
	if a.liveTools > o.lim.MaxParallelTools {
		o.violate("I15", e.Agent, "%d tools of one agent run at once (max_parallel_tools %d)", a.liveTools, o.lim.MaxParallelTools)
	}
	req := o.ops.get(a.lastReq)
	if req == nil || req.agent != e.Agent || !req.endedOK {
		o.violate("I14", e.Agent, "tool call %s started outside the end of its own finished stream", e.Call.ID)
		return
	}
	if _, i, ok := o.callIndex(e.Agent, e.Call.ID); ok && i >= o.lim.MaxCalls {
		o.violate("I15", e.Agent, "tool call %s is call %d of its message and started (max_calls %d)", e.Call.ID, i+1, o.lim.MaxCalls)
	}
	for i := range req.frags {
		if f := &req.frags[i]; !f.started && f.name == e.Call.Name && string(f.args) == e.Call.Arguments {
			f.started = true
			return
		}
	}
	o.violate("I14", e.Agent, "tool call %s %s(%s) is not a call its stream delivered (or it started twice)", e.Call.ID, e.Call.Name, e.Call.Arguments)
}

func (o *oracle) onLife(l kernel.Lifecycle) {
	if len(o.emitted) < emittedRing {
		o.emitted = append(o.emitted, lifeHash(l))
	} else {
		o.emitted[o.nEmitted%emittedRing] = lifeHash(l)
	}
	o.nEmitted++
	if l.Agent < 0 {
		return
	}
	a := o.observe(l.Agent)
	switch l.Kind {
	case kernel.LifeTransition:
		if to, declared := o.table[[2]uint8{uint8(l.From), uint8(l.Trigger)}]; !declared {
			o.violate("I7", l.Agent, "transition %s --%s--> %s is not declared", l.From, l.Trigger, l.To)
		} else if to != l.To {
			o.violate("I7", l.Agent, "transition %s --%s--> %s; the table says %s", l.From, l.Trigger, l.To, to)
		}
		for int(l.Agent) >= len(o.trans) {
			o.trans = append(o.trans, nil)
		}
		if len(o.trans[l.Agent]) == 0 {
			o.transUsed = append(o.transUsed, l.Agent)
		}
		o.trans[l.Agent] = append(o.trans[l.Agent], l)
		if l.To == fsm.Interrupted {
			o.entered = append(o.entered, l.Agent)
		}
	case kernel.LifeOpEnded:
		op := o.ops.get(l.Op)
		switch {
		case op == nil:
			o.violate("I9", l.Agent, "op %d ended but was never started", l.Op)
		case op.ended:
			o.violate("I9", l.Agent, "op %d ended twice", l.Op)
		default:
			op.ended = true
			o.agents[op.agent].liveOps--
			if op.tool {
				o.agents[op.agent].liveTools--
			}
			delete(o.inFlight, l.Op)
			if l.End == kernel.OpAbandoned {
				o.probes.hit(ProbeAbandoned)
			}
		}
	case kernel.LifeTimedOut:
		o.checkTimeout(l, a)
	case kernel.LifeInterrupted:
		if a.interrupted && a.interruptedTurn == l.Turn {
			o.violate("I11", l.Agent, "turn %d interrupted twice", l.Turn)
		}
		a.interrupted, a.interruptedTurn, a.abortReason = true, l.Turn, l.Reason
	case kernel.LifeTurnStarted:
		if l.Turn <= a.startedTurn {
			o.violate("I13", l.Agent, "turn %d started again", l.Turn)
		}
		a.startedTurn = l.Turn
		a.turnStart = o.now
		a.userCancelled, a.parentAborted, a.timedOut, a.llmFailed, a.requestsTurn = false, false, kernel.ReasonNone, false, 0
		a.interrupted, a.abortReason, a.spawnedTurn = false, kernel.ReasonNone, 0
	case kernel.LifeTurnEnded:
		o.checkTurnEnd(l, a)
		o.endedNow = append(o.endedNow, l)
	case kernel.LifeCallFinished:
		k := callKey{l.Agent, l.CallID}
		f := o.callFin[k]
		if f == nil {
			f = &callFinObs{l: l}
			o.callFin[k] = f
		}
		f.n++
		if f.n > 1 {
			o.violate("I13", l.Agent, "call %s has %d terminal results", l.CallID, f.n)
			break
		}
		o.checkCallResult(l, a, f)
		if l.Reason == kernel.ReasonToolTimeout {
			o.probes.hit(ProbeToolTimeout)
		}
	case kernel.LifeDelegated:
		if a.delegated == nil {
			a.delegated = make(map[string]kernel.AgentID)
		}
		a.delegated[l.CallID] = l.Child
		a.spawnedTurn++
		o.touch(l.Child)
		c := o.observe(l.Child)
		if a.frozen || a.state == fsm.Interrupted {
			c.frozen = true
			o.violate("I1", l.Child, "child spawned under an interrupted parent")
		}
		if depthOf(c.path) >= 4 {
			o.probes.hit(ProbeDepth4Delegation)
		}
	}
}

func (o *oracle) checkTimeout(l kernel.Lifecycle, a *agentObs) {
	op := o.ops.get(l.Op)
	switch l.Reason {
	case kernel.ReasonFirstTokenTimeout:
		if op == nil || op.tool || op.gotChunk || o.now-op.start < o.lim.FirstTokenTimeout {
			o.violate("I5", l.Agent, "first-token timeout not justified: the request %s", o.opStory(op))
			return
		}
	case kernel.ReasonStallTimeout:
		if op == nil || op.tool || !op.gotChunk || o.now-op.lastChunkAt < o.lim.StallTimeout {
			o.violate("I5", l.Agent, "stall timeout not justified: the request %s", o.opStory(op))
			return
		}
	case kernel.ReasonToolTimeout:
		if op == nil || !op.tool || op.terminal || o.now-op.start < o.lim.ToolTimeout {
			o.violate("I5", l.Agent, "tool timeout not justified: the tool %s", o.opStory(op))
		}
		if op != nil {
			op.timedOut = true
		}
		o.probeRace(l.Agent, true)
		return
	case kernel.ReasonTurnTimeout:
		if o.now-a.turnStart < o.lim.TurnTimeout {
			o.violate("I5", l.Agent, "turn timeout after %v of a %v turn", o.now-a.turnStart, o.lim.TurnTimeout)
			return
		}
	default:
		o.violate("I13", l.Agent, "timeout with non-timeout reason %q", l.Reason)
		return
	}
	a.timedOut = l.Reason
	o.probes.hit(ProbeTimeout)
	o.probeRace(l.Agent, true)
}

func (o *oracle) opStory(op *opObs) string {
	if op == nil {
		return "is unknown"
	}
	switch {
	case op.tool:
		return fmt.Sprintf("started %v ago, result delivered=%v", o.now-op.start, op.terminal)
	case !op.gotChunk:
		return fmt.Sprintf("started %v ago, no chunk yet", o.now-op.start)
	}
	return fmt.Sprintf("started %v ago, last chunk %v ago", o.now-op.start, o.now-op.lastChunkAt)
}

func (o *oracle) checkTurnEnd(l kernel.Lifecycle, a *agentObs) {
	if a.endedTurn == l.Turn && l.Turn != 0 {
		o.violate("I13", l.Agent, "turn %d has a second terminal outcome (%s)", l.Turn, l.Outcome)
		return
	}
	a.endedTurn = l.Turn
	a.endOutcome, a.endReason = l.Outcome, l.Reason
	if f := a.owed; f != nil {
		// The parent's call was closed when the abort cut it; the child
		// settled only now. What the parent's model was told must be how
		// the child's turn really ended (F13).
		a.owed = nil
		o.checkChildResult(f, a)
	}
	if kernel.OutcomeOf(l.Reason) != l.Outcome {
		o.violate("I13", l.Agent, "outcome %s with reason %q", l.Outcome, l.Reason)
	}
	ok := true
	switch l.Reason {
	case kernel.ReasonNone:
		op := o.ops.get(a.lastReq)
		ok = op != nil && op.endedOK
	case kernel.ReasonUserCancel:
		ok = a.userCancelled
	case kernel.ReasonParentCancelled:
		ok = a.parentAborted
	case kernel.ReasonFirstTokenTimeout, kernel.ReasonStallTimeout, kernel.ReasonTurnTimeout:
		ok = a.timedOut == l.Reason
	case kernel.ReasonShutdown:
		ok = o.shutdown
	case kernel.ReasonLLMError:
		ok = a.llmFailed
	case kernel.ReasonBudget:
		ok = a.requestsTurn >= o.lim.MaxRequests
		o.probes.hit(ProbeBudget)
	case kernel.ReasonOutputLimit:
		op := o.ops.get(a.lastReq)
		ok = op != nil && op.overCapped
	default:
		ok = false
	}
	if !ok {
		o.violate("I13", l.Agent, "turn %d ended %s with reason %q, which nothing in the run justifies", l.Turn, l.Outcome, l.Reason)
	}
}

// transOf is id's transitions in this step.
func (o *oracle) transOf(id kernel.AgentID) []kernel.Lifecycle {
	if id < 0 || int(id) >= len(o.trans) {
		return nil
	}
	return o.trans[id]
}

// refresh compares an agent's view with what the oracle knew.
func (o *oracle) refresh(id kernel.AgentID) {
	a := o.observe(id)
	v := o.c.View(id)
	chain := o.transOf(id)
	if v.State != a.state {
		switch {
		case len(chain) == 0:
			o.violate("I7", id, "state changed %s → %s with no declared transition", a.state, v.State)
		case chain[0].From != a.state || chain[len(chain)-1].To != v.State:
			o.violate("I7", id, "transitions %s…%s do not explain %s → %s", chain[0].From, chain[len(chain)-1].To, a.state, v.State)
		}
		if o.stale {
			o.violate("I8", id, "stale event (%s) moved the agent %s → %s", o.staleWhy, a.state, v.State)
		}
	}
	if (a.state == fsm.Idle) != (v.State == fsm.Idle) {
		if v.State == fsm.Idle {
			o.busy--
		} else {
			o.busy++
		}
	}
	a.state, a.turn = v.State, v.Turn
	h := v.History
	switch {
	case len(h) < a.histLen:
		o.violate("I4", id, "history shrank from %d to %d messages", a.histLen, len(h))
		a.histLen = len(h)
	case a.histLen > 0 && !sameMessage(h[a.histLen-1], a.last):
		o.violate("I4", id, "message %d was rewritten", a.histLen-1)
	}
	if len(h) > a.histLen && o.stale {
		o.violate("I8", id, "stale event (%s) appended %d message(s)", o.staleWhy, len(h)-a.histLen)
	}
	for i := a.histLen; i < len(h); i++ {
		o.checkMessage(id, a, i, h)
	}
	a.histLen = len(h)
	if len(h) > 0 {
		a.last = h[len(h)-1]
	}
	if a.openCount > 0 && v.State != fsm.Tooling && v.State != fsm.Delegating {
		o.violate("I4", id, "%d tool call(s) without a result while %s", a.openCount, v.State)
		clear(a.open)
		a.openCount = 0
	}
}

func sameMessage(x, y kernel.Message) bool {
	return x.Role == y.Role && x.Content == y.Content && x.ToolCallID == y.ToolCallID &&
		len(x.ToolCalls) == len(y.ToolCalls) && x.Partial == y.Partial && x.Marker == y.Marker
}

// checkMessage validates one appended message incrementally (I4), and checks
// I10, I11 and I12 on it.
func (o *oracle) checkMessage(id kernel.AgentID, a *agentObs, i int, h []kernel.Message) {
	m := h[i]
	o.checkUI(id, m)
	if a.openCount > 0 && m.Role != kernel.RoleTool {
		o.violate("I4", id, "message %d (%s) arrives while %d tool call(s) lack results", i, m.Role, a.openCount)
		clear(a.open)
		a.openCount = 0
	}
	if m.Role != kernel.RoleTool && len(a.open) > 0 && a.openCount == 0 {
		clear(a.open)
	}
	switch m.Role {
	case kernel.RoleSystem:
		if i != 0 {
			o.violate("I4", id, "system message at %d", i)
		}
	case kernel.RoleUser:
		if m.Content == "" {
			o.violate("I4", id, "empty user message at %d", i)
		}
		if m.Marker {
			if a.markerTurn == a.turn {
				a.markers++
				if a.markers > 1 {
					o.violate("I11", id, "turn %d has %d markers", a.turn, a.markers)
				}
			} else {
				a.markerTurn, a.markers = a.turn, 1
			}
		}
		if id == kernel.Root && !m.Marker {
			o.checkInterjection(i, h)
		}
	case kernel.RoleAssistant:
		if m.Content == "" && len(m.ToolCalls) == 0 {
			o.violate("I4", id, "empty assistant message at %d", i)
		}
		if m.Partial {
			for j := range o.partials {
				if p := &o.partials[j]; !p.kept && p.agent == id && p.text == m.Content {
					p.kept = true
					break
				}
			}
		}
		for _, c := range m.ToolCalls {
			if _, dup := a.ids[c.ID]; dup || c.ID == "" {
				o.violate("I4", id, "tool call id %q reused or empty at %d", c.ID, i)
			}
			a.ids[c.ID] = struct{}{}
			a.open[c.ID] = false
			a.openCount++
			a.calls = append(a.calls, c.ID)
		}
	case kernel.RoleTool:
		answered, ok := a.open[m.ToolCallID]
		switch {
		case !ok:
			o.violate("I4", id, "tool message %d answers %q, which is not an open call", i, m.ToolCallID)
		case answered:
			o.violate("I4", id, "call %s answered twice", m.ToolCallID)
		default:
			a.open[m.ToolCallID] = true
			a.openCount--
			o.checkToolContent(id, m)
		}
	default:
		o.violate("I4", id, "unknown role %q at %d", m.Role, i)
	}
}

func (o *oracle) checkUI(id kernel.AgentID, m kernel.Message) {
	for _, s := range kernel.UIStrings() {
		if strings.Contains(m.Content, s) {
			o.violate("I12", id, "UI text %q in a %s message", s, m.Role)
		}
	}
}

// checkInterjection: each user text appears in the root's history as often
// as it was submitted or interjected (I10), an interjection right after the
// partial text it cut.
func (o *oracle) checkInterjection(i int, h []kernel.Message) {
	text := h[i].Content
	o.rootTexts[text]++
	if n, want := o.rootTexts[text], o.userTexts[text]; n > want {
		// Covers want 0: a text nobody typed.
		o.violate("I10", kernel.Root, "user text %q appears %d times, given %d", text, n, want)
	}
	for j := range o.interjs {
		ij := &o.interjs[j]
		if ij.seen || ij.text != text {
			continue
		}
		ij.seen = true
		if ij.partial != "" {
			prev := h[i-1]
			if prev.Role != kernel.RoleAssistant || prev.Content != ij.partial || !prev.Partial {
				o.violate("I10", kernel.Root, "interjection %q does not follow the partial text %q it cut", text, ij.partial)
			}
		}
		break
	}
}

// checkMarkers: a turn that ended aborted (interrupted, timed out, failed,
// budget) left exactly one marker in its history, the transcript's record of
// its typed terminal outcome (F6, I13).
func (o *oracle) checkMarkers() {
	for _, l := range o.endedNow {
		if l.Outcome == kernel.OutcomeCompleted {
			continue
		}
		a := o.agents[l.Agent]
		if a.markerTurn != l.Turn || a.markers != 1 {
			n := 0
			if a.markerTurn == l.Turn {
				n = a.markers
			}
			o.violate("I13", l.Agent, "turn %d ended %s but left %d marker(s) in its history, want 1", l.Turn, l.Outcome, n)
		}
	}
}

// checkLog replays the lifecycle log from the oldest sequence it holds, as a
// subscriber that joined late would, and compares it with what was emitted:
// the accounting of I9 must hold for that subscriber too (F10).
func (o *oracle) checkLog() {
	if o.nEmitted == 0 {
		return
	}
	start := o.c.LogOldest()
	next := start
	// Hashes older than the ring are gone (a core keeping a longer log than
	// a simulated kernel): those events are checked for order only.
	hashedFrom := uint64(1)
	if o.nEmitted > emittedRing {
		hashedFrom = o.nEmitted - emittedRing + 1
	}
	var bad string
	err := o.c.LogRange(start, func(l kernel.Lifecycle) bool {
		switch {
		case l.Seq != next:
			bad = fmt.Sprintf("a subscriber from seq %d gets seq %d where seq %d was emitted", start, l.Seq, next)
		case l.Seq > o.nEmitted:
			bad = fmt.Sprintf("replay holds seq %d, never emitted", l.Seq)
		case l.Seq >= hashedFrom && lifeHash(l) != o.emitted[(l.Seq-1)%emittedRing]:
			bad = fmt.Sprintf("replayed seq %d (%s) differs from what was emitted", l.Seq, l.Describe())
		}
		next++
		return bad == ""
	})
	switch {
	case err != nil:
		o.violate("I9", kernel.NoAgent, "lifecycle log: replay from seq %d: %v", start, err)
	case bad != "":
		o.violate("I9", kernel.NoAgent, "lifecycle log: %s", bad)
	case next <= o.nEmitted:
		o.violate("I9", kernel.NoAgent, "lifecycle log: a subscriber from seq %d misses seq %d..%d", start, next, o.nEmitted)
	}
}

// checkCancel: an acting cancel reaches every active descendant and every
// in-flight op gets its cancel in the same step (I2); a repeated one changes
// nothing (I11).
func (o *oracle) checkCancel() {
	ce := o.cancelEv
	if ce == nil {
		return
	}
	t := o.agents[ce.target]
	if !ce.shouldAct {
		if ce.beforeInt && len(o.transOf(ce.target)) > 0 && !ce.wasShutdwn {
			o.violate("I11", ce.target, "a repeated cancel changed the agent's state")
		}
		return
	}
	if !slices.Contains(o.entered, ce.target) {
		o.violate("I2", ce.target, "cancel did not interrupt its target (still %s)", t.state)
		return
	}
	for _, id := range ce.activeSub {
		if s := o.agents[id].state; s != fsm.Interrupted && s != fsm.Idle {
			o.violate("I2", id, "cancel of %s did not reach this descendant (still %s)", t.path, s)
		}
	}
}

// checkDeadlines starts the I3 deadline of every agent that entered
// Interrupted in this step, and freezes its subtree (I1).
func (o *oracle) checkDeadlines() {
	for _, id := range o.entered {
		if p := o.agents[id].parent; p != kernel.NoAgent && slices.Contains(o.entered, p) {
			continue // aborted with its parent: the parent's subtree covers it
		}
		d := quiesceDeadline{by: o.now + o.lim.Grace}
		for cid := range o.agents {
			c := o.agents[cid]
			if c == nil || !o.descends(kernel.AgentID(cid), id) {
				continue
			}
			c.frozen = true
			if kernel.AgentID(cid) != id && c.endedTurn < c.startedTurn {
				c.parentAborted = true
			}
			if s := o.c.AgentState(kernel.AgentID(cid)); s != fsm.Idle {
				d.agents = append(d.agents, agentTurn{kernel.AgentID(cid), c.turn})
			}
		}
		for _, opID := range sortedKeys(o.inFlight) {
			op := o.inFlight[opID]
			if !o.descends(op.agent, id) {
				continue
			}
			d.ops = append(d.ops, opID)
			// Whatever aborted the subtree (a cancel, a timeout, a
			// shutdown), every op still in flight in it got its cancel in
			// this same step (I2).
			if op.cancels == 0 {
				o.violate("I2", op.agent, "op %d in flight under the aborted %s got no cancel", opID, o.agents[id].path)
			}
		}
		o.deadlines = append(o.deadlines, d)
	}
}

// activity notes a user input or fault at t: the liveness bound runs from
// the last one.
func (o *oracle) activity(t time.Duration) {
	if t > o.lastActivity {
		o.lastActivity = t
		o.liveChecked = false
	}
}

// livenessBound is how long after the last input or fault the tree may
// still be busy: the pending abort's grace, a whole new turn (an input
// queued while the tree settled starts one), its grace, and a debounce
// window. Everything that waits has a deadline, so this is finite.
func (o *oracle) livenessBound() time.Duration {
	return o.lastActivity + 2*o.lim.Grace + o.lim.TurnTimeout + o.lim.Debounce
}

// checkLiveness (Part 5 of the property suites): once time passes the bound
// with nothing more from the user or the world's faults, every agent must be
// Idle with nothing in flight; otherwise it names the stuck agents.
func (o *oracle) checkLiveness() {
	if o.liveChecked || o.now <= o.livenessBound() || o.quiet {
		return
	}
	o.liveChecked = true
	var stuck []string
	for id, a := range o.agents {
		if a == nil {
			continue
		}
		if s := o.c.AgentState(kernel.AgentID(id)); s != fsm.Idle || a.liveOps > 0 {
			stuck = append(stuck, fmt.Sprintf("%s=%s(%d ops)", a.path, s, a.liveOps))
		}
	}
	if len(stuck) == 0 && len(o.timers) > 0 {
		stuck = append(stuck, fmt.Sprintf("%d timer(s) still set", len(o.timers)))
	}
	if len(stuck) > 0 {
		o.violate("liveness", kernel.NoAgent, "not idle %v after the last input or fault (bound %v): %s", o.now-o.lastActivity, o.livenessBound()-o.lastActivity, strings.Join(stuck, ", "))
	}
}

// expireDeadlines runs when time has moved past an interrupt's deadline and
// before anything else happens: the interrupted turn must be over (I3).
func (o *oracle) expireDeadlines() {
	kept := o.deadlines[:0]
	for _, d := range o.deadlines {
		if o.now > d.by {
			o.checkQuiet(d)
			continue
		}
		kept = append(kept, d)
	}
	o.deadlines = kept
}

// checkQuiet verifies one I3 obligation.
func (o *oracle) checkQuiet(d quiesceDeadline) {
	for _, at := range d.agents {
		a := o.agents[at.id]
		if s := o.c.AgentState(at.id); s != fsm.Idle && a.turn == at.turn {
			o.violate("I3", at.id, "turn %d still %s at interrupt time + grace (%v)", at.turn, s, d.by)
			return
		}
	}
	for _, id := range d.ops {
		if op := o.ops.get(id); !op.ended {
			o.violate("I3", op.agent, "op %d, in flight at the interrupt, still not ended at interrupt time + grace (%v)", id, d.by)
			return
		}
	}
}

// checkRootTurn runs before a step's effects are judged: a new root turn
// (Idle → Streaming) lifts the freeze of an interrupt only if a user input
// caused it — this one, or one queued while the tree settled (I1).
func (o *oracle) checkRootTurn(ev *kernel.Event, effs []kernel.Effect) {
	root := o.agents[kernel.Root]
	if !root.frozen {
		return
	}
	for i := range effs {
		l := &effs[i].Life
		if effs[i].Kind != kernel.EffEmit || l.Kind != kernel.LifeTransition || l.Agent != kernel.Root || l.From != fsm.Idle || l.To != fsm.Streaming {
			continue
		}
		if o.userInput || o.pendingUser > 0 {
			root.frozen = false
			o.pendingUser = 0
			return
		}
		o.violate("I1", kernel.Root, "a new turn started after an interrupt without user input (%s)", ev.Kind)
		return
	}
}

// finish runs the end-of-run checks.
func (o *oracle) finish() {
	// Every agent the core holds, seen by the oracle before or not: one
	// whose effects a broken loop never emitted is judged here.
	for id := 0; id < o.c.NumAgents(); id++ {
		o.touch(kernel.AgentID(id))
	}
	for i := 0; i < len(o.dirty); i++ {
		o.refresh(o.dirty[i])
	}
	for _, d := range o.deadlines {
		o.checkQuiet(d)
	}
	for id, a := range o.agents {
		if a == nil {
			continue
		}
		if s := o.c.AgentState(kernel.AgentID(id)); s != fsm.Idle {
			o.violate("liveness", kernel.AgentID(id), "run ended with the agent %s", s)
		}
		if a.startedTurn != a.endedTurn {
			o.violate("I13", kernel.AgentID(id), "turn %d has no terminal outcome", a.startedTurn)
		}
		for _, c := range a.calls {
			n := 0
			if f := o.callFin[callKey{kernel.AgentID(id), c}]; f != nil {
				n = f.n
			}
			if n != 1 {
				o.violate("I13", kernel.AgentID(id), "call %s has %d terminal results", c, n)
			}
		}
	}
	o.checkLog()
	for _, id := range o.ops.ids() {
		if op := o.ops.get(id); !op.ended {
			o.violate("I9", op.agent, "op %d started at %v never ended", id, op.start)
		}
	}
	for _, id := range sortedKeys(o.timers) {
		o.violate("I9", kernel.NoAgent, "timer %d survives quiescence", id)
	}
	if !o.shutdown {
		for _, text := range sortedKeys(o.userTexts) {
			if n, want := o.rootTexts[text], o.userTexts[text]; n != want {
				o.violate("I10", kernel.Root, "user text %q appears %d times, given %d", text, n, want)
			}
		}
	}
}
