package sim

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/scenario"
)

// This file is what an explorer (sim/explore) needs of a run beyond Step:
// the items due at the next instant, delivering any one of them first,
// queueing an input at a chosen instant, and a canonical encoding of the
// run's state for pruning (docs/semantics.md, "Exploration"). None of it
// changes what a run does unless the explorer calls it; Scenario.Schedule
// replays the choices in a scenario file.

// DueKind says what a due item is.
type DueKind uint8

// Kinds of due items.
const (
	DueInput DueKind = iota + 1 // a user input
	DueFault                    // a fault activating
	DueWorld                    // a world event: a chunk, a stream's end or failure, a retry, a tool's result or acknowledgement
	DueTimer                    // a kernel timer firing
)

func (k DueKind) String() string {
	return [...]string{"?", "input", "fault", "world", "timer"}[min(int(k), 4)]
}

// Due is one item due at the next instant, as an explorer sees it.
type Due struct {
	Kind DueKind
	At   time.Duration
	// Index is the input's or the fault's index (Scenario.Inputs, then
	// what Schedule added; Scenario.Faults).
	Index int
	// Event is what will be delivered (for an input, as it would be
	// pressed now; EventNone for a cancel of an agent not there yet).
	Event kernel.Event
	// Target is the agent the event is addressed to (kernel.Root for a
	// submission or an interjection, NoAgent for a shutdown, a fault or an
	// event the kernel will find stale).
	Target kernel.AgentID
	// Dup marks a duplicate delivery (fault).
	Dup bool

	key int // position in the queue's keys
}

// Identity names the item across runs of one scenario (op ids are the
// kernel's, so two runs that delivered the same events agree on them).
func (d Due) Identity() string {
	switch d.Kind {
	case DueInput, DueFault:
		return fmt.Sprintf("%s#%d", d.Kind, d.Index)
	}
	return fmt.Sprintf("%s op=%d %s chunk=%d status=%d dup=%v", d.Kind, d.Event.Op, d.Event.Kind, d.Event.Chunk, d.Event.Status, d.Dup)
}

// Due returns the live items due at the earliest instant any is due, in
// queue order (inputs by index, faults by index, then world events and
// timers in the order they were scheduled). Dead items (superseded,
// stopped) at the head are dropped on the way. Empty when nothing is
// left or the run stopped.
func (m *Sim) Due() []Due {
	if m.stop {
		return nil
	}
	q := &m.w.q
	for q.len() > 0 && m.dead(q.peek()) {
		q.pop()
	}
	if q.len() == 0 {
		return nil
	}
	at := q.peek().at
	var out []Due
	for i := range q.keys {
		k := &q.keys[i]
		it := &q.slab[k.slot]
		if k.at != at || m.dead(it) {
			continue
		}
		d := Due{At: at, key: i, Target: kernel.NoAgent, Index: it.index, Dup: it.dup}
		switch it.kind {
		case itemInput:
			d.Kind = DueInput
			d.Event, _ = inputEvent(m.inputs[it.index], m.o)
			if d.Event.Kind != kernel.EventNone && d.Event.Kind != kernel.EvShutdown {
				d.Target = m.core.Target(d.Event)
			}
		case itemFault:
			d.Kind = DueFault
		case itemWorld, itemTimer:
			d.Kind = DueWorld
			if it.kind == itemTimer {
				d.Kind = DueTimer
			}
			d.Event = it.ev
			d.Target = m.core.Target(it.ev)
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Due) int { return compareDue(q, a, b) })
	return out
}

