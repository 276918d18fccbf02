package sim

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/oracle"
)

// The invariant loops: one broken loop per invariant no failure of the
// catalogue breaks first (brokenLoops in broken_test.go holds those), and
// the determinism recheck's.

// TestRecheckCatchesNondeterminism (I6): a core that cancels a subtree's ops
// in an order that changes from run to run — what iterating a Go map does —
// passes every per-step invariant, and only the second run's different
// trace gives it away.
func TestRecheckCatchesNondeterminism(t *testing.T) {
	s := byName(t, "parallel-delegation-cancel")
	runs := 0 // state shared by every core the factory builds: the bug
	flaky := func(cfg kernel.Config) (Core, error) {
		runs++
		flip := runs%2 == 0
		return broken(func(b *brokenCore) {
			b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
				out := b.inner(ev)
				if flip {
					var at []int
					for i, e := range out {
						if e.Kind == kernel.EffCancelLLM || e.Kind == kernel.EffCancelTool {
							at = append(at, i)
						}
					}
					for i, j := 0, len(at)-1; i < j; i, j = i+1, j-1 {
						out[at[i]], out[at[j]] = out[at[j]], out[at[i]]
					}
				}
				return out
			}
		})(cfg)
	}
	for _, c := range []struct {
		core CoreFactory
		want bool
	}{{nil, false}, {flaky, true}} {
		first := mustRun(t, s, Options{Core: c.core})
		if !first.Passed {
			t.Fatalf("a per-step invariant failed; this test is about I6 alone: %v", first.Violations)
		}
		if err := Recheck(s, Options{Core: c.core}, first); err != nil {
			t.Fatal(err)
		}
		if got := !first.Passed; got != c.want {
			t.Fatalf("core %v: recheck violations = %v, want one: %v", c.core != nil, first.Violations, c.want)
		}
		if !first.Passed {
			if v := first.Violations[len(first.Violations)-1]; v.Invariant != "I6" || len(first.Violations) != 1 {
				t.Fatalf("got %v", first.Violations)
			}
			t.Logf("map-order cancels → %s", first.Violations[0])
		}
	}
	// The flipped order on its own breaks no per-step invariant (runs 3
	// and 4: the fourth core flips).
	for i := 0; i < 2; i++ {
		if r := mustRun(t, s, Options{Core: flaky}); !r.Passed {
			t.Fatalf("run %d: %v", runs, r.Violations)
		}
	}
}

