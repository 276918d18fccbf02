package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/scenario"
)

// records runs an embedded scenario (it must pass) and returns every
// lifecycle record its run emitted, and the final core.
func records(t *testing.T, name string) ([]kernel.Lifecycle, Core) {
	t.Helper()
	var out []kernel.Lifecycle
	m, err := New(byName(t, name), Options{Observe: func(st StepInfo) {
		for _, e := range st.Effects {
			if e.Kind == kernel.EffEmit {
				out = append(out, e.Life)
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for m.Step() {
	}
	r, err := m.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Passed {
		t.Fatalf("%s: %v", name, r.Violations)
	}
	return out, m.Core()
}

// paths names every agent the records spawned by its path, as the
// delegated records tell it: a finished child is freed, and its path is
// no longer the core's to tell (docs/semantics.md, "Finished agents").
func paths(ls []kernel.Lifecycle) map[kernel.AgentID]string {
	out := map[kernel.AgentID]string{kernel.Root: scenario.RootScript}
	for _, l := range ls {
		if l.Kind == kernel.LifeDelegated {
			out[l.Child] = out[l.Agent] + "/" + l.Name
		}
	}
	return out
}

func only(ls []kernel.Lifecycle, keep func(kernel.Lifecycle) bool) []kernel.Lifecycle {
	return slices.DeleteFunc(slices.Clone(ls), func(l kernel.Lifecycle) bool { return !keep(l) })
}

// TestSettledQuestions pins, record by record, how docs/semantics.md
// settles what it once left open; each answer is an embedded scenario
// (named first) that the oracle judges as any other, and this test holds
// the records that tell the answer apart from the other one.
func TestSettledQuestions(t *testing.T) {
	t.Run("waiting-call-turn-deadline", func(t *testing.T) {
		// A call waiting for a slot when its turn's deadline fires is
		// timed_out (turn_timeout), as the running one; it never started.
		ls, _ := records(t, "waiting-call-turn-deadline")
		fins := only(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeCallFinished })
		started := only(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeToolStarted })
		if len(fins) != 2 || len(started) != 1 {
			t.Fatalf("%d results and %d tool starts, want 2 and 1", len(fins), len(started))
		}
		for _, f := range fins {
			if f.Status != kernel.CallTimedOut || f.Reason != kernel.ReasonTurnTimeout {
				t.Errorf("call %s ended %s/%s, want timed_out/turn_timeout", f.CallID, f.Status, f.Reason)
			}
		}
		if fins[1].CallID == started[0].CallID || fins[1].Op != 0 {
			t.Errorf("the waiting call %s (op %d) started", fins[1].CallID, fins[1].Op)
		}
	})
	t.Run("shutdown-reaches-descendants", func(t *testing.T) {
		// The root ends shutdown, its working descendant parent_cancelled;
		// a submission after the shutdown is refused.
		ls, _ := records(t, "shutdown-reaches-descendants")
		ends := only(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeTurnEnded })
		want := map[string]kernel.Reason{"main": kernel.ReasonShutdown, "main/worker": kernel.ReasonParentCancelled}
		for _, e := range ends {
			if p := paths(ls)[e.Agent]; e.Outcome != kernel.OutcomeInterrupted || e.Reason != want[p] {
				t.Errorf("%s ended %s/%s, want interrupted/%s", p, e.Outcome, e.Reason, want[p])
			}
		}
		if len(ends) != 2 || len(only(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeRejected })) != 1 {
			t.Errorf("%d turn ends and no refusal of the late submission", len(ends))
		}
	})
	t.Run("shutdown-discards-next-turn-inputs", func(t *testing.T) {
		// The two inputs queued for the next turn are discarded (one
		// ignored record); the one typed into the aborted turn is in its
		// history before the marker; no second turn starts.
		ls, c := records(t, "shutdown-discards-next-turn-inputs")
		ign := only(ls, func(l kernel.Lifecycle) bool {
			return l.Kind == kernel.LifeIgnored && strings.Contains(l.Text, "discarded by shutdown")
		})
		if len(ign) != 1 || !strings.HasPrefix(ign[0].Text, "2 queued input(s)") {
			t.Errorf("discard records: %+v", ign)
		}
		if n := len(only(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeTurnStarted })); n != 1 {
			t.Errorf("%d turns started, want 1", n)
		}
		h := c.View(kernel.Root).History
		i := slices.IndexFunc(h, func(m kernel.Message) bool { return m.Content == "typed into the turn" })
		if i < 0 || i+1 >= len(h) || !h[i+1].Marker {
			t.Errorf("the turn's interjection is not right before the marker:\n%v", h)
		}
	})
	t.Run("nameless-refusal-takes-no-number", func(t *testing.T) {
		// Children are numbered as they spawn: the refused delegation took
		// no number.
		ls, c := records(t, "nameless-refusal-takes-no-number")
		named := paths(ls)
		var got []string
		for id := range c.NumAgents() {
			got = append(got, named[kernel.AgentID(id)])
		}
		if !slices.Equal(got, []string{"main", "main/agent", "main/agent#2"}) {
			t.Errorf("agents %v, want main, main/agent, main/agent#2", got)
		}
	})
	t.Run("cancelled-tool-late-or-stale", func(t *testing.T) {
		// The result within the grace: one late record naming its agent,
		// the op ended cancelled. The result after the abandonment: one
		// stale record without an agent, and no late one.
		ls, _ := records(t, "cancelled-tool-late-or-stale")
		ops := map[string]kernel.OpID{}
		for _, l := range only(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeToolStarted }) {
			ops[l.Name] = l.Op
		}
		ends := map[kernel.OpID]kernel.OpEnd{}
		for _, l := range only(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeOpEnded }) {
			ends[l.Op] = l.End
		}
		late := only(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeLate })
		stale := only(ls, func(l kernel.Lifecycle) bool { return l.Kind == kernel.LifeStale })
		if len(late) != 1 || late[0].Op != ops["quick"] || late[0].Agent != kernel.Root || ends[ops["quick"]] != kernel.OpCancelled {
			t.Errorf("quick (op %d, ended %s): late records %+v", ops["quick"], ends[ops["quick"]], late)
		}
		if len(stale) != 1 || stale[0].Op != ops["slow"] || stale[0].Agent != kernel.NoAgent || ends[ops["slow"]] != kernel.OpAbandoned {
			t.Errorf("slow (op %d, ended %s): stale records %+v", ops["slow"], ends[ops["slow"]], stale)
		}
	})
}
