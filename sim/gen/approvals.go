package gen

import (
	"sort"
	"strconv"
	"time"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
	"pgregory.net/rapid"
)

// Approvals in generated worlds (docs/semantics.md, "Approvals"): now and
// then a world's tools ask for approval, and a person decides — or does
// not — at instants that matter: as a call starts to wait, just after, late
// (after approval_timeout), twice, for other arguments, for a call of
// another agent or one that never asked, after a cancel. All of it is
// drawn after everything else of a world (World), so a seed's world is
// what it was before approvals existed, with decisions added.

// decisionKinds are what a drawn decision says; the first is what
// shrinking moves towards.
var decisionKinds = []func(in *scenario.Input, call string){
	func(in *scenario.Input, call string) { in.Approve = call },
	func(in *scenario.Input, call string) { in.Deny = call },
	func(in *scenario.Input, call string) { in.Deny, in.Note = call, "not now" },
	func(in *scenario.Input, call string) { in.Approve, in.Digest = call, scenario.WrongDigest },
	func(in *scenario.Input, call string) { in.Approve, in.For = call, scenario.GrantArgs },
	func(in *scenario.Input, call string) { in.Approve, in.For = call, scenario.GrantTool },
	func(in *scenario.Input, call string) { in.Deny, in.Digest = call, scenario.WrongDigest },
	func(in *scenario.Input, call string) { in.Approve = call },
}

// drawApprovals draws, in about one world of three (every world with
// always), which tools ask (now and then all of them), the
// world's approval_timeout and the person's decisions, and adds the
// decisions to its inputs (in time order, after inputs of the same
// instant).
func drawApprovals(t *rapid.T, s *scenario.Scenario, always bool) {
	if intRange(t, 0, 2, "approvals") != 2 && !always {
		return
	}
	if intRange(t, 0, 4, "ask_all") == 4 {
		s.Ask = []string{scenario.AskAll} // every tool; the delegate tool never asks
	} else {
		tools := keys.Sorted(s.Tools)
		nAsking := 0
		for i, name := range tools {
			if i == len(tools)-1 && nAsking == 0 || drawBool(t, "asks_"+name) {
				spec := s.Tools[name]
				spec.Approval = scenario.ApprovalRequired
				s.Tools[name] = spec
				nAsking++
			}
		}
	}
	s.Limits.ApprovalTimeout = pick(t, []time.Duration{5 * time.Minute, 2 * time.Second, 10 * time.Second, ms(500)}, "approval_timeout")
	waits := observedWaits(s)
	var cancels []time.Duration
	for _, in := range s.Inputs {
		if in.Cancel != "" || in.Shutdown {
			cancels = append(cancels, in.At)
		}
	}
	names := keys.Sorted(s.Agents)
	var ds []scenario.Input
	for i, n := 0, intRange(t, 0, 5, "decisions"); i < n; i++ {
		in := drawDecision(t, i, names, waits, cancels)
		ds = append(ds, in)
		if drawBool(t, "again_"+strconv.Itoa(i)) { // a duplicate, or a change of mind
			again := in
			again.At += grid * time.Duration(pick(t, []int{0, 1, 10}, "again_gap"))
			ds = append(ds, again)
		}
	}
	s.Inputs = append(s.Inputs, ds...)
	sort.SliceStable(s.Inputs, func(a, b int) bool { return s.Inputs[a].At < s.Inputs[b].At })
}

// drawDecision draws decision i: mostly for a call that asked when the
// world ran without decisions (by its agent's path and call id), at an
// instant of its wait — as it began, just after, half-way, at its expiry
// (the two race), late — and now and then for any id of any agent (a
// call that never asked, another agent's) or after a cancel; and what it
// says.
func drawDecision(t *rapid.T, i int, names []string, waits []waitSeen, cancels []time.Duration) scenario.Input {
	lb := "decision_" + strconv.Itoa(i)
	var in scenario.Input
	call := "t" + strconv.Itoa(intRange(t, 1, 3, lb+"_call"))
	in.Agent = pick(t, names, lb+"_agent")
	in.At = grid * time.Duration(intRange(t, 0, 300, lb+"_phase"))
	if len(waits) > 0 && intRange(t, 0, 3, lb+"_aimed") != 3 {
		w := waits[intRange(t, 0, len(waits)-1, lb+"_wait")]
		in.Agent, call = w.path, w.call
		in.At = w.at + pick(t, []time.Duration{0, ms(1), grid, w.delay / 2, w.delay, w.delay + grid}, lb+"_when")
	} else if len(cancels) > 0 && drawBool(t, lb+"_after_cancel") {
		in.At = cancels[intRange(t, 0, len(cancels)-1, lb+"_cancel")] + pick(t, []time.Duration{0, grid}, lb+"_cancel_gap")
	}
	if in.Agent == scenario.RootScript {
		in.Agent = ""
	}
	pick(t, decisionKinds, lb+"_kind")(&in, call)
	return in
}

// waitSeen is a wait for approval a run showed: its agent's path, the
// call, when it began and how long it could last.
type waitSeen struct {
	path, call string
	at, delay  time.Duration
}

// observedWaits runs s as it stands (no decision yet) and lists the waits
// for approval it shows, in the order they began: where a person would
// answer (nil when the run fails to run).
func observedWaits(s *scenario.Scenario) []waitSeen {
	var out []waitSeen
	_, err := sim.Run(s.Clone(), sim.Options{NoTrace: true, Observe: func(st sim.StepInfo) {
		for _, e := range st.Effects {
			if l := &e.Life; e.Kind == kernel.EffEmit && l.Kind == kernel.LifeApprovalRequested && st.Event.Kind != kernel.EvRecover {
				out = append(out, waitSeen{st.Core.AgentPath(l.Agent), l.CallID, st.Event.At, l.Delay})
			}
		}
	}})
	if err != nil {
		return nil
	}
	return out
}