// compareDue is the queue order of Due: inputs, faults, then the rest by
// insertion sequence.
func compareDue(q *queue, a, b Due) int {
	rank := func(d Due) int {
		switch d.Kind {
		case DueInput:
			return 0
		case DueFault:
			return 1
		}
		return 2
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	if a.Kind == DueInput || a.Kind == DueFault {
		return a.Index - b.Index
	}
	sa, sb := q.keys[a.key].seq, q.keys[b.key].seq
	switch {
	case sa < sb:
		return -1
	case sa > sb:
		return 1
	}
	return 0
}

// StepDue takes d (one of what Due just returned) before the others due
// with it: a fault activates, anything else is delivered. It returns false
// when a limit stopped the run instead.
func (m *Sim) StepDue(d Due) bool {
	if d.key != 0 {
		m.w.q.toFront(d.key)
	}
	if m.stop || !m.withinLimits() {
		return false
	}
	m.take()
	return true
}

// Schedule queues one more user input at in.At (not before now), as if
// the scenario had listed it; it counts as activity for the liveness bound
// from then on. It returns the input's index.
func (m *Sim) Schedule(in scenario.Input) int {
	if in.At < m.now {
		panic(fmt.Sprintf("sim: input scheduled at %v, before now=%v", in.At, m.now))
	}
	m.inputs = append(m.inputs, in)
	i := len(m.inputs) - 1
	m.w.q.push(item{at: in.At, kind: itemInput, index: i})
	m.o.Activity(in.At)
	return i
}

// Inputs returns the run's inputs: the scenario's and those Schedule added.
func (m *Sim) Inputs() []scenario.Input { return m.inputs }

// schedule replays Scenario.Schedule: at each instant where two or more
// live items are due, the next pick says which goes first.
type schedule struct {
	picks []int
	next  int
}

func (s *schedule) reorder(m *Sim) string {
	if s.next >= len(s.picks) {
		return "" // the schedule is spent: file order from here
	}
	due := m.Due()
	if len(due) < 2 {
		return ""
	}
	pick := s.picks[s.next]
	s.next++
	note := ""
	if pick >= len(due) {
		note = fmt.Sprintf("schedule: choice %d is %d, but only %d events are due at %v; delivering the first", s.next, pick, len(due), due[0].At)
		pick = 0
	}
	if k := due[pick].key; k != 0 {
		m.w.q.toFront(k)
	}
	return note
}

// StateEncoder is implemented by a Core whose state can be encoded for an
// explorer's pruning (the kernel's kernel.Kernel.AppendState).
type StateEncoder interface {
	AppendState(dst []byte, r kernel.Renamer) []byte
}

// AppendState appends a canonical encoding of the run's state — the
// core's (through StateEncoder) and the simulator's pending work: every
// live queued item, every world op and its script position, timers,
// armed faults, the world's random source — to dst. Equal encodings
// answer every future choice alike; the explorer prunes on their hash.
// ok is false when the core cannot encode its state (nothing may then be
// pruned). The oracle's record of the past is not part of it. names are
// the canonical names of due (what Due returned), in the same renaming:
// one item has one name in every state that holds it under any op ids.
func (m *Sim) AppendState(dst []byte, due []Due) (_ []byte, names []string, ok bool) {
	enc, ok := m.core.(StateEncoder)
	if !ok {
		return dst, nil, false
	}
	r := kernel.NewFirstSight()
	dst = enc.AppendState(dst, r)
	ops, live := m.w.sortedOps(), m.liveItems()
	for _, op := range ops {
		r.Op(op.id)
	}
	for _, it := range live {
		r.Op(it.ev.Op)
	}
	e := kernelEnc{b: dst}
	e.int(int64(m.now))
	e.uint(uint64(len(ops)))
	for _, op := range ops {
		e.worldOp(op, r)
	}
	// Live items as a sorted multiset: every order of one instant's items
	// is explored, so only which are due when matters.
	encs := make([][]byte, 0, len(live))
	for _, it := range live {
		encs = append(encs, m.itemEnc(it, r))
	}
	q := &m.w.q
	for _, d := range due {
		names = append(names, string(m.itemEnc(&q.slab[q.keys[d.key].slot], r)))
	}
	slices.SortFunc(encs, bytes.Compare)
	e.uint(uint64(len(encs)))
	for _, b := range encs {
		e.bytes(b)
	}
	m.w.appendPending(&e, r)
	return e.b, names, true
}

// sortedOps are the world's ops by agent, then id (an agent's ops start in
// call order).
func (w *world) sortedOps() []*worldOp {
	ops := make([]*worldOp, 0, len(w.ops))
	for _, op := range w.ops { // determinism: sorted below
		ops = append(ops, op)
	}
	slices.SortFunc(ops, func(a, b *worldOp) int {
		if a.agent != b.agent {
			return int(a.agent) - int(b.agent)
		}
		return cmp.Compare(a.id, b.id)
	})
	return ops
}

// liveItems are the queued items that will deliver something, in (time,
// op) order: ops named only by queued items (ended ops' late or duplicate
// events), and timers, get their names in that order.
func (m *Sim) liveItems() []*item {
	q := &m.w.q
	var live []*item
	for i := range q.keys {
		if it := &q.slab[q.keys[i].slot]; !m.dead(it) {
			live = append(live, it)
		}
	}
	slices.SortFunc(live, func(a, b *item) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmp.Compare(a.ev.Op, b.ev.Op)
	})
	return live
}

// worldOp encodes one world op: its state and its script position.
func (e *kernelEnc) worldOp(op *worldOp, r *kernel.FirstSight) {
	e.uint(r.Op(op.id))
	e.int(int64(op.agent))
	e.flags(op.tool, op.cancelled, op.done, op.finished, op.dup, op.dupChunk, op.hang)
	e.int(int64(op.late))
	e.str(op.text[op.pos:])
	e.int(int64(op.tokens))
	e.uint(uint64(len(op.frags)))
	for _, f := range op.frags {
		e.int(int64(f.Index))
		if f.ID != "" {
			e.uint(r.Call(f.ID))
		} else {
			e.uint(0)
		}
		e.str(f.Name)
		e.str(f.Args)
	}
	e.int(int64(op.next))
	e.int(int64(op.interval))
	e.int(int64(op.firstToken))
	e.int(int64(op.errAfter))
	e.int(int64(op.errKind))
	e.int(int64(op.retries))
	e.int(int64(op.attempt))
	e.int(int64(op.retryAfter))
	e.int(int64(op.retryWait))
	e.str(op.name)
	e.int(int64(op.spec.Duration))
	e.str(op.spec.Result)
	e.str(op.spec.Error)
	e.int(int64(op.spec.OnCancel))
	e.int(int64(op.spec.CancelDelay))
	e.int(int64(op.finalAt))
	e.event(op.finalEv, r)
}

