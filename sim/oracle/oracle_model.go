package oracle

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// model is the oracle's shadow of one run: what it observed of the agents
// (their states, turns and histories), the ops (requests and tools, and the
// text and calls each stream delivered), the timers and the calls' results.
// It is updated once per step — begin with the event, apply with the effects
// and the views of the agents the step named — and judges nothing: what it
// meets that cannot be right (a message answering no open call, an op ended
// twice) it records in the step for the checkers to judge
// (docs/semantics.md, "The oracle"). It reads only what the Core shows —
// events, effects, lifecycle events, views — never kernel internals.
type model struct {
	lim          kernel.Limits
	delegateTool string
	maxAgents    int
	idempotent   []string
	c            Tree
	now          time.Duration
	agents       []*agentObs
	ops          opTable
	// live are the ops started and not yet ended, in start order.
	live   []*opObs
	timers map[kernel.OpID]timerObs
	calls  map[callKey]*callObs
	// shutdown is set once a shutdown was delivered; stopped when a run
	// limit stopped the run with work pending.
	shutdown bool
	stopped  bool
	// busy counts agents not Idle; with live ops and timers it tells when
	// the tree is quiescent, and quietAt when it last became so.
	busy    int
	quiet   bool
	quietAt time.Duration
	// emitted keeps a hash of each of the last emittedRing lifecycle events
	// (slot (seq-1) % emittedRing; it grows to the ring's size, so a short
	// run allocates little), to compare with the replayed log at the end;
	// nEmitted counts them all.
	emitted  []uint64
	nEmitted uint64
	s        stepObs
	mark     []uint32
	// spent says which turns ran out of max_requests with a request a
	// recovery asked again among them (crashSpent).
	spent []SpentTurn
	// finishing are the children that finished in this step (their turn
	// ended and their ops too): the core frees them at the start of the
	// next, when the model marks them freed.
	finishing []kernel.AgentID
	// waiting are the agents whose next request waits for a slot, in the
	// order their request_waiting records came.
	waiting []kernel.AgentID
	// profiles are the configured profiles (check_profiles.go); rootSystem
	// and childSystem the system prompts of the root and of a child in a
	// tree without profiles; spawning the children spawned in this step,
	// whose profiles are read once their parents' histories are.
	profiles                []kernel.Profile
	rootSystem, childSystem string
	spawning                []kernel.AgentID
}

// agentObs is what the model knows of one agent.
type agentObs struct {
	id     kernel.AgentID
	parent kernel.AgentID
	path   string
	name   string
	depth  int
	// state and turn as of the last read of its view: while a step's effects
	// are applied, the state before the step.
	state fsm.State
	turn  uint64
	// its history as read so far
	histLen int
	last    kernel.Message
	// lastRead is the last message read (the one above the next)
	lastRead kernel.Message
	// open maps the calls of its last assistant message to whether they
	// have a tool message yet; openCount counts those without.
	open      map[string]bool
	openCount int
	ids       map[string]struct{}
	calls     []string          // every call id of its assistant messages
	lastCalls []kernel.ToolCall // the calls of its last assistant message
	// started are the call ids that got a tool op since its last request.
	started []string
	// markers counts the markers read in turn markerTurn; marker is the
	// last one read.
	markerTurn uint64
	markers    int
	marker     markerObs
	// turns
	startedTurn, endedTurn uint64
	t                      turnFacts
	end                    turnEnd
	// owed are delegation results told to the parent before this agent's
	// turn ended (an abort closed the parent's call): judged at its end.
	owed      []*callObs
	delegated map[string]kernel.AgentID
	// kid is this agent's place among the children its parent spawned in
	// that turn (1 for the first); via is the parent's call it was spawned
	// for.
	kid int
	via callKey
	// kids are the children it spawned, in order; deadline its running
	// turn's deadline (0 once the turn ended); view the last view read.
	kids     []kernel.AgentID
	deadline time.Duration
	// endedDeadline is the deadline of the turn that ended last and
	// endedStep the step it ended in: a turn timeout whose turn settles in
	// that same step is judged by it (and no later one is).
	endedDeadline time.Duration
	endedStep     uint32
	view          View
	// llmRequests counts the requests it started, restarts those of them
	// a recovery started in place of a lost one (asked).
	llmRequests int
	restarts    int
	liveOps     int
	liveTools   int
	// finishing: the agent finished in this step; freed: it finished
	// before this step, so the core no longer holds it (view is then its
	// last view read while held, and viewFreed what the core's view said
	// at the last read since).
	finishing, freed, viewFreed bool
	// waitingReq: its next request waits for a slot (m.waiting holds it).
	waitingReq bool
	// profile is its profile's index in model.profiles (-1: none) as its
	// delegation named it, profileName that name; depthCap is the deepest
	// its descendants may sit (docs/semantics.md, "Profiles").
	profile     int
	profileName string
	depthCap    int
}

