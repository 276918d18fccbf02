package sim_test

import (
	"fmt"
	"log"
	"maps"
	"slices"

	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
)

// world is a whole world in YAML (the format is in docs/scenarios.md, "Scenario
// format"): the root delegates to a child whose tool ignores its cancel, and
// the user presses Esc while that tool runs.
const world = `
name: esc-during-child-tool
seed: 1
limits: {grace: 2s}
agents:
  main:
    - text: "Let me ask a helper."
      calls: [{delegate: searcher, prompt: "find TODOs"}]
  searcher:
    - calls: [{tool: grep, args: {pattern: TODO}}]
tools:
  grep: {duration: 30s, on_cancel: ignore, result: "3 matches"}
inputs:
  - {at: 0s, submit: "clean up the TODOs"}
  - {at: 5s, cancel: main}
expect:
  outcomes: {main: interrupted, searcher: interrupted}
  llm_requests: {main: 1, searcher: 1}
  quiescent_by: 7100ms
  history:
    main: {marker: true, contains: ["clean up the TODOs"]}
`

// Example loads a scenario from a string and runs it: a virtual clock, the
// scripted models and tool, and the oracle checking every invariant of
// docs/semantics.md after every step. Run is deterministic: the same
// scenario always gives the same Result and the same trace bytes.
func Example() {
	s, err := scenario.Load("example.yaml", []byte(world))
	if err != nil {
		log.Fatal(err) // names example.yaml:line:col and the field
	}
	res, err := sim.Run(s, sim.Options{})
	if err != nil {
		log.Fatal(err) // the run itself failed; violations are in res
	}
	fmt.Println(res.Name, "passed:", res.Passed)
	for _, v := range res.Violations {
		fmt.Println(v)
	}
	for _, path := range slices.Sorted(maps.Keys(res.Outcomes)) {
		fmt.Printf("%-14s %-12s %d request(s)\n", path, res.Outcomes[path], res.LLMRequests[path])
	}
	fmt.Println("quiescent at", res.QuiescentAt, "after", res.Events, "events")
	// Output:
	// esc-during-child-tool passed: true
	// main           interrupted  1 request(s)
	// main/searcher  interrupted  1 request(s)
	// quiescent at 7s after 17 events
}

// Example_violation shows what a failed expectation looks like: the
// violation names the check, the virtual time and the agent. An invariant
// broken by the agent loop itself reads the same way (see Options.Core).
func Example_violation() {
	s, err := scenario.Load("wrong.yaml", []byte(`
name: wrong-expectation
agents:
  main: [{text: "Hello."}]
inputs: [{at: 0s, submit: "hi"}, {at: 100ms, cancel: main}]
expect: {outcomes: {main: completed}}
`))
	if err != nil {
		log.Fatal(err)
	}
	res, err := sim.Run(s, sim.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("passed:", res.Passed, "exit code:", sim.ExitCode([]*sim.Result{res}))
	for _, v := range res.Violations {
		fmt.Println(v)
	}
	// Output:
	// passed: false exit code: 1
	// expect @105ms : outcomes.main: interrupted, want completed
}

// ExampleLoad_error: bad input is refused with the file, line, column and
// field path, before anything runs.
func ExampleLoad_error() {
	_, err := scenario.Load("typo.yaml", []byte(`
name: typo
agents:
  main: [{text: "Hi.", frist_token: 1s}]
`))
	fmt.Println(err)
	// Output:
	// typo.yaml:4:24: agents.main[0]: unknown field "frist_token" (known: calls, first_token, rate, text)
}
