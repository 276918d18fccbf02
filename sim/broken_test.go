package sim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/oracle"
)

// brokenCore is a deliberately broken agent loop: the real kernel with one
// step of its behaviour changed, the way a real product got it wrong. It
// lives in test code only; production code has no switch for it.
type brokenCore struct {
	Core
	step     func(b *brokenCore, ev kernel.Event) []kernel.Effect
	view     func(v oracle.View) oracle.View
	viewID   func(b *brokenCore, id kernel.AgentID, v oracle.View) oracle.View
	logRange func(b *brokenCore, seq uint64, fn func(kernel.Lifecycle) bool) error
	find     func(b *brokenCore, name string) (kernel.AgentID, bool)
	fake     kernel.OpID
	cfg      kernel.Config
	// scratch for the individual breakages
	deferred *kernel.Event
	lastOwn  map[kernel.AgentID]int64
	fired    map[kernel.AgentID]bool
	// interrupted is the last turn each agent was seen interrupted in.
	interrupted map[kernel.AgentID]uint64
	fragments   map[kernel.OpID][]kernel.CallDelta
	// mark is what a rare loop remembers of an instant (rareLoops).
	mark rareMark
}

// rareMark: an instant a rare loop noted, and the op it noted there.
type rareMark struct {
	set bool
	at  time.Duration
	op  kernel.OpID
}

// AppendState encodes the kernel's state and what the rare loops remember
// (sim.StateEncoder), so an explorer prunes for these loops as for the
// kernel. (Loops whose closures hold state of their own, such as holding,
// are not explored.)
func (b *brokenCore) AppendState(dst []byte, r kernel.Renamer) []byte {
	dst = b.Core.(StateEncoder).AppendState(dst, r)
	return fmt.Appendf(dst, "|rare %v %d %d", b.mark.set, b.mark.at, r.Op(b.mark.op))
}

func (b *brokenCore) Step(ev kernel.Event) []kernel.Effect {
	if b.step != nil {
		return b.step(b, ev)
	}
	return b.Core.Step(ev)
}

func (b *brokenCore) View(id kernel.AgentID) oracle.View {
	v := b.Core.View(id)
	if b.view != nil {
		v = b.view(v)
	}
	if b.viewID != nil {
		v = b.viewID(b, id, v)
	}
	return v
}

func (b *brokenCore) LogRange(seq uint64, fn func(kernel.Lifecycle) bool) error {
	if b.logRange != nil {
		return b.logRange(b, seq, fn)
	}
	return b.Core.LogRange(seq, fn)
}

func (b *brokenCore) Find(name string) (kernel.AgentID, bool) {
	if b.find != nil {
		return b.find(b, name)
	}
	return b.Core.Find(name)
}

func (b *brokenCore) fakeOp() kernel.OpID {
	b.fake++
	return 1<<60 + b.fake
}

// inner steps the real kernel and copies its effects (the kernel reuses its
// buffer).
func (b *brokenCore) inner(ev kernel.Event) []kernel.Effect {
	return slices.Clone(b.Core.Step(ev))
}

func broken(setup func(b *brokenCore)) CoreFactory {
	return func(cfg kernel.Config) (Core, error) {
		c, err := KernelCore(cfg)
		if err != nil {
			return nil, err
		}
		b := &brokenCore{Core: c, cfg: cfg, lastOwn: map[kernel.AgentID]int64{}, fired: map[kernel.AgentID]bool{}, interrupted: map[kernel.AgentID]uint64{}, fragments: map[kernel.OpID][]kernel.CallDelta{}}
		setup(b)
		return b, nil
	}
}

func emit(agent kernel.AgentID, l kernel.Lifecycle) kernel.Effect {
	l.Agent = agent
	return kernel.Effect{Kind: kernel.EffEmit, Agent: agent, Life: l}
}

// hiding is a loop whose histories lack the messages drop matches.
func hiding(drop func(kernel.Message) bool) CoreFactory {
	return broken(func(b *brokenCore) {
		b.view = func(v oracle.View) oracle.View {
			v.History = slices.DeleteFunc(slices.Clone(v.History), drop)
			return v
		}
	})
}

// editingLife returns a step hook that lets edit change every lifecycle
// event the kernel emits before the world and the oracle see it.
func editingLife(edit func(l *kernel.Lifecycle)) func(*brokenCore, kernel.Event) []kernel.Effect {
	return func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		out := b.inner(ev)
		for i := range out {
			if out[i].Kind == kernel.EffEmit {
				edit(&out[i].Life)
			}
		}
		return out
	}
}

