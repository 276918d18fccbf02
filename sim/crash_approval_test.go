package sim_test

import (
	"testing"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/scenario"
	"github.com/escapement/escapement/sim/sweep"
	"pgregory.net/rapid"
)

// approvalTally counts, over a run, what happened to one call's approval.
type approvalTally struct {
	asked, askedByRecovery   int
	resolvedInRecovery       int
	starts, startsInRecovery int
}

func tallying(call string, t *approvalTally) func(sim.StepInfo) {
	return func(st sim.StepInfo) {
		recovery := st.Event.Kind == kernel.EvRecover
		for _, e := range st.Effects {
			switch {
			case e.Kind == kernel.EffStartTool && e.Call.ID == call:
				t.starts++
				if recovery {
					t.startsInRecovery++
				}
			case e.Kind != kernel.EffEmit || e.Life.CallID != call:
			case e.Life.Kind == kernel.LifeApprovalRequested:
				t.asked++
				if recovery {
					t.askedByRecovery++
				}
			case e.Life.Kind == kernel.LifeApprovalResolved && recovery:
				t.resolvedInRecovery++
			}
		}
	}
}

// stepOf is the step (from 1) of s's uncrashed run whose effects or event
// match.
func stepOf(t *testing.T, s *scenario.Scenario, match func(sim.StepInfo) bool) int {
	t.Helper()
	n, at := 0, 0
	if _, err := sim.Run(s, sim.Options{Observe: func(st sim.StepInfo) {
		n++
		if at == 0 && match(st) {
			at = n
		}
	}}); err != nil {
		t.Fatal(err)
	}
	if at == 0 {
		t.Fatalf("%s: no step matches", s.Name)
	}
	return at
}

func loadEmbedded(t *testing.T, name string) *scenario.Scenario {
	t.Helper()
	ss, err := scenario.LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %q", name)
	return nil
}

// TestApprovalCrashStories: the two stories of docs/durable.md
// ("Approvals across a crash"), crashed where they tell them. A crash
// while a call waits: the recovery asks again and decides nothing; the
// approval after it starts the call once. A crash after an approval,
// before its call started (it waited for the one tool slot): the call
// starts exactly once — in the recovery's step when the lost tool that
// held the slot is not run again — and is not asked about again.
func TestApprovalCrashStories(t *testing.T) {
	requested := func(st sim.StepInfo) bool {
		for _, e := range st.Effects {
			if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeApprovalRequested {
				return true
			}
		}
		return false
	}
	decided := func(st sim.StepInfo) bool { return st.Event.Kind == kernel.EvDecision }
	for _, c := range []struct {
		scenario, call string
		crashAfter     func(sim.StepInfo) bool
		idempotent     []string
		want           approvalTally
	}{
		{"approval-recover-pending", "c1", requested, nil, approvalTally{asked: 2, askedByRecovery: 1, starts: 1}},
		{"approval-recover-approved-not-started", "c2", decided, nil, approvalTally{asked: 1, starts: 1, startsInRecovery: 1}},
		{"approval-recover-approved-not-started", "c2", decided, []string{"backup"}, approvalTally{asked: 1, starts: 1}},
	} {
		s := loadEmbedded(t, c.scenario)
		k := stepOf(t, s, c.crashAfter)
		var got approvalTally
		r, err := sim.Run(s, sim.Options{CrashAt: []int{k}, Idempotent: c.idempotent, Observe: tallying(c.call, &got)})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Passed {
			t.Errorf("%s crashed after step %d: %v", c.scenario, k, r.Violations)
		}
		if got != c.want {
			t.Errorf("%s crashed after step %d (idempotent %v): call %s %+v, want %+v", c.scenario, k, c.idempotent, c.call, got, c.want)
		}
	}
}

// TestCrashApprovals: the crash property (TestCrashAnyStep) over worlds
// whose tools always ask for approval and whose person decides — in time,
// late, twice, for other arguments, after a cancel — crashed after one to
// three drawn steps: no denied, expired or withdrawn call ever runs, no
// approved call that is not idempotent runs twice, no request is lost by a
// recovery or answered twice (I27–I31 and I14, judged after every step of
// the stitched run). rapid's 100 worlds in `make test`; 5,000 in `make
// soak` (SOAK_APPROVAL_CHECKS).
func TestCrashApprovals(t *testing.T) {
	o := gen.DefaultOptions(4)
	o.AlwaysAsk = true
	rapid.Check(t, func(t *rapid.T) {
		c := drawCrash(t, o, nil)
		if len(c.s.KernelAsk()) == 0 {
			t.Fatalf("a world drawn to ask asks about no tool:\n%s", c.s.YAML())
		}
		r := runCrash(t, c, nil)
		if !r.Passed {
			t.Fatalf("crashed after steps %v of %d (idempotent %v): %d violation(s); first: %s\nreproduce: %s %s\n%s",
				c.at, c.events, c.idempotent, len(r.Violations), r.Violations[0], writeFailure(c.s, r),
				sweep.SimFlags(sim.Options{CrashAt: c.at, Idempotent: c.idempotent}), c.s.YAML())
		}
	})
}