// asked is how many requests the agent's model was asked, a request a
// recovery restarted counted once (docs/semantics.md,
// "Expectations under a crash").
func (a *agentObs) asked() int { return a.llmRequests - a.restarts }

// turnFacts are what happened in one turn of an agent, as far as the
// outcome of the turn and the results of its calls are judged by them.
type turnFacts struct {
	turn     uint64
	start    time.Duration
	requests int
	// restarts: requests a recovery asked again (counted in requests, as
	// max_requests counts them).
	restarts int
	lastReq  kernel.OpID
	spawned  int
	// userCancelled: an acting cancel named this agent; parentAborted: an
	// ancestor was aborted while this turn ran; llmFailed: a request failed
	// on its own; timedOut: the deadline that fired for the agent's turn.
	userCancelled bool
	parentAborted bool
	llmFailed     bool
	timedOut      kernel.Reason
	// interrupted: the turn entered Interrupted, with abortReason.
	interrupted bool
	abortReason kernel.Reason
	// cut is the streamed text the turn's abort or failure cut off.
	cut string
	// failDetail is the detail a stream failure gives the turn
	// (docs/semantics.md, "Results"): the failure's kind, then the
	// adapter's message clipped to maxFailDetail bytes.
	failDetail string
}

// maxFailDetail bounds the adapter's message a failed turn's detail keeps
// (docs/semantics.md, "Results").
const maxFailDetail = 1 << 10

// turnEnd is how an agent's last turn ended.
type turnEnd struct {
	turn    uint64
	outcome kernel.Outcome
	reason  kernel.Reason
	text    string
	detail  string
}

// markerObs is a marker message as read: its turn and attributes.
type markerObs struct {
	ok bool // it has the documented form
	// above: the message right above it is assistant text cut off
	above   bool
	outcome string
	reason  string
	partial string
}

// opObs is what the model knows of one op.
type opObs struct {
	id    kernel.OpID
	agent kernel.AgentID
	tool  bool
	call  string // a tool's call id
	start time.Duration
	// a request's stream
	lastChunk   uint32
	gotChunk    bool
	lastChunkAt time.Duration
	text        []byte
	frags       []fragObs
	// msgBytes is what the stream delivered, counted as max_message_bytes
	// counts it; overCapped is set once a chunk would have taken it past.
	msgBytes   int
	overCapped bool
	// its own answer
	terminal bool              // its end, failure or result was delivered
	endedOK  bool              // a stream end nobody asked for
	result   kernel.ToolStatus // a tool's delivered result
	timedOut bool              // a tool_timeout fired for it
	// cancels counts the cancels it got; the first at cancelAt, in step
	// cancelStep
	cancels    int
	cancelAt   time.Duration
	cancelStep uint32
	// cut is set once the text it streamed was cut (kept as partial)
	cut   bool
	ended bool
	end   kernel.OpEnd
}

// fragObs is one call a stream delivered, as the model assembled it.
type fragObs struct {
	index   int // the call's index in the stream
	id      string
	name    string
	args    []byte
	started bool // a tool op started for it
}

// timerObs is a timer set and not yet fired or stopped.
type timerObs struct {
	kind  kernel.TimerKind
	agent kernel.AgentID
	at    time.Duration
}

type callKey struct {
	agent kernel.AgentID
	id    string
}

// callObs is what the model knows of one call's result.
type callObs struct {
	n int              // call_finished events seen
	l kernel.Lifecycle // the first of them
	// early: a delegation's call closed before its child's turn ended (an
	// abort wrote the result)
	early bool
	// content is the structured tool message, once read
	content resultContent
	read    bool
	parsed  bool // content parsed as JSON
}

