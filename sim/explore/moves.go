package explore

import (
	"slices"
	"time"

	"github.com/escapement/escapement/sim"
)

// The choices of a schedule at one state: which due event goes next, and
// where the next input goes (docs/semantics.md, "Exploration").

// inputs is the sequence to place in scenario mode.
func (x *explorer) inputs() []sim.Input { return x.s.Inputs }

// moves lists the choices at r's state, with the due items (for sleep
// sets and their canonical names).
func (x *explorer) moves(r *run, due []sim.Due) []move {
	var out []move
	for i := range due {
		out = append(out, move{pick: i})
	}
	if r.pending {
		return out
	}
	now := r.m.Now()
	next := time.Duration(-1)
	if len(due) > 0 {
		next = due[0].At
	}
	// The instants an input may take: right after the last event, a nudge
	// later, a nudge before the next event, and with the next event.
	var at []time.Duration
	add := func(t time.Duration) {
		if t >= now && (next < 0 || t <= next) && !slices.Contains(at, t) {
			at = append(at, t)
		}
	}
	add(now)
	if next >= 0 {
		if x.opt.Nudge > 0 {
			add(now + x.opt.Nudge)
			add(next - x.opt.Nudge)
		}
		add(next)
	}
	if len(x.opt.Alphabet) > 0 {
		if r.next >= x.opt.MaxInputs {
			return out
		}
		for _, in := range x.opt.Alphabet {
			for _, t := range at {
				in.At = t
				out = append(out, move{place: true, in: in})
			}
		}
		return out
	}
	seq := x.inputs()
	if r.next >= len(seq) {
		return out
	}
	in := seq[r.next]
	scripted := max(in.At, now)
	canMove := x.opt.MaxInputs < 0 || r.moved < x.opt.MaxInputs
	if next < 0 || scripted <= next {
		// Its scripted instant comes before (or with) the next event.
		p := in
		p.At = scripted
		out = append(out, move{place: true, in: p})
		if !canMove {
			// Nothing may happen before it: delivering would move it.
			return out[len(out)-1:]
		}
	} else if !canMove {
		return out
	}
	for _, t := range at {
		if t == scripted {
			continue
		}
		p := in
		p.At = t
		out = append(out, move{place: true, in: p, moved: true})
	}
	return out
}
