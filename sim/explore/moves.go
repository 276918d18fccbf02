package explore

import (
	"slices"
	"time"

	"github.com/escapement/escapement/sim"
)

// The choices of a schedule at one state: which due event goes next, and
// where the next input goes (docs/semantics.md, "Exploration"). An input
// is delivered where it is placed, ahead of the events due at its instant;
// to go after some of them it is placed once they were delivered.

// moves lists the choices at r's state, with the due items.
func (x *explorer) moves(r *run, due []sim.Due) []move {
	var out []move
	for i := range due {
		out = append(out, move{pick: i})
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
	seq := x.s.Inputs
	if r.next >= len(seq) {
		return out
	}
	in := seq[r.next]
	// Its instant: as scripted, or with the input before it when that
	// one was moved past it. Anywhere else it is moved.
	scripted := max(in.At, r.lastAt)
	if x.opt.MaxInputs >= 0 && r.moved >= x.opt.MaxInputs {
		// Not movable: it goes at its instant. What is due before it is
		// delivered first, what is due with it may be (it then follows
		// at the same instant), nothing later may.
		if next >= 0 && next < scripted {
			return out
		}
		p := in
		p.At = scripted
		place := move{place: true, in: p}
		if next == scripted {
			return append(out, place)
		}
		return []move{place}
	}
	if scripted >= now && (next < 0 || scripted <= next) {
		p := in
		p.At = scripted
		out = append(out, move{place: true, in: p})
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
