package sim

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/scenario"
)

// CancelAckLatency is how long a scripted model or a cooperative tool takes
// to acknowledge a cancel.
const CancelAckLatency = 5 * time.Millisecond

// MaxRetries is how many rate-limit retries the simulated adapter makes
// before it reports the request failed (a fault with more attempts fails it).
const MaxRetries = 4

// worldOp is the scripted world's side of one kernel op.
type worldOp struct {
	id    kernel.OpID
	agent kernel.AgentID
	tool  bool
	// gen is bumped whenever the op's scheduled items are superseded (a
	// cancel, a fault taking over); stale items are dropped undelivered.
	gen       uint32
	cancelled bool
	done      bool // its final event is scheduled
	finished  bool // a tool's result was delivered
	// dup: the next chunk and the final event are delivered twice.
	dup      bool
	dupChunk bool
	// late delays the final event (or the cancel acknowledgement).
	late time.Duration

	// LLM request: the reply's text, streamed a token at a time (pos is
	// the byte offset of token next), then three fragments per call. The
	// tokens are cut as they are sent, not planned ahead: a stream is
	// mostly text, and a plan would allocate a chunk per token.
	text       string
	tokens     int
	pos        int
	frags      []kernel.CallDelta
	next       int
	interval   time.Duration
	firstToken time.Duration
	errAfter   int // -1: none
	errKind    kernel.Failure
	retries    int // rate-limit retries still to send
	attempt    int
	retryAfter time.Duration // the fault's base Retry-After
	retryWait  time.Duration // the jittered wait of the last retry sent
	hang       bool

	// What the op met, so that the op a recovery starts in its place
	// meets the same (keepLost): when it started; a request's reply (its
	// index in its agent's script) and the call ids its calls took; a
	// tool's call; the faults that hit it, in order.
	start    time.Duration
	reply    int
	callBase int
	call     string
	faults   []int

	// Tool call.
	spec    scenario.ToolSpec
	name    string
	finalAt time.Duration
	finalEv kernel.Event
}

// world is the scripted environment of one run.
type world struct {
	s       *scenario.Scenario
	q       queue
	rng     *rand.Rand
	src     *rand.PCG // rng's source, whose state an explorer's state hash reads
	ops     map[kernel.OpID]*worldOp
	timers  map[kernel.OpID]bool
	cursor  map[kernel.AgentID]int // next reply index per agent
	armed   []int                  // faults waiting for the next op of their agent
	callSeq int
	// again holds what a crash lost, for the ops its recovery starts in
	// their place (keepLost): an agent's request that was streaming, a
	// call of an idempotent tool that was running. Empty but in a
	// recovery's step.
	again      map[kernel.AgentID]*worldOp
	againTool  map[callKey]*worldOp
	idempotent []string
}

// callKey names a call: the agent whose message made it, and its id.
type callKey struct {
	agent kernel.AgentID
	id    string
}

func newWorld(s *scenario.Scenario, idempotent []string) *world {
	src := rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15)
	w := &world{
		s:      s,
		src:    src,
		rng:    rand.New(src),
		ops:    make(map[kernel.OpID]*worldOp),
		timers: make(map[kernel.OpID]bool),
		cursor: make(map[kernel.AgentID]int),

		idempotent: idempotent,
	}
	for i, in := range s.Inputs {
		w.q.push(item{at: in.At, kind: itemInput, index: i})
	}
	for i, f := range s.Faults {
		w.q.push(item{at: f.At, kind: itemFault, index: i})
	}
	return w
}

func (w *world) schedule(op *worldOp, at time.Duration, ev kernel.Event, dup bool) {
	w.q.push(item{at: at, kind: itemWorld, ev: ev, op: op, gen: op.gen, dup: dup})
}

// apply reacts to one Step's effects.
func (w *world) apply(now time.Duration, c Core, effs []kernel.Effect) {
	for i := range effs {
		e := &effs[i]
		switch e.Kind {
		case kernel.EffStartLLM:
			w.startLLM(now, c, e)
		case kernel.EffStartTool:
			w.startTool(now, c, e)
		case kernel.EffCancelLLM, kernel.EffCancelTool:
			w.cancel(now, e.Op)
		case kernel.EffSetTimer:
			w.timers[e.Op] = true
			at := e.At
			if at < now {
				at = now
			}
			w.q.push(item{at: at, kind: itemTimer, ev: kernel.Event{Kind: kernel.EvTimer, Op: e.Op}})
		case kernel.EffStopTimer:
			delete(w.timers, e.Op)
		case kernel.EffEmit:
			if e.Life.Kind == kernel.LifeOpEnded {
				// Items already scheduled for it (late results,
				// duplicates) are still delivered.
				delete(w.ops, e.Life.Op)
			}
		}
	}
}