// invariantLoops are the broken loops of what no catalogue failure breaks
// first: the late side of I5, the waiting calls of I15, I16–I21, I4's
// request rule and liveness. Each changes one step the way a real loop
// could get it wrong; TestOracleCatchesInvariantLoops holds the oracle to
// catching each in its scenario (named first) and TestOracleTeethRapid in
// random worlds, shrunk.
func invariantLoops() []BrokenLoop {
	summary := regexp.MustCompile(`"summary":"[^"]*"`)
	return []BrokenLoop{
		{"deadline-stall-exact", "I5: the watchdog is never re-armed for a stall: a stalled stream is noticed at its first-token deadline, or never", oracle.DeadlinesOnTime,
			dropping(func(ev kernel.Event, e kernel.Effect) bool {
				return ev.Kind == kernel.EvLLMDelta && (e.Kind == kernel.EffSetTimer || e.Kind == kernel.EffStopTimer) && e.Timer == kernel.TimerWatchdog
			})},
		{"tool-ignores-cancel", "I5: a cancelled op is abandoned after half its grace", oracle.DeadlinesOnTime,
			retiming(kernel.TimerGrace, func(cfg kernel.Config) time.Duration { return -cfg.Grace / 2 })},
		{"interject-while-streaming", "I5: an interjection's restart waits twice the debounce window", oracle.DeadlinesOnTime,
			retiming(kernel.TimerRestart, func(cfg kernel.Config) time.Duration { return cfg.Debounce })},
		{"cap-parallel-tools", "I15: a call that waited for a tool slot never starts when one frees", oracle.CapsHold,
			dropping(func(ev kernel.Event, e kernel.Effect) bool {
				return e.Kind == kernel.EffStartTool && ev.Kind != kernel.EvLLMEnd
			})},
		// The acknowledgement of a timed-out tool's cancel changes nothing
		// of its agent but its running tools: the slot it frees must start
		// the call waiting behind it all the same.
		{"tool-cancel-ack-frees-slot", "I15: a slot freed by a cancelled tool's acknowledgement does not start the call waiting behind it", oracle.CapsHold,
			dropping(func(ev kernel.Event, e kernel.Effect) bool {
				return ev.Kind == kernel.EvToolResult && ev.Status == kernel.ToolCancelled &&
					(e.Kind == kernel.EffStartTool || (e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeToolStarted))
			})},
		// Counting max_calls by a call's position, as a loop that forgets
		// some calls never run does: a malformed call and a refused
		// delegation spend slots, and a call that could run is refused.
		// (The kernel one slot short, its refusals naming the configured
		// limit, shows the same refusal.)
		{"cap-max-calls-counts-runs", "I15: a call that never runs takes a max_calls slot, so a call that could run is refused max_calls", oracle.CapsHold,
			func(cfg kernel.Config) (Core, error) {
				if cfg.MaxCalls <= 1 {
					return KernelCore(cfg) // no slot to lose: a world of max_calls 1 runs the kernel
				}
				limit := `"reason":"max_calls","limit":`
				was := limit + strconv.Itoa(cfg.MaxCalls)
				cfg.MaxCalls--
				short := limit + strconv.Itoa(cfg.MaxCalls)
				return broken(func(b *brokenCore) {
					b.view = rewriting(func(m *kernel.Message) { m.Content = strings.Replace(m.Content, short, was, 1) })
				})(cfg)
			}},
		{"nested-delegation", "I16: a child's turn deadline is its own, not clamped to its parent's", oracle.ChildDeadlineClamped,
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					out := b.inner(ev)
					for _, e := range out {
						if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnStarted && e.Agent != kernel.Root {
							out = append(out, kernel.Effect{Kind: kernel.EffSetTimer, Agent: e.Agent, Op: b.fakeOp(), At: ev.At + b.cfg.TurnTimeout, Timer: kernel.TimerTurn})
						}
					}
					return out
				}
			})},
		{"partial-kept", "I17: the marker says nothing was cut although the abort cut streamed text", oracle.MarkersTell,
			broken(func(b *brokenCore) {
				b.view = rewriting(func(m *kernel.Message) {
					if m.Marker {
						m.Content = strings.Replace(m.Content, `partial="true"`, `partial="false"`, 1)
					}
				})
			})},
		{"timeout-typed-reason", "I17: a timed-out turn's marker tells the next request the user interrupted it", oracle.MarkersTell,
			broken(func(b *brokenCore) {
				b.view = rewriting(func(m *kernel.Message) {
					if m.Marker {
						for _, r := range []kernel.Reason{kernel.ReasonFirstTokenTimeout, kernel.ReasonStallTimeout, kernel.ReasonTurnTimeout} {
							m.Content = strings.Replace(m.Content, `outcome="timed_out" reason="`+r.String()+`"`, `outcome="interrupted" reason="user_cancel"`, 1)
						}
					}
				})
			})},
		{"interject-and-rapid-esc", "I18: a repeated Esc is refused instead of ignored", oracle.InputsAnswered,
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					out := b.inner(ev)
					for i := range out {
						if ev.Kind == kernel.EvCancel && out[i].Kind == kernel.EffEmit && out[i].Life.Kind == kernel.LifeIgnored {
							out[i].Life.Kind = kernel.LifeRejected
							return append(out, kernel.Effect{Kind: kernel.EffError, Agent: ev.Agent, Code: kernel.ErrCodeBadInput, Detail: "cancel: already interrupted"})
						}
					}
					return out
				}
			})},
		{"submit-while-interrupted-queued", "I18: a submission made while the root is Interrupted is silently lost", oracle.InputsAnswered,
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					if ev.Kind == kernel.EvSubmit && b.AgentState(kernel.Root) == fsm.Interrupted {
						return nil
					}
					return b.inner(ev)
				}
			})},
		{"budget-exhaustion", "I19: the request budget is off by one", oracle.RequestBudget,
			ignoring(func(l *kernel.Limits) { l.MaxRequests++ })},
		{"nested-delegation", "I20: a child's result hands the parent another summary than the child's final answer", oracle.ResultsCarryText,
			broken(func(b *brokenCore) {
				b.view = rewriting(func(m *kernel.Message) {
					if m.Role == kernel.RoleTool {
						m.Content = summary.ReplaceAllString(m.Content, `"summary":"(summary lost)"`)
					}
				})
			})},
		{"stream-error-typed", "I20: a failed turn's end drops the text it had streamed", oracle.ResultsCarryText,
			broken(func(b *brokenCore) {
				b.step = editingLife(func(l *kernel.Lifecycle) {
					if l.Kind == kernel.LifeTurnEnded && l.Outcome != kernel.OutcomeCompleted {
						l.Text = ""
					}
				})
			})},
		{"rate-limit-then-success", "I20: an adapter's retry is not published to subscribers", oracle.ResultsCarryText,
			dropping(func(_ kernel.Event, e kernel.Effect) bool {
				return e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeRetry
			})},
		{"cancelled-tool-result-dropped", "I21: a tool's real result after its cancel is dropped without its late record", oracle.OpEndsTruthful,
			dropping(func(_ kernel.Event, e kernel.Effect) bool {
				return e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeLate
			})},
		{"interject-while-streaming", "I21: a request's acknowledgement of its cancel is recorded as a dropped late result", oracle.OpEndsTruthful,
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					out := b.inner(ev)
					for _, e := range out {
						if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeOpEnded && e.Life.End == kernel.OpCancelled && ev.Kind != kernel.EvToolResult {
							return append(out, emit(e.Agent, kernel.Lifecycle{Kind: kernel.LifeLate, Op: e.Life.Op, At: ev.At, Text: "result after cancel dropped: "}))
						}
					}
					return out
				}
			})},
		{"result-json-as-written", "I13: structured results escape what is not ASCII (\\u00e9, as Python's json.dumps does) instead of carrying it as written", oracle.TypedOutcomes,
			broken(func(b *brokenCore) {
				b.view = rewriting(func(m *kernel.Message) {
					if m.Role == kernel.RoleTool && strings.HasPrefix(m.Content, `{"type":"agent_result"`) {
						m.Content = strings.ReplaceAll(m.Content, "é", `\u00e9`)
					}
				})
			})},
		{"tool-ignores-cancel", "I21: an abandoned op is reported as cancelled", oracle.OpEndsTruthful,
			broken(func(b *brokenCore) {
				b.step = editingLife(func(l *kernel.Lifecycle) {
					if l.Kind == kernel.LifeOpEnded && l.End == kernel.OpAbandoned {
						l.End = kernel.OpCancelled
					}
				})
			})},
		{"budget-exhaustion", "I4: the follow-up request leaves out the last tool result", oracle.ValidTranscripts,
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					out := b.inner(ev)
					for i := range out {
						if ms := out[i].Messages; out[i].Kind == kernel.EffStartLLM && len(ms) > 0 && ms[len(ms)-1].Role == kernel.RoleTool {
							out[i].Messages = ms[:len(ms)-1]
						}
					}
					return out
				}
			})},
		{"budget-exhaustion", "I22: once every result is in, the loop goes on only at the next event", oracle.NoWaitingForNothing,
			holding(func(l *kernel.Lifecycle) bool { return l.Kind == kernel.LifeTransition && l.Trigger == fsm.ResultsIn })},
		{"tool-ignores-cancel", "I22: an interrupted agent whose last op is gone settles only at the next event", oracle.NoWaitingForNothing,
			holding(func(l *kernel.Lifecycle) bool { return l.Kind == kernel.LifeTransition && l.Trigger == fsm.Settled })},
		{"nested-delegation", "I22: a child's result reaches its parent only at the next event", oracle.NoWaitingForNothing,
			holding(func(l *kernel.Lifecycle) bool {
				return l.Kind == kernel.LifeCallFinished && l.Status == kernel.CallChild
			})},
		{"half-streamed-call-dropped", "I14: a half-streamed call is dropped without its record", oracle.FinishedCallsOnly,
			dropping(func(_ kernel.Event, e kernel.Effect) bool {
				return e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeCallDropped
			})},
		{"interject-while-tooling", "I18: an interjection queued while tools run is recorded as delivered at once", oracle.InputsAnswered,
			broken(func(b *brokenCore) {
				b.step = editingLife(func(l *kernel.Lifecycle) {
					if l.Kind == kernel.LifeInterjected {
						l.Queued = !l.Queued
					}
				})
			})},
		{"interject-while-streaming", "I20: a completed turn keeps an old failure's detail", oracle.ResultsCarryText,
			broken(func(b *brokenCore) {
				b.step = editingLife(func(l *kernel.Lifecycle) {
					if l.Kind == kernel.LifeTurnEnded && l.Outcome == kernel.OutcomeCompleted {
						l.Detail = "stream: an earlier failure"
					}
				})
			})},
		// A loop that hands the shutdown's reason to every turn it ends —
		// its records, results and markers all agreeing — where a
		// descendant of the aborted root ends parent_cancelled.
		{"shutdown-reaches-descendants", "I13: a shutdown ends a descendant's turn with reason shutdown, not parent_cancelled", oracle.TypedOutcomes,
			broken(func(b *brokenCore) {
				shut := false
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					shut = shut || ev.Kind == kernel.EvShutdown
					out := b.inner(ev)
					for i := range out {
						if l := &out[i].Life; shut && out[i].Kind == kernel.EffEmit && l.Reason == kernel.ReasonParentCancelled {
							l.Reason = kernel.ReasonShutdown
						}
					}
					return out
				}
				b.view = func(v oracle.View) oracle.View {
					if !shut {
						return v
					}
					return rewriting(func(m *kernel.Message) {
						m.Content = strings.ReplaceAll(m.Content, `reason="parent_cancelled"`, `reason="shutdown"`)
						m.Content = strings.ReplaceAll(m.Content, `"reason":"parent_cancelled"`, `"reason":"shutdown"`)
					})(v)
				}
			})},
		{"max-depth-refused", "I13: a refusal names another limit than the one reached", oracle.TypedOutcomes,
			broken(func(b *brokenCore) {
				b.view = rewriting(func(m *kernel.Message) {
					m.Content = strings.Replace(m.Content, `"limit":`+strconv.Itoa(b.cfg.MaxDepth), `"limit":`+strconv.Itoa(b.cfg.MaxDepth+1), 1)
				})
			})},
		{"tool-timeout-ends-only-that-call", "I2: a tool whose deadline fired is not told to stop", oracle.CancelReachesSubtree,
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					out := b.inner(ev)
					if ev.Kind != kernel.EvTimer {
						return out
					}
					return slices.DeleteFunc(out, func(e kernel.Effect) bool { return e.Kind == kernel.EffCancelTool })
				}
			})},
		{"abort-and-refusal-results", "I19: a delegation beyond max_children is spawned", oracle.RequestBudget,
			ignoring(func(l *kernel.Limits) { l.MaxChildren++ })},
		{"max-depth-refused", "I19: a delegation beyond max_depth is spawned", oracle.RequestBudget,
			ignoring(func(l *kernel.Limits) { l.MaxDepth++ })},
		{"repeated-call-ids", "I19: the request after the tools is started twice, two streams of one agent at once", oracle.RequestBudget,
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					out := b.inner(ev)
					for _, e := range out {
						if ev.Kind == kernel.EvToolResult && e.Kind == kernel.EffStartLLM {
							return append(out, kernel.Effect{Kind: kernel.EffStartLLM, Agent: e.Agent, Op: b.fakeOp(), Messages: e.Messages})
						}
					}
					return out
				}
			})},
		{"interject-while-streaming", "I10: an interjection is kept unflagged, as if it had been submitted", oracle.UserTextOnce,
			broken(func(b *brokenCore) { b.view = rewriting(func(m *kernel.Message) { m.Interjection = false }) })},
		// A shutdown that treats every queued input alike: the
		// interjection typed into the turn it aborts is thrown away with
		// the inputs waiting for a next turn, instead of kept before the
		// marker as any abort keeps it.
		{"shutdown-reaches-descendants", "I10: a shutdown drops the interjection queued for the turn it aborts", oracle.UserTextOnce,
			broken(func(b *brokenCore) {
				b.view = func(v oracle.View) oracle.View {
					h := slices.Clone(v.History)
					for i := len(h) - 1; i > 0; i-- {
						if h[i].Marker && strings.Contains(h[i].Content, `reason="shutdown"`) && h[i-1].Interjection {
							h = slices.Delete(h, i-1, i)
						}
					}
					v.History = h
					return v
				}
			})},
		{"budget-exhaustion", "I14: the assistant message records a call under another name than the stream gave it", oracle.FinishedCallsOnly,
			broken(func(b *brokenCore) {
				b.view = func(v oracle.View) oracle.View {
					h := slices.Clone(v.History)
					for i := range h {
						if len(h[i].ToolCalls) > 0 {
							calls := slices.Clone(h[i].ToolCalls)
							calls[0].Name += "_renamed"
							h[i].ToolCalls = calls
						}
					}
					v.History = h
					return v
				}
			})},
		{"partial-kept", "I20: streamed text is not published to subscribers as it arrives", oracle.ResultsCarryText,
			dropping(func(_ kernel.Event, e kernel.Effect) bool {
				return e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeDelta
			})},
		{"nested-delegation", "I23: a finished turn's summary is not kept for the drivers that read it", oracle.ViewsTellTruth,
			broken(func(b *brokenCore) {
				b.view = func(v oracle.View) oracle.View {
					v.Summary = ""
					return v
				}
			})},
		{"cap-parallel-requests", "I19: no request ever waits for a slot: a fan-out streams as many requests at once as it has agents", oracle.RequestBudget,
			withConfig(func(cfg *kernel.Config) { cfg.MaxParallelRequests = kernel.MaxAgentsCeiling })},
		{"cap-parallel-requests", "I19: a request waits while a slot is free (the loop counts one slot fewer than the tree has)", oracle.RequestBudget,
			withConfig(func(cfg *kernel.Config) { cfg.MaxParallelRequests = max(1, cfg.MaxParallelRequests-1) })},
		{"nested-delegation", "I23: finished children are never freed: the tree keeps every child it ran, and its memory grows with every delegation", oracle.ViewsTellTruth,
			broken(func(b *brokenCore) {
				kept := map[kernel.AgentID]oracle.View{}
				b.viewID = func(b *brokenCore, id kernel.AgentID, v oracle.View) oracle.View {
					if k, ok := kept[id]; ok && v.Freed {
						return k
					}
					kept[id] = v
					return v
				}
			})},
		{"cancel-single-child", "I23: a name no agent has finds the root, so a cancel of a mistyped name stops the whole tree", oracle.ViewsTellTruth,
			broken(func(b *brokenCore) {
				b.find = func(b *brokenCore, name string) (kernel.AgentID, bool) {
					if id, ok := b.Core.Find(name); ok {
						return id, true
					}
					return kernel.Root, true
				}
			})},
		{"deadline-stall-exact", "liveness: a loop without a clock never sets a timer, so a stream that goes silent hangs the tree", oracle.Liveness,
			dropping(func(_ kernel.Event, e kernel.Effect) bool {
				return e.Kind == kernel.EffSetTimer || e.Kind == kernel.EffStopTimer
			})},
	}
}

