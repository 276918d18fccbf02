package kernel

import (
	"encoding/binary"
	"slices"
	"time"
)

// Renamer maps the names a state refers to onto canonical numbers: op ids
// and tool call ids are handed out in the order events arrive, so two
// orders of the same events reach one state under different names. A
// renamer gives each name a number the first time it sees it; AppendState
// meets the names in a fixed order (agents by id, then what each holds),
// so equal states get equal encodings whichever names they drew. 0 must
// stay 0 (no op).
type Renamer interface {
	Op(OpID) uint64
	Call(id string) uint64
}

// FirstSight is the Renamer a model checker uses: each op id and call id
// gets the next number the first time it is asked for, and op 0 stays 0.
// One FirstSight names one encoding (a state, or a state with the work
// pending around it); a fresh one per encoding keeps them comparable.
type FirstSight struct {
	ops   map[OpID]uint64
	calls map[string]uint64
}

// NewFirstSight returns an empty FirstSight.
func NewFirstSight() *FirstSight {
	return &FirstSight{ops: map[OpID]uint64{}, calls: map[string]uint64{}}
}

// Op names op id: 0 for no op, else its number in order of first sight.
func (r *FirstSight) Op(id OpID) uint64 {
	if id == 0 {
		return 0
	}
	n, ok := r.ops[id]
	if !ok {
		n = uint64(len(r.ops) + 1)
		r.ops[id] = n
	}
	return n
}

// Call names a tool call id by first sight.
func (r *FirstSight) Call(id string) uint64 {
	n, ok := r.calls[id]
	if !ok {
		n = uint64(len(r.calls) + 1)
		r.calls[id] = n
	}
	return n
}

// AppendState appends a canonical encoding of everything a future Step
// reads — the clock, each agent's state, turn, histories, current request,
// calls, queues, counters, deadlines and approval waits, the session's
// approval grants, and every op and timer the kernel tracks — to dst,
// naming ops and calls through r. Two kernels whose encodings are equal
// answer every future event sequence alike (up to the renaming). The
// lifecycle log and its sequence numbers are left out: they record the
// past and no Step reads them. It is pure: it changes nothing, so a model
// checker can hash a state to explore it once (docs/semantics.md,
// "Exploration").
func (k *Kernel) AppendState(dst []byte, r Renamer) []byte {
	e := stateEnc{b: dst, r: r}
	e.dur(k.now)
	e.bool(k.shutdown)
	// A child that finished in the last step is freed at the start of the
	// next, whatever that step is (free.go): from here on it answers every
	// event exactly as a freed one does, so it is encoded as freed. Without
	// this, an event delivered right after a child's end and the same event
	// delivered before it would reach states that differ only in when the
	// child is let go, and no two events would commute.
	e.uint(uint64(len(k.agents)))
	for id, a := range k.agents {
		if e.bool(a == nil || k.retiring(AgentID(id))); a != nil && !k.retiring(AgentID(id)) {
			e.agent(a, k.finished)
		}
	}
	e.ids(k.waiting)
	// Instances per script: sorted by name (map order must not leak).
	names := make([]string, 0, len(k.instances))
	for n := range k.instances { // determinism: sorted below
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		e.str(n)
		e.uint(uint64(k.instances[n]))
	}
	k.approvals.encode(&e)
	// Ops: by agent, then by id (an agent's ops are started in call
	// order, so their relative order is the same in equal states).
	ids := k.LiveOps(nil)
	slices.SortStableFunc(ids, func(x, y OpID) int { return int(k.ops[x].agent) - int(k.ops[y].agent) })
	e.uint(uint64(len(ids)))
	for _, id := range ids {
		o := k.ops[id]
		e.op(id)
		e.uint(uint64(o.kind))
		e.int(int64(o.agent))
		e.dur(o.start)
		e.bool(o.cancelling)
		e.uint(o.turn)
		e.bool(o.compact)
		if !o.cancelling {
			// Read only for a request that ends on its own (noteRequestEnd):
			// a cancelled one's is dead, and two states that differ only in it
			// answer alike.
			e.int(int64(o.sent))
		}
		e.op(o.timer)
		e.int(int64(o.call))
		e.uint(uint64(o.tkind))
		e.op(o.target)
		e.dur(o.at)
	}
	return e.b
}

// LiveOps appends the ids of the ops (requests, tool calls, timers) the
// kernel tracks to dst, ascending.
func (k *Kernel) LiveOps(dst []OpID) []OpID {
	start := len(dst)
	for id := range k.ops { // determinism: sorted below
		dst = append(dst, id)
	}
	slices.Sort(dst[start:])
	return dst
}

// retiring reports that child id finished in the last step and is freed
// at the start of the next (free.go).
func (k *Kernel) retiring(id AgentID) bool { return slices.Contains(k.finished, id) }

