package oracle

import (
	"slices"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// inputChecker holds I18: each user input is refused exactly where
// docs/semantics.md ("Inputs") refuses it — an empty text, anything typed
// after shutdown, a submission while the root works (the user interjects
// instead), a cancel naming no agent — and accepted everywhere else: a
// cancel of an existing agent is never refused (a repeat is a recorded
// no-op), and the world's events never are. A refusal changes nothing. An
// input accepted while the root is Interrupted is never lost: it starts the
// root's next turn in the very step the tree settles.
type inputChecker struct {
	judge
	// queued counts inputs accepted while the root was Interrupted.
	queued int
}

func (c *inputChecker) step(s *stepObs) {
	if s.final {
		return
	}
	switch {
	case s.input:
		c.input(s)
	case s.malformed != "" && !s.rejected:
		c.violate(InputsAnswered, s.target, "%s was taken, but it is malformed: %s", s.ev.Kind, s.malformed)
	case s.malformed == "" && s.rejected:
		c.violate(InputsAnswered, s.target, "%s was refused; only a malformed world event is", s.ev.Kind)
	case s.rejected:
		c.refusedChangesNothing(s, s.target)
	}
	if s.is(kernel.EvShutdown) {
		c.queued = 0 // discarded by the shutdown
	}
	for _, e := range s.turnEnds {
		if e.a.id != kernel.Root || e.second || c.queued == 0 {
			continue
		}
		if !slices.Contains(s.started, e.a) && !c.m.shutdown {
			c.violate(InputsAnswered, kernel.Root, "%d input(s) accepted while the root was Interrupted were lost: no turn started when turn %d ended", c.queued, e.l.Turn)
		}
		c.queued = 0
	}
}

// accepted: an accepted text does what docs/semantics.md ("Inputs") says,
// and its record says so: while the root is Idle it starts a turn (whose
// record carries it); otherwise it is interjected — at once while the root
// streams, queued for the next request or turn while it runs tools,
// delegates or is Interrupted.
func (c *inputChecker) accepted(s *stepObs) {
	if s.rootWas == fsm.Idle {
		for i := range s.effs {
			if l := &s.effs[i].Life; s.effs[i].Kind == kernel.EffEmit && l.Kind == kernel.LifeTurnStarted && l.Agent == kernel.Root {
				if l.Text != s.ev.Text {
					c.violate(InputsAnswered, kernel.Root, "the turn %q started carries %q", s.ev.Text, l.Text)
				}
				return
			}
		}
		c.violate(InputsAnswered, kernel.Root, "an accepted %s while the root was Idle started no turn", s.ev.Kind)
		return
	}
	if s.rootWas == fsm.Interrupted {
		c.queued++
	}
	queued := s.rootWas != fsm.Streaming
	for i := range s.effs {
		if l := &s.effs[i].Life; s.effs[i].Kind == kernel.EffEmit && l.Kind == kernel.LifeInterjected && l.Agent == kernel.Root && l.Text == s.ev.Text {
			if l.Queued != queued {
				c.violate(InputsAnswered, kernel.Root, "%q typed while the root was %s is recorded queued=%v", s.ev.Text, s.rootWas, l.Queued)
			}
			return
		}
	}
	c.violate(InputsAnswered, kernel.Root, "%q typed while the root was %s left no interjected record", s.ev.Text, s.rootWas)
}

// refusedChangesNothing: a refusal's only effects are its error and its
// rejected record.
func (c *inputChecker) refusedChangesNothing(s *stepObs, who kernel.AgentID) {
	errs, records := 0, 0
	for i := range s.effs {
		switch e := &s.effs[i]; {
		case e.Kind == kernel.EffError:
			errs++
		case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeRejected:
			records++
		default:
			c.violate(InputsAnswered, who, "a refused %s caused %s", s.ev.Kind, e.Describe())
			return
		}
	}
	if errs != 1 || records != 1 {
		c.violate(InputsAnswered, who, "a refused %s left %d error(s) and %d rejected record(s), want one of each", s.ev.Kind, errs, records)
	}
}

// refusal says why the spec refuses the step's input ("" when it accepts
// it).
func (c *inputChecker) refusal(s *stepObs) string {
	switch s.ev.Kind {
	case kernel.EvSubmit, kernel.EvInterject:
		switch {
		case s.ev.Text == "":
			return "its text is empty"
		case c.m.shutdown:
			return "the session was shut down"
		case s.ev.Kind == kernel.EvSubmit && isActive(s.rootWas):
			return "the root is " + s.rootWas.String() + " (the user interjects instead)"
		}
	case kernel.EvCancel:
		if !s.cancel.exists {
			return "it names no agent"
		}
	}
	return ""
}

func (c *inputChecker) input(s *stepObs) {
	who := s.target
	if who == kernel.NoAgent {
		who = kernel.Root
	}
	why := c.refusal(s)
	switch {
	case why != "" && !s.rejected:
		c.violate(InputsAnswered, who, "%s was accepted, but the spec refuses it: %s", s.ev.Kind, why)
	case why == "" && s.rejected:
		c.violate(InputsAnswered, who, "%s was refused, but the spec accepts it (the root was %s)", s.ev.Kind, s.rootWas)
	case s.rejected:
		c.refusedChangesNothing(s, who)
	case s.is(kernel.EvSubmit) || s.is(kernel.EvInterject):
		c.accepted(s)
	}
}