// rewriting returns a view hook that edits every message of a history copy.
func rewriting(edit func(m *kernel.Message)) func(oracle.View) oracle.View {
	return func(v oracle.View) oracle.View {
		h := slices.Clone(v.History)
		for i := range h {
			edit(&h[i])
		}
		v.History = h
		return v
	}
}

// ignoring is a loop that does not enforce a cap: the real kernel built
// with edit applied to its limits, while the oracle judges the scenario's.
func ignoring(edit func(*kernel.Limits)) CoreFactory {
	return func(cfg kernel.Config) (Core, error) {
		edit(&cfg.Limits)
		return KernelCore(cfg)
	}
}

// assertCaught: scenario passes with the kernel and, run with core, fails —
// exit 1 — with invariant named first. It returns that first violation.
func assertCaught(t *testing.T, scenario string, core CoreFactory, invariant oracle.Invariant, what string) oracle.Violation {
	t.Helper()
	s := byName(t, scenario)
	good := mustRun(t, s, Options{})
	if !good.Passed {
		t.Fatalf("the scenario must pass with the real kernel: %v", good.Violations)
	}
	res := mustRun(t, s, Options{Core: core})
	if res.Passed || ExitCode([]*Result{res}) != 1 {
		t.Fatalf("%s: the oracle did not catch it", what)
	}
	if got := res.Violations[0]; got.Invariant != invariant {
		t.Fatalf("%s: first violation is %s, want %s\nall: %v", what, got, invariant, res.Violations)
	}
	t.Logf("%s → %s", what, res.Violations[0])
	return res.Violations[0]
}

