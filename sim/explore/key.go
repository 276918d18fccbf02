package explore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// A state's key: the canonical encoding of the run's state (the kernel's,
// the simulator's pending work), what the scenario's expectations still
// read of the past, and, for a scenario's own inputs, which one comes
// next, at which instant, and whether every input so far kept its instant
// (docs/semantics.md, "Exploration"). How many inputs the scope has
// left is compared, not hashed (seen.budget).

// node encodes the state r is in.
func (x *explorer) node(r *run) node {
	due := r.m.Due()
	b, names, _ := r.m.AppendState(nil, due) // fresh made sure the core can
	b = r.m.AppendExpectState(b)
	if len(x.opt.Alphabet) == 0 {
		// Which input is next and its instant (later than scripted when
		// the one before it was moved past it); schedules that keep every
		// input at its instant are judged by the expectations too: they
		// never merge with the others.
		at := time.Duration(-1)
		if r.next < len(x.s.Inputs) {
			at = max(x.s.Inputs[r.next].At, r.lastAt)
		}
		b = fmt.Appendf(b, "|%d|%d|%v", r.next, at, x.judged && x.scripted(r))
	}
	h := sha256.Sum256(b)
	n := node{due: due, names: names}
	copy(n.key[:], h[:16])
	return n
}

// digest hashes the set of states explored (sorted) and the counts.
func (x *explorer) digest() string {
	keys := make([][16]byte, 0, len(x.visited))
	for k := range x.visited { // determinism: sorted below
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [16]byte) int { return slices.Compare(a[:], b[:]) })
	h := sha256.New()
	for _, k := range keys {
		h.Write(k[:])
	}
	r := x.rep
	fmt.Fprintf(h, "%d %d %d %d %d %d %q", r.Schedules, r.States, r.Transitions, r.Revisits, r.Depth, r.Slept, r.Stopped)
	for _, t := range x.tallies {
		fmt.Fprintf(h, " %s=%d/%d", t.Name, t.Held, t.Of)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
