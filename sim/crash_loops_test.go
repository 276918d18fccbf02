package sim

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
)

// CrashLoop is a deliberately broken recovery: the real kernel with what it
// does across a crash changed the way a real runtime got it wrong
// (docs/durable.md). Each passes every uncrashed run — it misbehaves only
// in or after a recovery — so only the crash property catches it. Core is
// called once per run (a loop may keep per-process state, as one that
// numbers its ops from a process-wide counter does). Test code only.
type CrashLoop struct {
	// Scenario is a world (YAML) one crash catches the loop in: at
	// CrashAfter of virtual time, with the tools Idempotent names.
	Scenario   string
	CrashAfter time.Duration
	Idempotent []string
	Failure    string
	Invariant  oracle.Invariant
	Core       func(s *scenario.Scenario) CoreFactory
}

// The worlds CrashLoops are caught in: a crash while two tools run (one
// finished, one not; the turn's deadline falls before the unfinished one
// ends, so it must fire after the recovery), while a child streams under its
// waiting parent, and while the root streams.
const (
	crashMidTools = "name: crash-mid-tools\nlimits: {turn_timeout: 3s}\nagents:\n  main:\n    - calls: [{tool: quick, args: {n: 1}}, {tool: slow, args: {n: 2}}]\n    - {text: done}\n" +
		"tools:\n  quick: {duration: 100ms, result: quick result}\n  slow: {duration: 5s, result: slow result}\ninputs:\n  - {at: 0s, submit: go}\n"
	crashMidChild  = "name: crash-mid-child\nagents:\n  main:\n    - calls: [{delegate: kid, prompt: work}]\n    - {text: parent done}\n  kid:\n    - {text: kid works slowly here, rate: 5}\n    - {text: kid recovered}\ninputs:\n  - {at: 0s, submit: go}\n"
	crashMidStream = "name: crash-mid-stream\nagents:\n  main:\n    - {text: one two three four five six, rate: 10}\n    - {text: recovered answer}\ninputs:\n  - {at: 0s, submit: go}\n"
)

// CrashLoops are the broken recoveries the crash property must catch and
// shrink (TestCrashCatchesBrokenRecoveries, TestCrashLoopsInScenarios).
func CrashLoops() []CrashLoop {
	return []CrashLoop{
		{crashMidTools, time.Second, nil, "re-runs a shell call after a crash: every tool is treated as idempotent (a resumed graph re-executes the node)", oracle.FinishedCallsOnly,
			func(s *scenario.Scenario) CoreFactory {
				return func(cfg kernel.Config) (Core, error) {
					cfg.Idempotent = slices.Sorted(maps.Keys(s.Tools))
					return KernelCore(cfg)
				}
			}},
		{crashMidTools, time.Second, nil, "runs a finished call again after a crash: the recovery starts every call of the message in flight, answered or not", oracle.FinishedCallsOnly,
			func(*scenario.Scenario) CoreFactory { return broken(rerunningAnswered) }},
		{crashMidChild, time.Second, nil, "loses a child's result: the rebuilt tree does not link a running child to its parent's call, so the child's outcome never reaches it", oracle.NoWaitingForNothing,
			func(*scenario.Scenario) CoreFactory { return broken(losingChildResults) }},
		{crashMidTools, time.Second, []string{"slow"}, "forgets the timers armed before the crash: a turn deadline or a watchdog is never armed again", oracle.DeadlinesOnTime,
			func(*scenario.Scenario) CoreFactory { return broken(forgettingTimers) }},
		{crashMidStream, 350 * time.Millisecond, nil, "drops the partial text: a restarted request's history leaves out the text the crashed stream had sent", oracle.UserTextOnce,
			func(*scenario.Scenario) CoreFactory { return broken(droppingPartials) }},
		{crashMidStream, 350 * time.Millisecond, nil, "numbers its ops from a process-wide counter: the rebuilt process numbers them anew, so the log's answers name ops it never started", oracle.RebuildsExactly,
			func(*scenario.Scenario) CoreFactory { return processNumbered() }},
	}
}

// rerunningAnswered: on a recovery every agent still in a turn starts again
// each call of its last assistant message that already has its result.
func rerunningAnswered(b *brokenCore) {
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		if ev.Kind != kernel.EvRecover {
			return b.inner(ev)
		}
		var again []kernel.Effect
		for id := 0; id < b.NumAgents(); id++ {
			v := b.Core.View(kernel.AgentID(id))
			if v.State == fsm.Idle {
				continue
			}
			answered := map[string]bool{}
			for i := len(v.History) - 1; i >= 0; i-- {
				m := v.History[i]
				if m.Role == kernel.RoleTool {
					answered[m.ToolCallID] = true
					continue
				}
				if m.Role == kernel.RoleAssistant && len(m.ToolCalls) > 0 {
					for _, c := range m.ToolCalls {
						if answered[c.ID] {
							again = append(again, kernel.Effect{Kind: kernel.EffStartTool, Agent: kernel.AgentID(id), Op: b.fakeOp(), Call: c})
						}
					}
					break
				}
			}
		}
		return append(b.inner(ev), again...)
	}
}