// brokenLoops maps each F-scenario to the broken loop that reintroduces its
// failure and the invariant the oracle must name.
func brokenLoops() []BrokenLoop {
	return []BrokenLoop{
		{"followup-after-grandchild-tool", "F1: asks the model again once the interrupted subtree's work finished", "I1",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					target := b.Target(ev)
					before := b.AgentState(target)
					out := b.inner(ev)
					// A tool returned, or a cancelled stream stopped, in an
					// interrupted agent: the loop goes on to "the next
					// request" with no check in between (the post-mortem).
					finished := ev.Kind == kernel.EvToolResult || ev.Kind == kernel.EvLLMError || ev.Kind == kernel.EvLLMEnd
					if finished && before == fsm.Interrupted {
						out = append(out, kernel.Effect{Kind: kernel.EffStartLLM, Agent: kernel.Root, Op: b.fakeOp(), Messages: b.Core.View(kernel.Root).History})
					}
					return out
				}
			})},
		{"cancel-reaches-descendants", "F2: an abort reaches only the agent it hit, never its children", "I2",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					target := b.Target(ev)
					out := b.inner(ev)
					if ev.Kind != kernel.EvCancel && ev.Kind != kernel.EvTimer {
						return out
					}
					return slices.DeleteFunc(out, func(e kernel.Effect) bool {
						return (e.Kind == kernel.EffCancelLLM || e.Kind == kernel.EffCancelTool) && e.Agent != target
					})
				}
			})},
		{"tool-ignores-cancel", "F3: waits for a cancelled tool forever (no grace, no abandonment)", "I3",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					return slices.DeleteFunc(b.inner(ev), func(e kernel.Effect) bool {
						return e.Kind == kernel.EffSetTimer && e.Timer == kernel.TimerGrace
					})
				}
			})},
		{"grandchild-progress-no-spurious-timeout", "F4: an inactivity monitor on the delegating agent instead of the stream it waits for", "I5",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					target := b.Target(ev)
					out := b.inner(ev)
					if ev.Kind == kernel.EvLLMDelta && target >= 0 {
						b.lastOwn[target] = int64(ev.At)
					}
					for id := 0; id < b.NumAgents(); id++ {
						a := kernel.AgentID(id)
						if _, ok := b.lastOwn[a]; !ok {
							b.lastOwn[a] = int64(ev.At)
						}
						if b.AgentState(a) == fsm.Delegating && !b.fired[a] && int64(ev.At)-b.lastOwn[a] >= int64(b.cfg.StallTimeout) {
							b.fired[a] = true
							out = append(out, emit(a, kernel.Lifecycle{Kind: kernel.LifeTimedOut, Reason: kernel.ReasonStallTimeout, At: ev.At}))
						}
					}
					return out
				}
			})},
		{"child-outcome-typed", "F5: the UI string comes back from a child as its tool result", "I12",
			broken(func(b *brokenCore) {
				b.view = rewriting(func(m *kernel.Message) {
					if m.Role == kernel.RoleTool && strings.Contains(m.Content, `"outcome":"interrupted"`) {
						m.Content = kernel.UIInterrupted
					}
				})
			})},
		{"marker-next-turn", "F6: the interrupted turn leaves no marker", "I13",
			hiding(func(m kernel.Message) bool { return m.Marker })},
		{"partial-kept", "F7: the partial streamed answer is dropped", "I10",
			hiding(func(m kernel.Message) bool { return m.Partial })},
		{"interject-and-rapid-esc", "F8: every Esc press fires another interrupt", "I11",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					if ev.Kind != kernel.EvCancel || ev.Agent < 0 || int(ev.Agent) >= b.NumAgents() {
						return b.inner(ev)
					}
					turn := b.Core.View(ev.Agent).Turn
					already := b.interrupted[ev.Agent] == turn && turn != 0
					out := b.inner(ev)
					for _, e := range out {
						if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeInterrupted {
							b.interrupted[e.Agent] = e.Life.Turn
						}
					}
					if already {
						// No idempotency, no debounce: the press interrupts
						// the same turn again.
						out = append(out, emit(ev.Agent, kernel.Lifecycle{Kind: kernel.LifeInterrupted, Reason: kernel.ReasonUserCancel, Turn: turn}))
					}
					return out
				}
			})},
		{"interrupt-races-results", "F9: the interrupt is a flag polled on the next event, not an event", "I2",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					if ev.Kind == kernel.EvCancel {
						b.deferred = &ev
						return nil
					}
					out := b.inner(ev)
					if b.deferred != nil {
						d := *b.deferred
						b.deferred = nil
						d.At = ev.At
						out = append(out, b.inner(d)...)
					}
					return out
				}
			})},
		{"late-subscriber", "F10: a subscriber that joins late misses lifecycle events", "I9",
			broken(func(b *brokenCore) {
				b.logRange = func(b *brokenCore, seq uint64, fn func(kernel.Lifecycle) bool) error {
					return b.Core.LogRange(seq, func(l kernel.Lifecycle) bool {
						return l.Kind == kernel.LifeTurnEnded || fn(l)
					})
				}
			})},
		{"transcript-valid-after-abort", "F11: cut-off tool calls are left without results", "I4",
			hiding(func(m kernel.Message) bool { return m.Synthetic })},
		{"half-streamed-call-dropped", "F12: a half-streamed tool call is executed with truncated arguments", "I14",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					if ev.Kind == kernel.EvLLMDelta && ev.Call != nil {
						b.fragments[ev.Op] = append(b.fragments[ev.Op], *ev.Call)
					}
					out := b.inner(ev)
					for _, e := range out {
						if e.Kind != kernel.EffCancelLLM || len(b.fragments[e.Op]) == 0 {
							continue
						}
						var call kernel.ToolCall
						for _, f := range b.fragments[e.Op] {
							call.ID += f.ID
							call.Name += f.Name
							call.Arguments += f.Args
						}
						out = append(out, kernel.Effect{Kind: kernel.EffStartTool, Agent: e.Agent, Op: b.fakeOp(), Call: call})
					}
					return out
				}
			})},
		{"timeout-typed-reason", "F13: a watchdog timeout is reported as interrupted by the user", "I13",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					out := slices.DeleteFunc(b.inner(ev), func(e kernel.Effect) bool {
						return e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTimedOut
					})
					for i := range out {
						if l := &out[i].Life; out[i].Kind == kernel.EffEmit && l.Reason.IsTimeout() {
							l.Reason, l.Outcome = kernel.ReasonUserCancel, kernel.OutcomeInterrupted
						}
					}
					return out
				}
			})},
		{"timeout-depth4-survived", "F13: a child's timeout reaches its parent as an interruption by the user", "I13",
			broken(func(b *brokenCore) {
				// The lie is told consistently — in the parent's lifecycle
				// and in the tool message its model reads — so only the
				// child's own end shows the truth.
				lie := func(s string) string {
					for _, r := range []kernel.Reason{kernel.ReasonFirstTokenTimeout, kernel.ReasonStallTimeout, kernel.ReasonTurnTimeout} {
						s = strings.ReplaceAll(s, `"outcome":"timed_out","reason":"`+r.String()+`"`, `"outcome":"interrupted","reason":"user_cancel"`)
					}
					return s
				}
				b.step = editingLife(func(l *kernel.Lifecycle) {
					if l.Kind == kernel.LifeCallFinished && l.Outcome == kernel.OutcomeTimedOut {
						l.Reason, l.Outcome = kernel.ReasonUserCancel, kernel.OutcomeInterrupted
					}
				})
				b.view = rewriting(func(m *kernel.Message) {
					if m.Role == kernel.RoleTool {
						m.Content = lie(m.Content)
					}
				})
			})},
		{"late-interrupts-are-no-ops", "F14: an interrupt arriving after completion produces a second outcome", "I13",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					before := b.AgentState(b.Target(ev))
					out := b.inner(ev)
					if ev.Kind == kernel.EvCancel && before == fsm.Idle && ev.Agent >= 0 {
						out = append(out, emit(ev.Agent, kernel.Lifecycle{Kind: kernel.LifeTurnEnded, Turn: b.Core.View(ev.Agent).Turn, Outcome: kernel.OutcomeInterrupted, Reason: kernel.ReasonUserCancel}))
					}
					return out
				}
			})},
	}
}

