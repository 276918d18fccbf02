package kernel

import (
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/textcut"
)

// agent is one node of the tree. Parent and children are explicit links: there
// is no registry to look agents up in (F4).
type agent struct {
	id       AgentID
	parent   AgentID
	children []AgentID // every child ever spawned, in spawn order
	depth    int
	name     string // instance name, unique in the tree
	script   string // the name the parent asked for
	path     string // main/task1/explore
	// profile is the agent's index in Config.Profiles (noProfile: none),
	// profileName its name; depthCap is the deepest its descendants may
	// sit: max_depth, tightened by the profiles on its path (profile.go).
	profile     int
	profileName string
	depthCap    int
	state       fsm.State
	history     []Message
	// usedIDs holds every tool call id in history, so ids stay unique (F11)
	// even when a model reuses "call_0" in every message.
	usedIDs map[string]struct{}

	// Last ended turn.
	turn    uint64
	outcome Outcome
	reason  Reason
	summary string

	// Current turn.
	turnStart  time.Duration
	deadline   time.Duration
	turnTimer  OpID
	requests   int
	delegated  int
	turnKids   []AgentID // children spawned in this turn (the only ones that can be live)
	abort      Reason    // why the turn is being aborted (Interrupted)
	cut        string    // text the abort cut off (set by abortOne), for the parent's result
	failDetail string

	// Current LLM request (req == 0: none running). waitingReq: the next
	// one waits for a slot (requests.go).
	waitingReq  bool
	req         OpID
	reqStart    time.Duration
	gotChunk    bool
	lastChunkAt time.Duration
	lastChunkNo uint32
	watchAt     time.Duration // deadline the request's watchdog is armed for
	text        []byte
	// drafts holds the calls being streamed in the order their first
	// fragment arrived; draftAt finds a call's draft by its stream index
	// (indices come from the model: sparse, possibly huge).
	drafts  []callDraft
	draftAt map[int]int
	// msgBytes is what the streamed message holds so far, as counted
	// against Limits.MaxMessageBytes (messageCost).
	msgBytes int

	// Calls of the last assistant message, and how many still lack a result.
	open    []openCall
	pending int
	// runningTools counts this agent's tool ops not yet ended (cancelling
	// ones included: their processes still run); at most
	// Limits.MaxParallelTools. nextWaiting is the first open call that may
	// still be waiting for a slot.
	runningTools int
	nextWaiting  int

	// queued: interjections waiting for the next request (Tooling/Delegating).
	queued []string
	// nextTurn: inputs that arrived while Interrupted; they start the next turn
	// once the tree has settled.
	nextTurn     []input
	restartTimer OpID

	// inflight counts this agent's requests and tool ops not yet ended
	// (including cancelling ones); liveChildren counts children whose turn has
	// not ended. An Interrupted agent settles when both are zero.
	inflight     int
	liveChildren int
	// parentCall is this agent's index in its parent's open calls.
	parentCall int32
	// approval holds the calls waiting for a decision and the ends of
	// the waits before (docs/semantics.md, "Approvals").
	approval approvalBook
	// freed marks the stand-in a view of a freed agent reads (freedView).
	freed bool

	// ctx is the agent's token accounting and compaction (usage.go,
	// compact.go).
	ctx contextState
}

// input is a user text waiting to start a turn.
type input struct {
	text         string
	interjection bool
}

// callDraft is a tool call being streamed.
type callDraft struct {
	index int // the call's index in the stream
	id    string
	name  string
	args  []byte
}

// openCall is a call of the last assistant message.
type openCall struct {
	call   ToolCall
	op     OpID    // tool op, 0 for delegations and immediate results
	child  AgentID // NoAgent unless a delegation spawned a child
	closed bool
	// waiting: a tool call that has not started yet because its agent runs
	// Limits.MaxParallelTools tools already.
	waiting bool
}

// claimID records id as used in a's history and returns it, or, when it is
// taken, the first free id#2, id#3, … (F11: ids stay unique).
func (a *agent) claimID(id string) string {
	if a.usedIDs == nil {
		a.usedIDs = make(map[string]struct{})
	}
	if _, dup := a.usedIDs[id]; dup {
		base := id
		for n := 2; ; n++ {
			id = base + "#" + strconv.Itoa(n)
			if _, dup := a.usedIDs[id]; !dup {
				break
			}
		}
	}
	a.usedIDs[id] = struct{}{}
	return id
}

