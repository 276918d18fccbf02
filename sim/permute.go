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
	head := q.keys[0]
	var same []int
	for i := range q.keys {
		if q.keys[i].at == head.at {
			same = append(same, i)
		}
	}
	if len(same) < 2 {
		return ""
	}
	// Deterministic candidate order: by insertion sequence.
	for i := 1; i < len(same); i++ {
		for j := i; j > 0 && q.keys[same[j]].seq < q.keys[same[j-1]].seq; j-- {
			same[j], same[j-1] = same[j-1], same[j]
		}
	}
	pick := p.rng.IntN(len(same))
	if pick != 0 {
		q.toFront(same[pick])
	}
	return fmt.Sprintf("permute: %d events due at %v; delivering #%d of them first", len(same), head.at, pick+1)
}
