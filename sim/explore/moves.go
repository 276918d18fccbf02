package explore

import (
	"slices"
	"time"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
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
	at := x.instants(now, next)
	if len(x.opt.Alphabet) > 0 {
		return x.alphabetMoves(r, out, at)
	}
	if r.next >= len(x.s.Inputs) {
		return out
	}
	return x.inputMoves(r, out, at, now, next)
}

// instants are those an input may take now: right after the last event,
// a nudge later, a nudge before the next event, and with the next event
// (next < 0: none is due).
func (x *explorer) instants(now, next time.Duration) []time.Duration {
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
	return at
}

// alphabetMoves adds to out every input of the alphabet at every instant,
// while a schedule may make more.
func (x *explorer) alphabetMoves(r *run, out []move, at []time.Duration) []move {
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

// inputMoves adds to out the placements of the scenario's next input: at
// its instant — as scripted, or with the input before it when that one
// was moved past it — and, while the schedule may move one more, at every
// other instant.
func (x *explorer) inputMoves(r *run, out []move, at []time.Duration, now, next time.Duration) []move {
	in := x.s.Inputs[r.next]
	scripted := max(in.At, r.lastAt)
	if x.opt.MaxInputs >= 0 && r.moved >= x.opt.MaxInputs {
		return fixedInput(out, in, scripted, next)
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

// fixedInput is the moves when the next input may not move: it goes at
// its instant. What is due before it is delivered first, what is due with
// it may be (it then follows at the same instant), nothing later may.
func fixedInput(out []move, in scenario.Input, scripted, next time.Duration) []move {
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