// kids encodes a turn's children without those about to be freed, as
// freeFinished will leave them.
func (e *stateEnc) kids(ids, retiring []AgentID) {
	n := 0
	for _, id := range ids {
		if !slices.Contains(retiring, id) {
			n++
		}
	}
	e.uint(uint64(n))
	for _, id := range ids {
		if !slices.Contains(retiring, id) {
			e.int(int64(id))
		}
	}
}

type stateEnc struct {
	b []byte
	r Renamer
}

func (e *stateEnc) uint(v uint64)       { e.b = binary.AppendUvarint(e.b, v) }
func (e *stateEnc) int(v int64)         { e.b = binary.AppendVarint(e.b, v) }
func (e *stateEnc) dur(d time.Duration) { e.int(int64(d)) }
func (e *stateEnc) op(id OpID)          { e.uint(e.r.Op(id)) }
func (e *stateEnc) call(id string)      { e.uint(e.r.Call(id)) }
func (e *stateEnc) str(s string)        { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *stateEnc) bytes(s []byte)      { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *stateEnc) bool(v bool)         { e.b = append(e.b, b2u(v)) }
func (e *stateEnc) ids(ids []AgentID)   { e.uint(uint64(len(ids))); e.agentIDs(ids) }
func (e *stateEnc) agentIDs(ids []AgentID) {
	for _, id := range ids {
		e.int(int64(id))
	}
}

func b2u(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func (e *stateEnc) msg(m Message) {
	e.str(string(m.Role))
	e.str(m.Content)
	e.uint(uint64(len(m.ToolCalls)))
	for _, c := range m.ToolCalls {
		e.call(c.ID)
		e.str(c.Name)
		e.str(c.Arguments)
	}
	if m.ToolCallID == "" {
		e.uint(0)
	} else {
		e.call(m.ToolCallID)
	}
	e.b = append(e.b, b2u(m.Partial)|b2u(m.Marker)<<1|b2u(m.Synthetic)<<2|b2u(m.Interjection)<<3|b2u(m.Summary)<<4|b2u(m.Reasoning != nil)<<5)
	if r := m.Reasoning; r != nil {
		e.str(r.Text)
		e.str(r.Field)
		e.str(r.Details)
	}
}

func (e *stateEnc) agent(a *agent, retiring []AgentID) {
	e.int(int64(a.parent))
	e.ids(a.children)
	e.uint(uint64(a.depth))
	e.str(a.name)
	e.str(a.script)
	e.uint(uint64(a.state))
	e.uint(uint64(len(a.history)))
	for _, m := range a.history {
		e.msg(m)
	}
	// usedIDs holds the ids of history's calls (claimID), which the
	// history above already names.
	e.uint(uint64(len(a.usedIDs)))
	e.uint(a.turn)
	e.uint(uint64(a.outcome))
	e.uint(uint64(a.reason))
	e.str(a.summary)
	e.dur(a.turnStart)
	e.dur(a.deadline)
	e.op(a.turnTimer)
	e.int(int64(a.requests))
	e.int(int64(a.delegated))
	e.kids(a.turnKids, retiring)
	e.uint(uint64(a.abort))
	e.str(a.cut)
	e.str(a.failDetail)
	e.op(a.req)
	e.dur(a.reqStart)
	e.bool(a.gotChunk)
	e.dur(a.lastChunkAt)
	e.uint(uint64(a.lastChunkNo))
	e.dur(a.watchAt)
	e.bytes(a.text)
	e.uint(uint64(len(a.drafts)))
	for _, d := range a.drafts {
		e.int(int64(d.index))
		if d.id == "" {
			e.uint(0)
		} else {
			e.call(d.id)
		}
		e.str(d.name)
		e.bytes(d.args)
	}
	// draftAt indexes drafts by stream index: derived from drafts.
	e.int(int64(a.msgBytes))
	e.uint(uint64(len(a.open)))
	for _, oc := range a.open {
		e.call(oc.call.ID)
		e.str(oc.call.Name)
		e.str(oc.call.Arguments)
		e.op(oc.op)
		e.int(int64(oc.child))
		e.bool(oc.closed)
		e.bool(oc.waiting)
	}
	e.int(int64(a.pending))
	e.int(int64(a.runningTools))
	e.int(int64(a.nextWaiting))
	e.uint(uint64(len(a.queued)))
	for _, q := range a.queued {
		e.str(q)
	}
	e.uint(uint64(len(a.nextTurn)))
	for _, in := range a.nextTurn {
		e.str(in.text)
		e.bool(in.interjection)
	}
	e.op(a.restartTimer)
	e.int(int64(a.inflight))
	e.int(int64(a.liveChildren))
	e.int(int64(a.parentCall))
	a.approval.encode(e)
	e.appendContext(&a.ctx)
	e.int(int64(a.profile))
	e.int(int64(a.depthCap))
}