// withConfig is the kernel run with a configuration the oracle does not
// know of (it judges by the scenario's): a loop whose bookkeeping of a
// limit is off.
func withConfig(change func(*kernel.Config)) CoreFactory {
	return func(cfg kernel.Config) (Core, error) {
		change(&cfg)
		return KernelCore(cfg)
	}
}

// holding is a loop that goes on one event late: from the first lifecycle
// event hold matches, it keeps the rest of that step's effects back and
// shows the agents they move as they were (the states before, the
// histories without what the held effects appended) until the next event,
// whose step begins with them.
func holding(hold func(*kernel.Lifecycle) bool) CoreFactory {
	return broken(func(b *brokenCore) {
		var held []kernel.Effect
		shown := map[string]oracle.View{} // by path: the view to show while held
		done := false
		b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
			var before []oracle.View
			if !done {
				for id := 0; id < b.NumAgents(); id++ {
					before = append(before, b.Core.View(kernel.AgentID(id)))
				}
			}
			out := b.inner(ev)
			if len(held) > 0 {
				out, held = append(held, out...), nil
				clear(shown)
			}
			if done {
				return out
			}
			for i := range out {
				if out[i].Kind != kernel.EffEmit || !hold(&out[i].Life) {
					continue
				}
				done, held, out = true, slices.Clone(out[i:]), out[:i]
				// Agents the held effects name look as they did before the
				// step, with what the kept effects appended.
				for _, e := range held {
					if e.Agent < 0 || int(e.Agent) >= len(before) {
						continue
					}
					v := b.Core.View(e.Agent)
					was := before[e.Agent]
					v.State = was.State
					if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTransition {
						v.State = e.Life.From
					}
					if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeCallFinished {
						if k := slices.IndexFunc(v.History, func(m kernel.Message) bool { return m.ToolCallID == e.Life.CallID }); k >= 0 {
							v.History = v.History[:k]
						}
					}
					if old, ok := shown[v.Path]; !ok || len(v.History) < len(old.History) {
						shown[v.Path] = v
					}
				}
				break
			}
			return out
		}
		b.view = func(v oracle.View) oracle.View {
			if s, ok := shown[v.Path]; ok {
				return s
			}
			return v
		}
	})
}