// appendPending encodes what else the world will do: its timers, each
// agent's place in its script, the armed faults and its random source.
func (w *world) appendPending(e *kernelEnc, r *kernel.FirstSight) {
	timers := make([]uint64, 0, len(w.timers))
	for id, on := range w.timers { // determinism: sorted below
		if on {
			timers = append(timers, r.Op(id))
		}
	}
	slices.Sort(timers)
	e.uint(uint64(len(timers)))
	for _, t := range timers {
		e.uint(t)
	}
	agents := make([]kernel.AgentID, 0, len(w.cursor))
	for a := range w.cursor { // determinism: sorted below
		agents = append(agents, a)
	}
	slices.Sort(agents)
	for _, a := range agents {
		e.int(int64(a))
		e.int(int64(w.cursor[a]))
	}
	e.uint(uint64(len(w.armed)))
	for _, fi := range w.armed {
		e.int(int64(fi))
	}
	src, err := w.src.MarshalBinary()
	if err != nil {
		panic("sim: PCG state: " + err.Error())
	}
	e.bytes(src)
}

// itemEnc is one queued item's canonical encoding.
func (m *Sim) itemEnc(it *item, r *kernel.FirstSight) []byte {
	ie := kernelEnc{}
	ie.int(int64(it.at))
	ie.uint(uint64(it.kind))
	if it.kind != itemInput {
		// An input is named by what it is: its index only says how many
		// came before, which the states' histories tell where it matters.
		ie.int(int64(it.index))
	}
	ie.flags(it.dup)
	ie.event(it.ev, r)
	if it.kind == itemInput {
		in := m.inputs[it.index]
		ie.str(in.Submit)
		ie.str(in.Interject)
		ie.str(in.Cancel)
		ie.uint(in.Turn)
		ie.flags(in.Shutdown)
	}
	return ie.b
}

// AppendExpectState appends to dst what the scenario's expectations,
// judged at the end of the run, will read of the run's past — beyond its
// state (AppendState), which holds every outcome and history they read:
// for each llm_requests expectation, the requests its agent made so far
// (counted to one past the number expected: every larger count fails
// alike); for quiescent_by, whether the tree is quiescent now, and whether
// it became so, or delivered its last event, after the bound. An explorer
// that prunes on a state adds this, so two schedules whose expectations
// could still end differently never merge (docs/semantics.md,
// "Exploration").
func (m *Sim) AppendExpectState(dst []byte) []byte {
	e := m.s.Expect
	enc := kernelEnc{b: dst}
	for _, ref := range keys.Sorted(e.LLMRequests) {
		got := int64(-1) // not there (yet)
		if id, ok := m.o.Find(ref); ok {
			got = 0
			if asked, seen := m.o.Asked(id); seen {
				got = int64(min(asked, e.LLMRequests[ref]+1))
			}
		}
		enc.int(got)
	}
	if by := e.QuiescentBy; by > 0 {
		quiet, since := m.o.Quiet()
		enc.flags(quiet, quiet && since > by, m.res.End > by)
	}
	return enc.b
}

type kernelEnc struct{ b []byte }

func (e *kernelEnc) uint(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *kernelEnc) int(v int64)    { e.b = binary.AppendVarint(e.b, v) }
func (e *kernelEnc) str(s string)   { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *kernelEnc) bytes(b []byte) { e.uint(uint64(len(b))); e.b = append(e.b, b...) }
func (e *kernelEnc) flags(v ...bool) {
	var x uint64
	for i, f := range v {
		if f {
			x |= 1 << i
		}
	}
	e.uint(x)
}

func (e *kernelEnc) event(ev kernel.Event, r *kernel.FirstSight) {
	e.uint(uint64(ev.Kind))
	e.int(int64(ev.Agent))
	e.uint(ev.Turn)
	e.uint(r.Op(ev.Op))
	e.uint(uint64(ev.Chunk))
	e.str(ev.Text)
	if ev.Call != nil {
		e.int(int64(ev.Call.Index))
		if ev.Call.ID != "" {
			e.uint(r.Call(ev.Call.ID))
		} else {
			e.uint(0)
		}
		e.str(ev.Call.Name)
		e.str(ev.Call.Args)
	} else {
		e.int(-1)
	}
	e.int(int64(ev.Failure))
	e.int(int64(ev.Status))
	e.int(int64(ev.Attempt))
	e.int(int64(ev.Delay))
}