// TestOracleCatchesBrokenLoops: for every failure of the catalogue, its
// scenario passes with the kernel and fails — exit 1, the right invariant
// named first — when that one step of the behaviour is broken.
func TestOracleCatchesBrokenLoops(t *testing.T) {
	covered := map[string]bool{}
	for _, bl := range brokenLoops() {
		covered[bl.Failure[:strings.Index(bl.Failure, ":")]] = true
		t.Run(bl.Scenario, func(t *testing.T) {
			assertCaught(t, bl.Scenario, bl.Core, bl.Invariant, bl.Failure)
		})
	}
	for i := 1; i <= 14; i++ {
		if f := "F" + strconv.Itoa(i); !covered[f] {
			t.Errorf("no broken loop for %s", f)
		}
	}
}

// TestOracleCatchesBrokenInvariants: the invariants no catalogue failure
// names first (I7, I8), and checks no catalogue loop reaches (a text nobody
// typed, a refusal without its limit), get broken loops of their own.
func TestOracleCatchesBrokenInvariants(t *testing.T) {
	for _, c := range brokenInvariants() {
		t.Run(string(c.Invariant)+"/"+c.Scenario, func(t *testing.T) {
			assertCaught(t, c.Scenario, c.Core, c.Invariant, c.Failure)
		})
	}
}