// dropping is a loop whose steps lose the effects drop matches.
func dropping(drop func(kernel.Event, kernel.Effect) bool) CoreFactory {
	return broken(func(b *brokenCore) {
		b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
			return slices.DeleteFunc(b.inner(ev), func(e kernel.Effect) bool { return drop(ev, e) })
		}
	})
}

// retiming is a loop that sets every timer of kind by shift later (earlier
// when negative) than the kernel asked.
func retiming(kind kernel.TimerKind, shift func(kernel.Config) time.Duration) CoreFactory {
	return broken(func(b *brokenCore) {
		b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
			out := b.inner(ev)
			for i := range out {
				if out[i].Kind == kernel.EffSetTimer && out[i].Timer == kind {
					out[i].At += shift(b.cfg)
				}
			}
			return out
		}
	})
}

// TestOracleCatchesInvariantLoops: each scenario passes with the kernel and
// fails — the right invariant named first — with its broken loop.
func TestOracleCatchesInvariantLoops(t *testing.T) {
	for _, bl := range invariantLoops() {
		t.Run(string(bl.Invariant)+"/"+bl.Scenario, func(t *testing.T) {
			assertCaught(t, bl.Scenario, bl.Core, bl.Invariant, bl.Failure)
		})
	}
}

// TestEveryInvariantHasTeeth: every invariant has a broken loop the oracle
// catches it by (I6's is TestRecheckCatchesNondeterminism, I24's a broken
// recovery, I25's a broken span derivation).
func TestEveryInvariantHasTeeth(t *testing.T) {
	named := map[oracle.Invariant]bool{oracle.Deterministic: true}
	for _, list := range [][]BrokenLoop{brokenLoops(), brokenInvariants(), invariantLoops(), profileLoops()} {
		for _, bl := range list {
			named[bl.Invariant] = true
		}
	}
	for _, cl := range CrashLoops() { // the broken recoveries (crash_loops_test.go)
		named[cl.Invariant] = true
	}
	if len(SpanLoops()) > 0 { // the broken span derivations (broken_spans_test.go)
		named[oracle.SpansEnd] = true
	}
	for _, inv := range oracle.Invariants() {
		if !named[inv] {
			t.Errorf("no broken loop violates %s (%s)", inv, inv.Statement())
		}
	}
}
