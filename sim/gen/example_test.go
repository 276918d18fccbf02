package gen_test

import (
	"fmt"
	"strings"

	"pgregory.net/rapid"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/scenario"
)

// myAgents is a program's own agents: what its models answer and what its
// tools do, without the user's inputs (the property draws those).
const myAgents = `
name: review-bot
limits: {grace: 1s, tool_timeout: 20s}
agents:
  main:
    - text: "I will lint it and read the diff."
      calls:
        - {delegate: linter, prompt: "lint the change"}
        - {tool: read_diff}
    - text: "Two issues found."
  linter:
    - calls: [{tool: run_linter, args: {path: "."}}]
    - text: "2 warnings"
tools:
  read_diff: {duration: 300ms, result: "+ fmt.Println(x)"}
  run_linter: {duration: 8s, on_cancel: "delay 3s", result: "2 warnings"}
`

// myAgentsHold is the property: whatever the user types, cancels or
// interjects, whenever, and whatever faults the model and tools hit, every
// invariant of docs/semantics.md holds for these agents. In a test file it
// is one line, and rapid shrinks a failing world to a short one:
//
//	func TestMyAgents(t *testing.T) { rapid.Check(t, myAgentsHold) }
func myAgentsHold(t *rapid.T) {
	base, err := scenario.Load("my-agents.yaml", []byte(myAgents))
	if err != nil {
		t.Fatal(err)
	}
	opts := gen.Options{MaxInputs: 8, Faults: true, Shutdowns: true}
	world := gen.Around(base, opts).Draw(t, "world")
	res, err := sim.Run(world, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Error(v)
	}
	if !res.Passed {
		// The scenario file that reproduces it: escapement sim FILE.
		t.Fatalf("failing world:\n%s", world.YAML())
	}
}

// Example_property runs a user's own rapid property test over their own
// agent scripts: gen.Around draws the inputs and faults, sim.Run checks
// every invariant after every step. An Example has no *testing.T, so it
// hands rapid.Check a small rapid.TB that prints failures; a test passes
// its *testing.T instead (see myAgentsHold).
func Example_property() {
	t := &printTB{}
	rapid.Check(t, myAgentsHold)
	fmt.Println("property holds:", !t.Failed())
	// Output: property holds: true
}

// printTB is the rapid.TB of Example_property: failures and what follows
// them (rapid's replay of the shrunk world) are printed; rapid's line for a
// pass, which has a timing, is not.
type printTB struct{ failed bool }

func (p *printTB) Helper()      {}
func (p *printTB) Name() string { return "Example_property" }
func (p *printTB) Logf(f string, a ...any) {
	if p.failed {
		fmt.Printf(f+"\n", a...)
	}
}
func (p *printTB) Log(a ...any) {
	if p.failed {
		fmt.Println(a...)
	}
}
func (p *printTB) Skipf(f string, a ...any)  { p.Fatalf(f, a...) }
func (p *printTB) Skip(a ...any)             { p.Fatal(a...) }
func (p *printTB) SkipNow()                  { p.FailNow() }
func (p *printTB) Errorf(f string, a ...any) { p.failed = true; fmt.Printf(f+"\n", a...) }
func (p *printTB) Error(a ...any)            { p.failed = true; fmt.Println(strings.TrimSpace(fmt.Sprint(a...))) }
func (p *printTB) Fatalf(f string, a ...any) { p.Errorf(f, a...); p.FailNow() }
func (p *printTB) Fatal(a ...any)            { p.Error(a...); p.FailNow() }
func (p *printTB) FailNow()                  { p.failed = true } // rapid calls it last
func (p *printTB) Fail()                     { p.failed = true }
func (p *printTB) Failed() bool              { return p.failed }