// brokenInvariants are the broken loops of TestOracleCatchesBrokenInvariants.
func brokenInvariants() []BrokenLoop {
	return []BrokenLoop{
		{"interject-while-streaming", "a turn starts by a trigger the table does not declare from Idle", "I7",
			broken(func(b *brokenCore) {
				b.step = editingLife(func(l *kernel.Lifecycle) {
					if l.Kind == kernel.LifeTransition && l.From == fsm.Idle && l.Trigger == fsm.Submit {
						l.Trigger = fsm.Delta
					}
				})
			})},
		{"parallel-delegation-cancel", "agents change state with no transition event (an FSM bypassed)", "I7",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					return slices.DeleteFunc(b.inner(ev), func(e kernel.Effect) bool {
						return e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTransition && e.Life.To == fsm.Idle
					})
				}
			})},
		{"interject-while-streaming", "the root's history gains a user text nobody typed", "I10",
			broken(func(b *brokenCore) {
				b.view = func(v oracle.View) oracle.View {
					if v.Parent != kernel.NoAgent || len(v.History) < 2 {
						return v
					}
					h := slices.Clone(v.History)
					v.History = slices.Insert(h, 2, kernel.Message{Role: kernel.RoleUser, Content: "rm -rf / (never typed)"})
					return v
				}
			})},
		{"max-depth-refused", "a refusal names a limit that was not reached", "I13",
			broken(func(b *brokenCore) {
				b.step = editingLife(func(l *kernel.Lifecycle) {
					if l.Kind == kernel.LifeCallFinished && l.Reason == kernel.ReasonMaxDepth {
						l.Reason = kernel.ReasonMaxChildren
					}
				})
				b.view = rewriting(func(m *kernel.Message) {
					m.Content = strings.Replace(m.Content, `"reason":"max_depth"`, `"reason":"max_children"`, 1)
				})
			})},
		{"interject-while-tooling", "a well-formed call is answered as malformed", "I13",
			broken(func(b *brokenCore) {
				b.step = editingLife(func(l *kernel.Lifecycle) {
					if l.Kind == kernel.LifeCallFinished && l.Status == kernel.CallOK {
						l.Status, l.Reason = kernel.CallMalformed, kernel.ReasonMalformed
					}
				})
			})},
		{"cap-output-limit", "a message past max_message_bytes is streamed on, whole", "I15",
			ignoring(func(l *kernel.Limits) { l.MaxMessageBytes = kernel.MaxMessageBytesCeiling })},
		{"cap-max-calls", "calls beyond max_calls run", "I15",
			ignoring(func(l *kernel.Limits) { l.MaxCalls = kernel.MaxCallsCeiling })},
		{"cap-parallel-tools", "every call of a message runs at once", "I15",
			ignoring(func(l *kernel.Limits) { l.MaxParallelTools = kernel.MaxCallsCeiling })},
		{"faults-duplicate-late", "a late or duplicate event wakes the model again", "I8",
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					out := b.inner(ev)
					for _, e := range out {
						if e.Kind == kernel.EffEmit && (e.Life.Kind == kernel.LifeLate || e.Life.Kind == kernel.LifeStale) && e.Agent >= 0 {
							return append(out, kernel.Effect{Kind: kernel.EffStartLLM, Agent: e.Agent, Op: b.fakeOp(), Messages: b.Core.View(e.Agent).History})
						}
					}
					return out
				}
			})},
	}
}

// rareLoops are broken loops that go wrong only in one rare ordering or
// instant, the kind random sweeps sample and `escapement sim explore`
// enumerates (sim/explore_teeth_test.go holds explore to finding each,
// every time).
func rareLoops() []BrokenLoop {
	return []BrokenLoop{
		{"", "F14: a cancel is lost when it lands in the same instant as a child's start, ordered after it", oracle.CancelReachesSubtree,
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					if ev.Kind == kernel.EvCancel && b.mark.set && b.mark.at == ev.At {
						return nil // the spawn "still holds the tree": the press is dropped
					}
					out := b.inner(ev)
					for _, e := range out {
						if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnStarted && e.Agent != kernel.Root {
							b.mark = rareMark{set: true, at: ev.At}
						}
					}
					return out
				}
			})},
		// The oracle names the second request in the step it starts: its
		// agent already streams one that nobody answered or cancelled
		// (I19, one stream per agent).
		{"", "I19: a tool's result that arrives in the same instant as its timeout, after it, wakes the model a second time", oracle.RequestBudget,
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					out := b.inner(ev)
					for _, e := range out {
						if ev.Kind == kernel.EvTimer && e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTimedOut && e.Life.Reason == kernel.ReasonToolTimeout {
							b.mark = rareMark{set: true, at: ev.At, op: e.Life.Op}
						}
					}
					if ev.Kind == kernel.EvToolResult && b.mark.set && b.mark.at == ev.At && b.mark.op == ev.Op {
						// "The result is here after all": the loop asks the
						// model again although the call was closed.
						a := b.Core.View(kernel.Root)
						out = append(out, kernel.Effect{Kind: kernel.EffStartLLM, Agent: kernel.Root, Op: b.fakeOp(), Messages: a.History})
					}
					return out
				}
			})},
		{"", "I18: an interjection that lands on the instant its debounce window closes, before the restart, is lost", oracle.InputsAnswered,
			broken(func(b *brokenCore) {
				b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
					if ev.Kind == kernel.EvInterject && b.mark.set && b.mark.at == ev.At {
						return nil // "a restart is already under way"
					}
					if ev.Kind == kernel.EvTimer && b.mark.set && ev.Op == b.mark.op {
						b.mark = rareMark{}
					}
					out := b.inner(ev)
					for _, e := range out {
						if e.Kind == kernel.EffSetTimer && e.Timer == kernel.TimerRestart {
							b.mark = rareMark{set: true, at: e.At, op: e.Op}
						}
					}
					return out
				}
			})},
	}
}
