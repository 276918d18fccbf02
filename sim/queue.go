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
	itemStep                      // the next step of a world op's script (not an event)
)

// item is one scheduled happening. Items are ordered by (at, seq): virtual
// time, then insertion order — one total order, so a run is reproducible.
type item struct {
	at   time.Duration
	seq  uint64
	kind itemKind
	ev   kernel.Event
	// op and gen tie a world item to its op: an item whose gen no longer
	// matches the op's was superseded (a cancel, a fault) and is dropped
	// without being delivered.
	op    *worldOp
	gen   uint32
	index int
	note  string
}

// queue is a binary min-heap of items (hand-written: container/heap's
// interface calls cost more than the rest of a step).
type queue struct {
	items []item
	seq   uint64
}

func (q *queue) len() int { return len(q.items) }

func less(a, b *item) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (q *queue) push(it item) {
	q.seq++
	it.seq = q.seq
	q.items = append(q.items, it)
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !less(&q.items[i], &q.items[p]) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

func (q *queue) peek() *item { return &q.items[0] }

func (q *queue) pop() item {
	top := q.items[0]
	n := len(q.items) - 1
	q.items[0] = q.items[n]
	q.items[n] = item{}
	q.items = q.items[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && less(&q.items[l], &q.items[m]) {
			m = l
		}
		if r < n && less(&q.items[r], &q.items[m]) {
			m = r
		}
		if m == i {
			break
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
	return top
}
