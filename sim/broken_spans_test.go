package sim

import (
	"strings"
	"testing"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// SpanLoop is a deliberately broken span derivation: kernel/spans with one
// thing it does changed the way a peer's agent instrumentation got it
// wrong (spans dropped on cancel, interrupt or timeout; nested agents'
// spans attached to the wrong parent). Each passes the oracle's every other
// invariant — the kernel under it is the real one — and I25 catches it.
// Test code only.
type SpanLoop struct {
	Name string
	// Scenario names an embedded scenario, or is a world's YAML.
	Scenario string
	// CrashAt crashes the host after these steps (Options.CrashAt).
	CrashAt []int
	Failure string
	Derive  func(spans.Config) oracle.SpanDeriver
}

// ScenarioOnly says why random worlds do not fit a loop ("" when they do).
func (sl SpanLoop) ScenarioOnly() string {
	if len(sl.CrashAt) > 0 {
		return "needs a crash; the crash property (TestCrashEveryStepScenarios) runs the derivation across crashes"
	}
	return ""
}

// SpanLoops returns the broken span derivations.
func SpanLoops() []SpanLoop {
	return []SpanLoop{
		{"spans-dropped-on-cancel", "cancel-reaches-descendants", nil, "I25: a request or tool span ends only on its op's own answer: a cancelled or abandoned op's span never ends",
			editing(func(_ *spanEdit, c spans.Change) []spans.Change {
				if c.Kind == spans.Ended && (c.Span.Kind == spans.KindChat || c.Span.Kind == spans.KindTool) &&
					(c.Span.OpEnd == kernel.OpCancelled || c.Span.OpEnd == kernel.OpAbandoned) {
					return nil
				}
				return []spans.Change{c}
			})},
		{"child-under-root", "nested-delegation", nil, "I25: a child agent's span nests under the root's turn, not under the delegation that spawned it",
			editing(func(e *spanEdit, c spans.Change) []spans.Change {
				if c.Kind == spans.Started && c.Span.Kind == spans.KindAgent {
					if c.Span.Agent == kernel.Root {
						e.root = c.Span.ID
					} else {
						sp := *c.Span
						sp.Parent = e.root
						c.Span = &sp
					}
				}
				return []spans.Change{c}
			})},
		{"turn-ends-before-its-spans", "cut-request-outlives-turn", nil, "I25: a turn's span ends in the step its turn ends, while the request an interjection cut still winds down under it",
			editing(func(e *spanEdit, c spans.Change) []spans.Change {
				return e.endAtTurnEnd(c)
			})},
		{"deadline-told-as-cancel", "deadline-stall-exact", nil, "I25: every span an abort ended says the user cancelled it, a stall timeout too",
			editing(func(_ *spanEdit, c spans.Change) []spans.Change {
				if c.Kind == spans.Ended && c.Span.Reason.IsTimeout() {
					sp := *c.Span
					sp.Reason = kernel.ReasonUserCancel
					c.Span = &sp
				}
				return []spans.Change{c}
			})},
		{"lost-spans-never-end", crashMidTools, []int{4}, "I25: the spans of the ops a crash lost never end (the process that held them is gone, and the recovered one does not end them)",
			editing(func(_ *spanEdit, c spans.Change) []spans.Change {
				if c.Kind == spans.Ended && c.Span.OpEnd == kernel.OpLost {
					return nil
				}
				return []spans.Change{c}
			})},
	}
}

// spanEdit is the real derivation with each change passed through edit,
// which returns what the broken one reports instead.
type spanEdit struct {
	inner *spans.Deriver
	edit  func(e *spanEdit, c spans.Change) []spans.Change
	out   []spans.Change
	// root is the root's running turn's span (rootParented); turnEnds the
	// agents whose turn ended in this step and early the spans ended ahead
	// of the derivation (endAtTurnEnd).
	root     spans.ID
	ev       kernel.Event
	turnEnds map[kernel.AgentID]bool
	early    map[spans.ID]bool
	turns    map[kernel.AgentID]*spans.Span
}

func editing(edit func(e *spanEdit, c spans.Change) []spans.Change) func(spans.Config) oracle.SpanDeriver {
	return func(cfg spans.Config) oracle.SpanDeriver {
		return &spanEdit{inner: spans.New(cfg), edit: edit, turnEnds: map[kernel.AgentID]bool{}, early: map[spans.ID]bool{}, turns: map[kernel.AgentID]*spans.Span{}}
	}
}

func (e *spanEdit) Step(ev kernel.Event, effs []kernel.Effect) []spans.Change {
	e.ev = ev
	clear(e.turnEnds)
	for _, f := range effs {
		if f.Kind == kernel.EffEmit && f.Life.Kind == kernel.LifeTurnEnded {
			e.turnEnds[f.Life.Agent] = true
		}
	}
	e.out = e.out[:0]
	for _, c := range e.inner.Step(ev, effs) {
		e.out = append(e.out, e.edit(e, c)...)
	}
	e.out = append(e.out, e.flushTurnEnds()...)
	return e.out
}

// endAtTurnEnd ends an agent's span in the step its turn ends, whatever
// still runs under it, and drops the derivation's own later end of it.
func (e *spanEdit) endAtTurnEnd(c spans.Change) []spans.Change {
	switch {
	case c.Kind == spans.Started && c.Span.Kind == spans.KindAgent:
		e.turns[c.Span.Agent] = c.Span
	case c.Kind == spans.Ended && e.early[c.Span.ID]:
		delete(e.early, c.Span.ID)
		return nil
	case c.Kind == spans.Ended && c.Span.Kind == spans.KindAgent:
		delete(e.turns, c.Span.Agent)
	}
	return []spans.Change{c}
}

// flushTurnEnds ends the spans endAtTurnEnd holds whose turn ended in this
// step and which the derivation did not end.
func (e *spanEdit) flushTurnEnds() []spans.Change {
	var out []spans.Change
	for _, a := range keys.Sorted(e.turnEnds) {
		sp := e.turns[a]
		if sp == nil {
			continue
		}
		delete(e.turns, a)
		if sp.Ended {
			continue
		}
		early := *sp
		early.Ended, early.End = true, e.ev.At
		e.early[sp.ID] = true
		out = append(out, spans.Change{Kind: spans.Ended, Span: &early})
	}
	return out
}

// TestOracleCatchesSpanLoops: each scenario passes with the derivation and
// fails — I25 named first — with its broken one.
func TestOracleCatchesSpanLoops(t *testing.T) {
	for _, sl := range SpanLoops() {
		t.Run(sl.Name, func(t *testing.T) {
			var s *scenario.Scenario
			if strings.Contains(sl.Scenario, "\n") {
				s = mustLoad(t, sl.Scenario)
			} else {
				s = byName(t, sl.Scenario)
			}
			opt := Options{CrashAt: sl.CrashAt}
			good := mustRun(t, s, opt)
			if !good.Passed {
				t.Fatalf("the scenario must pass with the derivation: %v", good.Violations)
			}
			opt.Spans = sl.Derive
			res := mustRun(t, s, opt)
			if res.Passed || ExitCode([]*Result{res}) != 1 {
				t.Fatalf("%s: the oracle did not catch it", sl.Failure)
			}
			if got := res.Violations[0]; got.Invariant != oracle.SpansEnd {
				t.Fatalf("%s: first violation is %s, want %s\nall: %v", sl.Failure, got, oracle.SpansEnd, res.Violations)
			}
			t.Logf("%s → %s", sl.Failure, res.Violations[0])
		})
	}
}