// losingChildResults: after a recovery, the step a child's turn ends in
// loses everything from the child's result to its parent on (the parent's
// call stays open), and the parent's history never shows it.
func losingChildResults(b *brokenCore) {
	recovered := false
	hidden := map[kernel.AgentID]int{} // agent → history length shown
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		out := b.inner(ev)
		if ev.Kind == kernel.EvRecover {
			recovered = true
			return out
		}
		if !recovered {
			return out
		}
		for i, e := range out {
			if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeCallFinished && e.Life.Status == kernel.CallChild {
				if _, ok := hidden[e.Agent]; !ok {
					h := b.Core.View(e.Agent).History
					n := slices.IndexFunc(h, func(m kernel.Message) bool { return m.ToolCallID == e.Life.CallID })
					if n < 0 {
						n = len(h)
					}
					hidden[e.Agent] = n
				}
				return out[:i]
			}
		}
		return out
	}
	b.view = func(v oracle.View) oracle.View {
		for id, n := range hidden { // determinism: one entry matches
			if v.Path == b.Core.AgentPath(id) && n < len(v.History) {
				v.History = v.History[:n]
			}
		}
		return v
	}
}

// forgettingTimers: a recovery arms no timer that was set before the crash
// (the ones it sets anew, for restarted requests, it keeps).
func forgettingTimers(b *brokenCore) {
	set := map[kernel.OpID]bool{}
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		out := b.inner(ev)
		if ev.Kind == kernel.EvRecover {
			out = slices.DeleteFunc(out, func(e kernel.Effect) bool { return e.Kind == kernel.EffSetTimer && set[e.Op] })
		}
		for _, e := range out {
			if e.Kind == kernel.EffSetTimer {
				set[e.Op] = true
			}
		}
		return out
	}
}

// droppingPartials: a request a recovery restarts is sent without the text
// its crashed stream had sent, and the agent's history loses it.
func droppingPartials(b *brokenCore) {
	dropped := map[kernel.AgentID][]int{} // agent → history indexes hidden
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		out := b.inner(ev)
		if ev.Kind != kernel.EvRecover {
			return out
		}
		for i, e := range out {
			if n := len(e.Messages); e.Kind == kernel.EffStartLLM && n > 0 && e.Messages[n-1].Partial {
				out[i].Messages = e.Messages[:n-1]
				dropped[e.Agent] = append(dropped[e.Agent], n-1)
			}
		}
		return out
	}
	b.view = func(v oracle.View) oracle.View {
		for id, idx := range dropped { // determinism: one entry matches
			if v.Path != b.Core.AgentPath(id) {
				continue
			}
			h := slices.Clone(v.History)
			for k := len(idx) - 1; k >= 0; k-- {
				if idx[k] < len(h) {
					h = slices.Delete(h, idx[k], idx[k]+1)
				}
			}
			v.History = h
		}
		return v
	}
}

// processNumbered is a loop that numbers its ops from a counter of the
// process, not of the kernel: the n-th core a run builds (the n-th process
// of the host) offsets every op id by n<<40. Within one process ids are
// consistent, so an uncrashed run passes; a rebuilt process reads the log's
// events, whose ids the first process numbered, and finds none of its ops.
func processNumbered() CoreFactory {
	built := 0
	return func(cfg kernel.Config) (Core, error) {
		off := kernel.OpID(built) << 40
		built++
		return broken(func(b *brokenCore) {
			b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
				if ev.Op != 0 {
					ev.Op -= off
				}
				out := b.inner(ev)
				for i := range out {
					if out[i].Op != 0 {
						out[i].Op += off
					}
					if out[i].Life.Op != 0 {
						out[i].Life.Op += off
					}
				}
				return out
			}
		})(cfg)
	}
}

// crashRun runs s with core, crashing the host at `at` (no crash when at
// is 0).
func crashRun(t *testing.T, s *scenario.Scenario, core CoreFactory, idempotent []string, at time.Duration) *Result {
	t.Helper()
	m, err := New(s, Options{Core: core, Idempotent: idempotent, Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	if at > 0 {
		m.Advance(at)
		m.Recover()
	}
	r, err := m.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCrashLoopsInScenarios: each broken recovery passes its world
// uncrashed, the real kernel passes it crashed, and the broken recovery
// crashed fails it with its invariant named first.
func TestCrashLoopsInScenarios(t *testing.T) {
	for _, cl := range CrashLoops() {
		t.Run(string(cl.Invariant), func(t *testing.T) {
			s := mustLoad(t, cl.Scenario)
			if r := crashRun(t, s, cl.Core(s), cl.Idempotent, 0); !r.Passed {
				t.Fatalf("uncrashed, the broken recovery must pass: %v", r.Violations)
			}
			if r := crashRun(t, s, nil, cl.Idempotent, cl.CrashAfter); !r.Passed {
				t.Fatalf("the real kernel must pass the crash: %v", r.Violations)
			}
			r := crashRun(t, s, cl.Core(s), cl.Idempotent, cl.CrashAfter)
			if r.Passed {
				t.Fatalf("%s: the oracle did not catch it", cl.Failure)
			}
			if got := r.Violations[0]; got.Invariant != cl.Invariant {
				t.Fatalf("%s: first violation is %s, want %s\nall: %v", cl.Failure, got, cl.Invariant, r.Violations)
			}
			t.Logf("%s → %s", cl.Failure, r.Violations[0])
		})
	}
}