// startLLM answers a request with its agent's next scripted reply — or,
// for the request a recovery restarts, with the reply the lost one was
// getting, its call ids and the faults that hit it (docs/semantics.md,
// "Scripts": a provider asked the same again answers the same).
func (w *world) startLLM(now time.Duration, c Core, e *kernel.Effect) {
	v := c.View(e.Agent)
	script := w.s.Agents[v.Script]
	lost := w.again[e.Agent]
	delete(w.again, e.Agent)
	n, seq := w.cursor[e.Agent], w.callSeq
	if lost != nil {
		n, seq = lost.reply, lost.callBase
	} else {
		w.cursor[e.Agent] = n + 1
	}
	reply := scenario.Reply{FirstToken: scenario.DefaultFirstToken, Rate: scenario.DefaultRate}
	if n < len(script) {
		reply = script[n]
	}
	op := &worldOp{id: e.Op, agent: e.Agent, start: now, reply: n, callBase: seq, errAfter: -1, firstToken: reply.FirstToken}
	op.interval, op.text, op.tokens = reply.Interval(), reply.Text, reply.Tokens()
	if len(reply.Calls) > 0 {
		op.frags = make([]kernel.CallDelta, 0, 3*len(reply.Calls))
	}
	for i, call := range reply.Calls {
		seq++
		id := call.ID
		if id == "" {
			id = "call_" + strconv.Itoa(seq)
		}
		name, args := call.Wire()
		half := len(args) / 2
		op.frags = append(op.frags,
			kernel.CallDelta{Index: i, ID: id, Name: name},
			kernel.CallDelta{Index: i, Args: args[:half]},
			kernel.CallDelta{Index: i, Args: args[half:]})
	}
	if lost == nil {
		w.callSeq = seq
	}
	w.ops[e.Op] = op
	w.meetFaults(now, c, op, lost, "")
	if op.hang {
		return
	}
	w.llmNext(op, now+op.firstToken)
}

// chunks is how many stream chunks the reply has: a chunk per token, three
// per call.
func (op *worldOp) chunks() int { return op.tokens + len(op.frags) }

// nextToken is text's first token: up to and including its first space (the
// space stays with the word before it, so tokens concatenate back to the
// text), or all of text.
func nextToken(text string) string {
	if i := strings.IndexByte(text, ' '); i >= 0 {
		return text[:i+1]
	}
	return text
}

// llmNext schedules the request's next event at `at`.
func (w *world) llmNext(op *worldOp, at time.Duration) {
	if op.hang || op.done || op.cancelled {
		return
	}
	if op.retries != 0 {
		op.attempt++
		if op.retries > 0 {
			op.retries--
		}
		if op.attempt > MaxRetries {
			op.done = true
			w.schedule(op, at+op.late, kernel.LLMError(0, op.id, kernel.FailureRateLimit, "429 Too Many Requests after "+strconv.Itoa(MaxRetries)+" retries"), false)
			return
		}
		// Up to 20% jitter on the fault's base each time; the base itself
		// never grows (a server's Retry-After does not compound).
		op.retryWait = op.retryAfter + time.Duration(w.rng.Int64N(int64(op.retryAfter)/5+1))
		w.schedule(op, at, kernel.LLMRetry(0, op.id, op.attempt, op.retryWait, "429 Too Many Requests"), false)
		return
	}
	// The error is checked before the end of the plan: a stream error
	// placed after its last chunk (or in an empty reply) still fires instead
	// of a clean end.
	if op.next == op.errAfter {
		op.done = true
		w.schedule(op, at+op.late, kernel.LLMError(0, op.id, op.errKind, "simulated "+op.errKind.String()), false)
		return
	}
	if op.next < op.chunks() {
		var ev kernel.Event
		if op.next < op.tokens {
			ev = kernel.TextDelta(0, op.id, uint32(op.next+1), nextToken(op.text[op.pos:]))
		} else {
			// The fragment is shared, not copied: nothing writes through
			// an event's Call (CallFragment would allocate a copy).
			ev = kernel.Event{Kind: kernel.EvLLMDelta, Op: op.id, Chunk: uint32(op.next + 1), Call: &op.frags[op.next-op.tokens]}
		}
		w.schedule(op, at, ev, false)
		if op.dup && !op.dupChunk {
			op.dupChunk = true
			w.schedule(op, at, ev, true)
		}
		return
	}
	op.done = true
	w.schedule(op, at+op.late, kernel.LLMEnd(0, op.id), false)
	if op.dup {
		w.schedule(op, at+op.late, kernel.LLMEnd(0, op.id), true)
	}
}

