package oracle

import (
	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
)

// opTable maps op ids to what the oracle saw of those ops. The kernel
// numbers its ops 1, 2, 3, …, so ids below denseOps live in a slice (a
// lookup on every streamed chunk); a core that invents larger ids is still
// judged, through a map.
type opTable struct {
	dense []*opObs
	far   map[kernel.OpID]*opObs
}

// denseOps bounds the slice part: a run's ops, several times over.
const denseOps = 1 << 16

func (t *opTable) get(id kernel.OpID) *opObs {
	if id < denseOps {
		if int(id) < len(t.dense) {
			return t.dense[id]
		}
		return nil
	}
	return t.far[id]
}

func (t *opTable) set(id kernel.OpID, op *opObs) {
	if id < denseOps {
		if n := int(id) + 1; n > len(t.dense) {
			t.dense = append(t.dense, make([]*opObs, n-len(t.dense))...)
		}
		t.dense[id] = op
		return
	}
	if t.far == nil {
		t.far = make(map[kernel.OpID]*opObs)
	}
	t.far[id] = op
}

// ids is every op's id, in increasing order.
func (t *opTable) ids() []kernel.OpID {
	var out []kernel.OpID
	for id, op := range t.dense {
		if op != nil {
			out = append(out, kernel.OpID(id))
		}
	}
	return append(out, keys.Sorted(t.far)...) // every far id is above the dense ones
}
