package sim

import (
	"fmt"
	"math/rand/v2"
)

// permuter implements the same-instant permutation mode: items scheduled for
// the same virtual instant are delivered in an order drawn from the seed
// instead of insertion order, so a test can check the oracle holds for every
// order of an interrupt, a timeout, a chunk and a tool result that coincide.
// Each choice is written to the trace, so a failing order reproduces.
type permuter struct {
	rng *rand.Rand
}

func newPermuter(seed uint64) *permuter {
	return &permuter{rng: rand.New(rand.NewPCG(seed, 0x5851f42d4c957f2d))}
}

// reorder picks which of the items due at the head's instant goes first and
// returns a note describing the choice ("" when there was none).
func (p *permuter) reorder(q *queue) string {
	head := q.peek()
	var same []int
	for i := range q.items {
		if q.items[i].at == head.at {
			same = append(same, i)
		}
	}
	if len(same) < 2 {
		return ""
	}
	// Deterministic candidate order: by insertion sequence.
	for i := 1; i < len(same); i++ {
		for j := i; j > 0 && q.items[same[j]].seq < q.items[same[j-1]].seq; j-- {
			same[j], same[j-1] = same[j-1], same[j]
		}
	}
	pick := p.rng.IntN(len(same))
	chosen := q.items[same[pick]]
	if pick != 0 {
		// Give the chosen item the smallest sequence among them and restore
		// the heap by removing and re-inserting it.
		q.items[same[pick]].seq = head.seq
		q.items[0].seq = chosen.seq
		q.fix()
	}
	return fmt.Sprintf("permute: %d events due at %v; delivering #%d of them first", len(same), head.at, pick+1)
}

// fix re-establishes the heap property over the whole queue.
func (q *queue) fix() {
	n := len(q.items)
	for i := n/2 - 1; i >= 0; i-- {
		j := i
		for {
			l, r, m := 2*j+1, 2*j+2, j
			if l < n && less(&q.items[l], &q.items[m]) {
				m = l
			}
			if r < n && less(&q.items[r], &q.items[m]) {
				m = r
			}
			if m == j {
				break
			}
			q.items[j], q.items[m] = q.items[m], q.items[j]
			j = m
		}
	}
}
