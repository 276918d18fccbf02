package sim_test

import (
	"testing"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/explore"
	"github.com/escapement/escapement/sim/scenario"
)

// expiryRace: an approval given at the very instant the call's wait
// expires (approval_timeout 2s from its asking at 260ms).
const expiryRace = `name: approval-expiry-race
limits: {approval_timeout: 2s}
agents:
  main:
    - calls: [{tool: shell, args: {n: 1}, id: c1}]
    - {text: done}
tools:
  shell: {duration: 1s, result: ran, approval: required}
inputs:
  - {at: 0s, submit: go}
  - {at: 2260ms, approve: c1}
`

// TestExploreFindsApprovalRace: a decision and its wait's expiry due at
// one instant may come in either order; a plain run delivers the decision
// first, and only exploring the instant's orders (sim explore) reaches the
// other — where a loop that judges staleness by the clock ends the wait
// twice (I28). The real kernel passes every order: approved one way,
// expired and then stale the other.
func TestExploreFindsApprovalRace(t *testing.T) {
	s, err := scenario.Load("race.yaml", []byte(expiryRace))
	if err != nil {
		t.Fatal(err)
	}
	loop := sim.ExpiryRaceLoop()
	if r, err := sim.Run(s, sim.Options{Core: loop.Core}); err != nil || !r.Passed {
		t.Fatalf("a plain run must miss it (the decision comes first): %v %v", err, r.Violations)
	}
	good, err := explore.Scenario(s, explore.Options{MaxInputs: 0})
	if err != nil {
		t.Fatal(err)
	}
	if good.Violation != nil || good.Stopped != "" || good.Schedules < 2 {
		t.Fatalf("the kernel: want every order clean, more than one: %+v", good)
	}
	bad, err := explore.Scenario(s, explore.Options{MaxInputs: 0, Core: loop.Core})
	if err != nil {
		t.Fatal(err)
	}
	if bad.Violation == nil || bad.Violation.First.Invariant != loop.Invariant {
		t.Fatalf("%s: explore found %+v", loop.Failure, bad.Violation)
	}
	t.Logf("%s → %s; reproduce with:\n%s", loop.Failure, bad.Violation.First, bad.Violation.Scenario.YAML())
}
