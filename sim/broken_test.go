package sim

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/scenarios"
)

// brokenCore is a deliberately broken agent loop: the real kernel with one
// step of its behaviour changed, the way a real product got it wrong. It
// lives in test code only; production code has no switch for it.
type brokenCore struct {
	Core
	step     func(b *brokenCore, ev kernel.Event) []kernel.Effect
	view     func(v View) View
	logRange func(b *brokenCore, seq uint64, fn func(kernel.Lifecycle) bool) error
	fake     kernel.OpID
	cfg      kernel.Config
	// scratch for the individual breakages
	deferred *kernel.Event
	lastOwn  map[kernel.AgentID]int64
	fired    map[kernel.AgentID]bool
	// interrupted is the last turn each agent was seen interrupted in.
	interrupted map[kernel.AgentID]uint64
	fragments   map[kernel.OpID][]kernel.CallDelta
}

func (b *brokenCore) Step(ev kernel.Event) []kernel.Effect {
	if b.step != nil {
		return b.step(b, ev)
	}
	return b.Core.Step(ev)
}

func (b *brokenCore) View(id kernel.AgentID) View {
	v := b.Core.View(id)
	if b.view != nil {
		v = b.view(v)
	}
	return v
}

func (b *brokenCore) LogRange(seq uint64, fn func(kernel.Lifecycle) bool) error {
	if b.logRange != nil {
		return b.logRange(b, seq, fn)
	}
	return b.Core.LogRange(seq, fn)
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

// brokenLoops maps each F-scenario to the broken loop that reintroduces its
// failure and the invariant the oracle must name.
func brokenLoops() []struct {
	scenario  string
	failure   string
	invariant string
	core      CoreFactory
} {
	return []struct {
		scenario  string
		failure   string
		invariant string
		core      CoreFactory
	}{
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
				b.view = func(v View) View {
					h := slices.Clone(v.History)
					for i, m := range h {
						if m.Role == kernel.RoleTool && strings.Contains(m.Content, `"outcome":"interrupted"`) {
							h[i].Content = kernel.UIInterrupted
						}
					}
					v.History = h
					return v
				}
			})},
		{"marker-next-turn", "F6: the interrupted turn leaves no marker", "I13",
			broken(func(b *brokenCore) {
				b.view = func(v View) View {
					v.History = slices.DeleteFunc(slices.Clone(v.History), func(m kernel.Message) bool { return m.Marker })
					return v
				}
			})},
		{"partial-kept", "F7: the partial streamed answer is dropped", "I10",
			broken(func(b *brokenCore) {
				b.view = func(v View) View {
					v.History = slices.DeleteFunc(slices.Clone(v.History), func(m kernel.Message) bool { return m.Partial })
					return v
				}
			})},
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
			broken(func(b *brokenCore) {
				b.view = func(v View) View {
					v.History = slices.DeleteFunc(slices.Clone(v.History), func(m kernel.Message) bool { return m.Synthetic })
					return v
				}
			})},
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
	suite, err := LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Scenario{}
	for _, s := range suite {
		byName[s.Name] = s
	}
	covered := map[string]bool{}
	for _, bl := range brokenLoops() {
		covered[bl.failure[:strings.Index(bl.failure, ":")]] = true
		t.Run(bl.scenario, func(t *testing.T) {
			s, ok := byName[bl.scenario]
			if !ok {
				t.Fatalf("no scenario %q", bl.scenario)
			}
			good, err := Run(s, Options{})
			if err != nil || !good.Passed {
				t.Fatalf("the scenario must pass with the real kernel: %v %v", err, good.Violations)
			}
			res, err := Run(s, Options{Core: bl.core})
			if err != nil {
				t.Fatal(err)
			}
			if res.Passed || ExitCode([]*Result{res}) != 1 {
				t.Fatalf("%s: the oracle did not catch it", bl.failure)
			}
			if got := res.Violations[0]; got.Invariant != bl.invariant {
				t.Fatalf("%s: first violation is %s, want %s\nall: %v", bl.failure, got, bl.invariant, res.Violations)
			}
			t.Logf("%s → %s", bl.failure, res.Violations[0])
		})
	}
	for i := 1; i <= 14; i++ {
		if f := "F" + strconv.Itoa(i); !covered[f] {
			t.Errorf("no broken loop for %s", f)
		}
	}
}