// delivered advances a request after one of its events was delivered.
func (w *world) delivered(op *worldOp, ev kernel.Event, now time.Duration, dup bool) {
	if op.tool && ev.Kind == kernel.EvToolResult && !dup {
		op.finished = true
	}
	if op.tool || op.cancelled || op.done || dup {
		return
	}
	switch ev.Kind {
	case kernel.EvLLMDelta:
		if op.next < op.tokens {
			op.pos += len(nextToken(op.text[op.pos:]))
		}
		op.next++
		w.llmNext(op, now+op.interval)
	case kernel.EvLLMRetry:
		w.llmNext(op, now+op.retryWait+op.firstToken)
	}
}

func (w *world) startTool(now time.Duration, c Core, e *kernel.Effect) {
	op := &worldOp{id: e.Op, agent: e.Agent, tool: true, start: now, name: e.Call.Name, call: e.Call.ID, errAfter: -1}
	spec, ok := w.s.Tools[e.Call.Name]
	if !ok {
		spec = scenario.ToolSpec{Error: "unknown tool " + strconv.Quote(e.Call.Name)}
	}
	op.spec = spec
	w.ops[e.Op] = op
	op.finalAt = now + spec.Duration
	op.finalEv = kernel.ToolResult(0, op.id, kernel.ToolOK, spec.Result)
	if spec.Error != "" {
		op.finalEv = kernel.ToolResult(0, op.id, kernel.ToolError, spec.Error)
	}
	lost := w.againTool[callKey{e.Agent, e.Call.ID}]
	delete(w.againTool, callKey{e.Agent, e.Call.ID})
	w.meetFaults(now, c, op, lost, e.Call.Name)
	w.scheduleToolFinal(op)
}

// scheduleToolFinal (re)schedules a tool's result with its dup/late faults.
func (w *world) scheduleToolFinal(op *worldOp) {
	op.done = true
	w.schedule(op, op.finalAt+op.late, op.finalEv, false)
	if op.dup {
		w.schedule(op, op.finalAt+op.late, op.finalEv, true)
	}
}

// cancel is the world's answer to a cancel effect.
func (w *world) cancel(now time.Duration, id kernel.OpID) {
	op, ok := w.ops[id]
	if !ok || op.cancelled {
		return
	}
	op.cancelled = true
	if !op.tool {
		op.gen++
		w.schedule(op, now+CancelAckLatency+op.late, kernel.LLMError(0, op.id, kernel.FailureCancelled, "cancelled"), false)
		return
	}
	switch op.spec.OnCancel {
	case scenario.CancelIgnore:
		// Runs to completion: its result arrives as scheduled (F3).
	case scenario.CancelDelay:
		op.gen++
		w.schedule(op, now+op.spec.CancelDelay+op.late, kernel.ToolResult(0, op.id, kernel.ToolCancelled, ""), false)
	default:
		op.gen++
		w.schedule(op, now+CancelAckLatency+op.late, kernel.ToolResult(0, op.id, kernel.ToolCancelled, ""), false)
	}
}

// crash is the world's side of a host crash: the processes that streamed
// and ran tools are gone, so nothing already scheduled for an op is
// delivered — nor a late or duplicate answer still queued for an op that
// ended before the crash — and the host's timers are gone with them (the
// recovered kernel arms again those it still wants). It returns how the
// crash changes the run's story (Crash.Changed).
func (w *world) crash(now time.Duration, c Core) []string {
	changed := w.keepLost(now, c)
	// determinism: every op gets the same change; the order is not seen.
	for _, op := range w.ops {
		op.gen++
		op.done, op.hang = true, true
	}
	for _, k := range w.q.keys {
		if it := &w.q.slab[k.slot]; it.kind == itemWorld && it.gen == it.op.gen {
			it.op.gen++
			it.op.done, it.op.hang = true, true
		}
	}
	clear(w.timers)
	return changed
}