// resultContent is the structured content the kernel writes for a
// delegation (agent_result) or an aborted or refused call (tool_aborted,
// tool_error).
type resultContent struct {
	Type    string `json:"type"`
	Agent   string `json:"agent"`
	Outcome string `json:"outcome"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Summary string `json:"summary"`
	Partial string `json:"partial"`
	Error   string `json:"error"`
	Limit   int    `json:"limit"`
}

func newModel(c Tree, cfg kernel.Config) *model {
	m := &model{
		lim: cfg.Limits, c: c,
		delegateTool: cmp.Or(cfg.DelegateTool, kernel.DefaultDelegateTool),
		maxAgents:    cfg.MaxAgents,
		idempotent:   cfg.Idempotent,
		timers:       make(map[kernel.OpID]timerObs),
		calls:        make(map[callKey]*callObs),
		quiet:        true, // a new tree runs nothing
		profiles:     ownProfiles(cfg.Profiles),
		rootSystem:   cfg.System,
		childSystem:  cfg.ChildSystem,
	}
	root := m.observe(kernel.Root)
	root.profile, root.profileName, root.depthCap = profileOf(cfg.Profiles, cfg.RootProfile), cfg.RootProfile, cfg.MaxDepth
	if p := m.profileOf(root); p != nil {
		if p.MaxDepth > 0 {
			root.depthCap = min(root.depthCap, p.MaxDepth)
		}
		if m.rootSystem == "" {
			m.rootSystem = p.System
		}
	}
	return m
}

// observe makes sure the model tracks agent id (new children appear as the
// kernel spawns them).
func (m *model) observe(id kernel.AgentID) *agentObs {
	for int(id) >= len(m.agents) {
		m.agents = append(m.agents, nil)
		m.mark = append(m.mark, 0)
	}
	if a := m.agents[id]; a != nil {
		return a
	}
	v := m.c.View(id)
	// State and turn start at Idle and 0: the first read of the view
	// records how the agent got where it is.
	a := &agentObs{id: id, parent: v.Parent, path: v.Path, name: v.Name, depth: depthOf(v.Path),
		open: map[string]bool{}, ids: map[string]struct{}{}, profile: -1}
	m.agents[id] = a
	return a
}

// noteFinished records a child that has finished: its turn ended and every
// op it ran ended. The core frees it at the start of the next step
// (docs/semantics.md, "Finished agents"); the root is never freed.
func (m *model) noteFinished(a *agentObs) {
	if a.id == kernel.Root || a.finishing || a.state != fsm.Idle || a.startedTurn == 0 || a.endedTurn != a.startedTurn || a.liveOps > 0 {
		return
	}
	a.finishing = true
	m.finishing = append(m.finishing, a.id)
}

// freeFinished marks freed the children that finished in the last step.
func (m *model) freeFinished() {
	for _, id := range m.finishing {
		m.agents[id].freed = true
	}
	m.finishing = m.finishing[:0]
}

// liveRequests is how many requests the tree streams: started and not
// ended (a cancelled one until it ends).
func (m *model) liveRequests() int {
	n := 0
	for _, op := range m.live {
		if !op.tool {
			n++
		}
	}
	return n
}

// unwait takes a's request out of the waiting queue (it was sent, or its
// turn was aborted).
func (m *model) unwait(a *agentObs) {
	if !a.waitingReq {
		return
	}
	a.waitingReq = false
	if i := slices.Index(m.waiting, a.id); i >= 0 {
		m.waiting = slices.Delete(m.waiting, i, i+1)
	}
}

// held is how many agents the core holds: every agent the model has seen
// spawned (and the root) that is not freed.
func (m *model) held() int {
	n := 0
	for _, a := range m.agents {
		if a != nil && !a.freed {
			n++
		}
	}
	return n
}

// agent is the agent id names, or nil.
func (m *model) agent(id kernel.AgentID) *agentObs {
	if id < 0 || int(id) >= len(m.agents) {
		return nil
	}
	return m.agents[id]
}

// descends reports whether id is target or below it.
func (m *model) descends(id, target kernel.AgentID) bool {
	for a := m.agent(id); a != nil; a = m.agent(a.parent) {
		if a.id == target {
			return true
		}
	}
	return false
}

// touch marks an agent for a read of its view at the end of the step.
func (m *model) touch(id kernel.AgentID) {
	if id < 0 {
		return
	}
	m.observe(id)
	if m.mark[id] != m.s.n {
		m.mark[id] = m.s.n
		m.s.dirty = append(m.s.dirty, id)
	}
}

func isActive(s fsm.State) bool {
	return s == fsm.Streaming || s == fsm.Tooling || s == fsm.Delegating
}

// liveRequest is a's request whose stream still runs: started, not
// answered, not cancelled; nil when none.
func (m *model) liveRequest(a *agentObs) *opObs {
	op := m.ops.get(a.t.lastReq)
	if op == nil || op.tool || op.terminal || op.cancels > 0 || op.ended {
		return nil
	}
	return op
}

// findFrag is the call streamed at index, or nil.
func (op *opObs) findFrag(index int) *fragObs {
	for i := len(op.frags) - 1; i >= 0; i-- {
		if op.frags[i].index == index {
			return &op.frags[i]
		}
	}
	return nil
}

// frag is the call streamed at index, added on its first fragment.
func (op *opObs) frag(index int) *fragObs {
	if f := op.findFrag(index); f != nil {
		return f
	}
	op.frags = append(op.frags, fragObs{index: index})
	return &op.frags[len(op.frags)-1]
}

func depthOf(path string) int { return strings.Count(path, "/") }

// callOverhead is what each new call of a stream counts beside its id,
// name and arguments against max_message_bytes (docs/semantics.md,
// "Budgets and caps").
const callOverhead = 16
