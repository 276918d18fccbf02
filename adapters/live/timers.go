package live

import (
	"container/heap"
	"time"

	"github.com/escapement/escapement/kernel"
)

// timers holds the kernel's live timers for the loop: one heap ordered by
// (deadline, op id), so no goroutine exists per timer. Only the loop
// goroutine touches it.
//
// A stopped timer leaves the live set at once and its heap entry is dropped
// lazily, when it reaches the top — or all at once when dead entries
// outnumber live ones: the kernel sets and stops a timer per tool call and
// per request, mostly long before the deadline, and without compaction a
// busy tree would keep every one of them until its deadline passed.
type timers struct {
	heap timerHeap
	// live holds the timers set and neither stopped nor fired. The kernel
	// gives every timer a fresh op id, so an op id names one deadline.
	live map[kernel.OpID]struct{}
}

// compactSlack is how many dead entries the heap may hold beyond the live
// ones before it is rebuilt; it keeps small trees from rebuilding at every
// stop.
const compactSlack = 64

func newTimers() timers { return timers{live: make(map[kernel.OpID]struct{})} }

func (t *timers) set(op kernel.OpID, at time.Duration) {
	t.live[op] = struct{}{}
	heap.Push(&t.heap, timerEntry{at: at, op: op})
}

func (t *timers) stop(op kernel.OpID) {
	delete(t.live, op)
	if len(t.heap) > 2*len(t.live)+compactSlack {
		t.compact()
	}
}

// compact drops every dead entry and restores the heap order.
func (t *timers) compact() {
	kept := t.heap[:0]
	for _, e := range t.heap {
		if _, ok := t.live[e.op]; ok {
			kept = append(kept, e)
		}
	}
	t.heap = kept
	heap.Init(&t.heap)
}

// next drops dead entries from the top and returns the earliest live
// deadline.
func (t *timers) next() (time.Duration, bool) {
	for len(t.heap) > 0 {
		if _, ok := t.live[t.heap[0].op]; ok {
			return t.heap[0].at, true
		}
		heap.Pop(&t.heap)
	}
	return 0, false
}

// popDue removes and returns the earliest live timer if its deadline is at
// or before now.
func (t *timers) popDue(now time.Duration) (kernel.OpID, bool) {
	at, ok := t.next()
	if !ok || at > now {
		return 0, false
	}
	e := heap.Pop(&t.heap).(timerEntry)
	delete(t.live, e.op)
	return e.op, true
}

// timerHeap orders timers by (deadline, op id): the kernel's op ids
// increase, so equal deadlines fire in the order they were set.
type timerEntry struct {
	at time.Duration
	op kernel.OpID
}

type timerHeap []timerEntry

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].op < h[j].op
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