func (k *Kernel) newAgent(parent *agent, script string, profile int) *agent {
	a := &agent{
		id:         AgentID(len(k.agents)),
		parent:     NoAgent,
		script:     script,
		parentCall: -1,
		profile:    profile,
		depthCap:   k.cfg.MaxDepth,
	}
	n := k.instances[script] + 1
	k.instances[script] = n
	a.name = script
	if n > 1 {
		a.name = script + "#" + strconv.Itoa(n)
	}
	a.path = a.name
	if parent != nil {
		a.parent = parent.id
		a.depth = parent.depth + 1
		a.path = parent.path + "/" + a.name
		parent.children = append(parent.children, a.id)
		parent.turnKids = append(parent.turnKids, a.id)
		a.depthCap = parent.depthCap
	}
	if p := k.profileOf(a); p != nil {
		a.profileName = p.Name
		a.depthCap = depthCap(a.depthCap, a.depth, p)
	}
	k.agents = append(k.agents, a)
	k.held++
	return a
}

// MaxNameBytes bounds a child's name: a delegation's name is clipped to it
// (at a rune boundary). The tree keeps a count per distinct name for its
// whole life (docs/semantics.md, "Finished agents"), so a model naming
// every child anew cannot make that grow by more than this per child.
const MaxNameBytes = 64

// sanitizeName keeps agent names usable in paths, and short.
func sanitizeName(s string) string {
	s = textcut.Prefix(strings.TrimSpace(s), MaxNameBytes)
	if s == "" {
		return "agent"
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/', '#', ' ', '\t', '\n', '\r':
			return '_'
		}
		return r
	}, s)
}

// AgentView is a read-only view of one agent for drivers, the oracle and
// tests. Slices it returns must not be modified.
type AgentView struct{ a *agent }

// ID is the agent's id.
func (v AgentView) ID() AgentID { return v.a.id }

// Parent is the parent's id, NoAgent for the root.
func (v AgentView) Parent() AgentID { return v.a.parent }

// Children lists every child ever spawned, in spawn order.
func (v AgentView) Children() []AgentID { return v.a.children[:len(v.a.children):len(v.a.children)] }

// Depth is 0 for the root.
func (v AgentView) Depth() int { return v.a.depth }

// Name is the unique instance name (script, script#2, …).
func (v AgentView) Name() string { return v.a.name }

// Script is the name the delegating model asked for.
func (v AgentView) Script() string { return v.a.script }

// Path is the slash-separated instance path from the root.
func (v AgentView) Path() string { return v.a.path }

// State is the FSM state.
func (v AgentView) State() fsm.State { return v.a.state }

// Turn is the number of the current (or last) turn; 0 before the first.
func (v AgentView) Turn() uint64 { return v.a.turn }

// Outcome is how the last ended turn ended (OutcomeNone while one runs or
// before the first).
func (v AgentView) Outcome() (Outcome, Reason) { return v.a.outcome, v.a.reason }

// Summary is the last ended turn's final (or cut-off) text.
func (v AgentView) Summary() string { return v.a.summary }

// History is the chat history.
func (v AgentView) History() []Message { return v.a.history[:len(v.a.history):len(v.a.history)] }

// Deadline is the current turn's deadline (0 when idle).
func (v AgentView) Deadline() time.Duration { return v.a.deadline }

// InFlight is the number of requests and tool ops not yet ended.
func (v AgentView) InFlight() int { return v.a.inflight }

// LiveChildren is the number of children whose turn has not ended.
func (v AgentView) LiveChildren() int { return v.a.liveChildren }

// Requests is the number of LLM requests made in the current turn.
func (v AgentView) Requests() int { return v.a.requests }

// Abort is the reason of the current abort (Interrupted), else ReasonNone.
func (v AgentView) Abort() Reason { return v.a.abort }

// Freed reports that the tree has freed the agent: a child whose turn
// ended before the current step. Its view then holds nothing but its id
// and state Idle (docs/semantics.md, "Finished agents").
func (v AgentView) Freed() bool { return v.a.freed }