// faultFits reports whether fault f can hit an op of this kind (and tool).
func faultFits(f scenario.Fault, tool bool, toolName string) bool {
	switch f.Fault {
	case scenario.FaultToolPanic:
		return tool && (f.Tool == "" || f.Tool == toolName)
	case scenario.FaultDuplicate, scenario.FaultLate:
		if f.Tool != "" {
			return tool && f.Tool == toolName
		}
		return true
	default:
		return !tool
	}
}

// takeArmed returns (and disarms) the first armed fault for a new op.
func (w *world) takeArmed(c Core, agent kernel.AgentID, tool bool, toolName string) int {
	if len(w.armed) == 0 {
		return -1
	}
	v := c.View(agent)
	for i, fi := range w.armed {
		f := w.s.Faults[fi]
		if v.Matches(f.Agent) && faultFits(f, tool, toolName) {
			w.armed = append(w.armed[:i], w.armed[i+1:]...)
			return fi
		}
	}
	return -1
}

// activate hits the matching op in flight, else arms the fault for the next
// op the agent starts.
func (w *world) activate(now time.Duration, c Core, fi int) string {
	f := w.s.Faults[fi]
	var best *worldOp
	// determinism: the candidate with the smallest op id wins, whatever
	// order the map yields them in.
	for _, op := range w.ops {
		if op.cancelled || (op.tool && op.finished) || (!op.tool && op.done) || (best != nil && op.id > best.id) {
			continue
		}
		if !c.View(op.agent).Matches(f.Agent) || !faultFits(f, op.tool, op.name) {
			continue
		}
		if f.Fault == scenario.FaultRateLimit && (op.next > 0 || op.attempt > 0) {
			continue // only before the first token
		}
		best = op
	}
	if best == nil {
		w.armed = append(w.armed, fi)
		return "fault " + string(f.Fault) + " armed for the next op of " + f.Agent
	}
	w.applyFault(now, best, fi, false)
	return "fault " + string(f.Fault) + " hits op " + strconv.FormatUint(uint64(best.id), 10)
}

// applyFault changes an op's future: fresh when the op is just starting,
// otherwise it is in flight and the fault takes effect at now.
func (w *world) applyFault(now time.Duration, op *worldOp, fi int, fresh bool) {
	f := w.s.Faults[fi]
	op.faults = append(op.faults, fi)
	switch f.Fault {
	case scenario.FaultStreamError, scenario.FaultDisconnect:
		w.streamFault(now, op, f, fresh)
	case scenario.FaultHang:
		op.gen++
		op.hang = true
	case scenario.FaultRateLimit:
		op.retries, op.retryAfter = f.Attempts, f.RetryAfter
		if !fresh {
			op.gen++
			w.llmNext(op, now)
		}
	case scenario.FaultToolPanic:
		op.finalAt = now + op.spec.Duration/2
		if !fresh {
			op.gen++
			op.finalAt = now
		}
		op.finalEv = kernel.ToolResult(0, op.id, kernel.ToolError, "tool panicked: simulated crash")
		if !fresh {
			w.scheduleToolFinal(op)
		}
	case scenario.FaultDuplicate, scenario.FaultLate:
		if f.Fault == scenario.FaultDuplicate {
			op.dup = true
		} else {
			op.late = f.Delay
		}
		if !fresh && op.tool {
			op.gen++
			w.scheduleToolFinal(op)
		}
	}
}

// streamFault fails a stream (a stream error or a disconnect): a fresh
// request after After chunks (0: halfway; past its last chunk: just
// before its end), one in flight at once.
func (w *world) streamFault(now time.Duration, op *worldOp, f scenario.Fault, fresh bool) {
	op.errKind = kernel.FailureStream
	if f.Fault == scenario.FaultDisconnect {
		op.errKind = kernel.FailureDisconnect
	}
	if !fresh {
		op.gen++
		op.done = true
		w.schedule(op, now, kernel.LLMError(0, op.id, op.errKind, "simulated "+op.errKind.String()), false)
		return
	}
	op.errAfter = f.After
	if f.After == 0 {
		op.errAfter = op.chunks() / 2
	}
	if op.errAfter > op.chunks() {
		op.errAfter = op.chunks()
	}
}
