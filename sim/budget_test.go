package sim

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
	"github.com/escapement/escapement/sim/scenario"
)

// fanOutBomb is a scenario of under a kilobyte whose every agent delegates
// sixteen tasks, eight deep: 16^8 agents, were it let.
func fanOutBomb(limits string) string {
	return `name: bomb
limits: {max_depth: 8, max_children: 16, max_calls: 16` + limits + `}
agents:
  main:
    - calls: &fan [{delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go},
        {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go},
        {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go},
        {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go}]
  h:
    - calls: *fan
inputs:
  - {at: 0s, submit: boom}
`
}

// TestDefaultLimitsBoundAFanOut: with the limits it does not set at their
// defaults, the bomb is held to max_agents and max_parallel_requests: the
// delegations past them are refused and the run ends quickly, well inside
// its memory budget.
func TestDefaultLimitsBoundAFanOut(t *testing.T) {
	s, err := scenario.Load("bomb.yaml", []byte(fanOutBomb("")))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Passed || res.Agents > 200 {
		t.Fatalf("passed %v with %d agents: %v", res.Passed, res.Agents, res.Violations)
	}
}

// TestBudgetStopsARunawayFanOut: the bomb with its limits raised to their
// ceilings would hold millions of agents; the run stops at its memory
// budget with ErrBudget, saying what it held, instead of taking the
// machine's memory.
func TestBudgetStopsARunawayFanOut(t *testing.T) {
	s, err := scenario.Load("bomb.yaml", []byte(fanOutBomb(", max_agents: 4194304, max_parallel_requests: 4194304")))
	if err != nil {
		t.Fatal(err)
	}
	const limit = 8 << 20
	m, err := New(s, Options{MemoryBudget: limit})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Finish()
	if !errors.Is(err, ErrBudget) || !strings.Contains(err.Error(), "scenario bomb") || !strings.Contains(err.Error(), "agents") {
		t.Fatalf("err = %v, want the budget's, naming the scenario and what it held", err)
	}
	// It stopped at the first step past the budget: one step adds at most
	// one reply's sixteen children.
	if over := m.budget.cost() - limit; over > 16*(costAgent+costOp) {
		t.Fatalf("stopped %d bytes past the budget", over)
	}
}

// TestReplayStaysWithinBudget: a trace is a small file whose header can ask
// for a huge run — a simulator trace's embedded scenario, a live trace's
// limits and a reply delegating thousands of tasks — and its replay stops
// at the memory budget with ErrBudget, whichever kind it is.
func TestReplayStaysWithinBudget(t *testing.T) {
	var sim bytes.Buffer
	w := trace.NewWriter(&sim, trace.Header{Source: "sim", Name: "bomb", Seed: 1, Scenario: fanOutBomb(", max_agents: 4194304, max_parallel_requests: 4194304"), Limits: kernel.DefaultLimits()})
	if _, err := w.Close(0); err != nil {
		t.Fatal(err)
	}
	lim := kernel.DefaultLimits()
	lim.MaxCalls, lim.MaxChildren, lim.MaxAgents, lim.MaxParallelRequests = kernel.MaxCallsCeiling, kernel.MaxChildrenCeiling, kernel.MaxAgentsCeiling, kernel.MaxAgentsCeiling
	var live bytes.Buffer
	lw := trace.NewWriter(&live, trace.Header{Source: "live", Name: "many", Limits: lim})
	k := kernel.MustNew(kernel.Config{Limits: lim})
	step := func(ev kernel.Event) {
		target := k.Target(ev)
		before := k.AgentState(target)
		lw.Step(k, ev, target, before, k.Step(ev))
	}
	step(kernel.Submit(0, "fan out"))
	for i := range 5000 {
		step(kernel.CallFragment(0, 2, uint32(i+1), kernel.CallDelta{Index: i, ID: fmt.Sprint("c", i), Name: "delegate", Args: `{"task":"t"}`}))
	}
	step(kernel.LLMEnd(0, 2))
	if _, err := lw.Close(0); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []*bytes.Buffer{&sim, &live} {
		if _, err := ReplayWithin(bytes.NewReader(tr.Bytes()), 8<<20); !errors.Is(err, ErrBudget) {
			t.Errorf("replay of a %d-byte trace: %v, want the budget's error", tr.Len(), err)
		}
	}
}
