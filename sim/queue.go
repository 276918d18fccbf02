package sim

import (
	"time"

	"github.com/escapement/escapement/kernel"
)

// itemKind says what a queued item is.
type itemKind uint8

const (
	itemInput itemKind = iota + 1 // a user input (index into Scenario.Inputs)
	itemWorld                     // an event of a world op (stream chunk, result, ack)
	itemTimer                     // a kernel timer firing
	itemFault                     // a fault activating (index into Scenario.Faults)
)

// item is one scheduled happening. Items are ordered by their queue key
// (at, seq): virtual time, then insertion order — one total order, so a run
// is reproducible.
type item struct {
	at   time.Duration
	kind itemKind
	ev   kernel.Event
	// op and gen tie a world item to its op: an item whose gen no longer
	// matches the op's was superseded (a cancel, a fault) and is dropped
	// without being delivered.
	op    *worldOp
	gen   uint32
	index int
	dup   bool // a duplicate delivery (fault): it does not advance its op
}

// queue is a binary min-heap of small keys over a slab of items: the heap
// moves 24-byte keys, never the (much larger) items, and popped slots are
// reused. Hand-written: container/heap's interface calls cost more than the
// rest of a step.
type queue struct {
	keys []qkey
	slab []item
	free []int32
	seq  uint64
}

type qkey struct {
	at   time.Duration
	seq  uint64
	slot int32
}

func (q *queue) len() int { return len(q.keys) }

func lessKey(a, b *qkey) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (q *queue) push(it item) {
	q.seq++
	var slot int32
	if n := len(q.free); n > 0 {
		slot = q.free[n-1]
		q.free = q.free[:n-1]
		q.slab[slot] = it
	} else {
		slot = int32(len(q.slab))
		q.slab = append(q.slab, it)
	}
	q.keys = append(q.keys, qkey{at: it.at, seq: q.seq, slot: slot})
	q.up(len(q.keys) - 1)
}

func (q *queue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !lessKey(&q.keys[i], &q.keys[p]) {
			break
		}
		q.keys[i], q.keys[p] = q.keys[p], q.keys[i]
		i = p
	}
}

func (q *queue) down(i int) {
	n := len(q.keys)
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && lessKey(&q.keys[l], &q.keys[m]) {
			m = l
		}
		if r < n && lessKey(&q.keys[r], &q.keys[m]) {
			m = r
		}
		if m == i {
			return
		}
		q.keys[i], q.keys[m] = q.keys[m], q.keys[i]
		i = m
	}
}

// toFront makes the item under key i the next one: it and the head trade
// items, not keys (the chosen one takes the head's key, the smallest
// sequence, and the head the chosen one's), so the heap needs no repair.
// Only for items due at the head's instant (the permuter, explore).
func (q *queue) toFront(i int) {
	q.keys[i].slot, q.keys[0].slot = q.keys[0].slot, q.keys[i].slot
}

// peek returns the next item without removing it.
func (q *queue) peek() *item { return &q.slab[q.keys[0].slot] }

func (q *queue) pop() item {
	k := q.keys[0]
	n := len(q.keys) - 1
	q.keys[0] = q.keys[n]
	q.keys = q.keys[:n]
	if n > 0 {
		q.down(0)
	}
	it := q.slab[k.slot]
	q.slab[k.slot] = item{}
	q.free = append(q.free, k.slot)
	return it
}
