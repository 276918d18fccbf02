package spans_test

import (
	"fmt"
	"strings"

	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
)

// Example derives the spans of a turn in which the root delegates to a
// child that reads a file, step by step, as a live observer would (here
// the simulator's steps): each span as it ends — the spans under it
// first — with its number and a dot per level it nests.
func Example() {
	s, err := scenario.Load("example.yaml", []byte(`name: example
agents:
  main:
    - calls: [{delegate: reader, prompt: "read the notes"}]
    - {text: "The notes say ship it."}
  reader:
    - calls: [{tool: read_file, args: {path: notes.txt}}]
    - {text: "ship it"}
tools:
  read_file: {duration: 50ms, result: "ship it"}
inputs:
  - {at: 0s, submit: "what do the notes say?"}
`))
	if err != nil {
		panic(err)
	}
	d := spans.New(spans.Config{RootName: "main", Model: "gpt-4o"})
	depth := map[spans.ID]int{}
	_, err = sim.Run(s, sim.Options{Observe: func(si sim.StepInfo) {
		for _, c := range d.Step(si.Event, si.Effects) {
			switch c.Kind {
			case spans.Started:
				if c.Span.Parent != 0 {
					depth[c.Span.ID] = depth[c.Span.Parent] + 1
				}
			case spans.Ended:
				fmt.Printf("%d %s%s [%v, %v]\n", c.Span.ID, strings.Repeat(". ", depth[c.Span.ID]), c.Span.Name(), c.Span.Start, c.Span.End)
			}
		}
	}})
	if err != nil {
		panic(err)
	}
	// Output:
	// 2 . chat gpt-4o [0s, 260ms]
	// 5 . . . chat gpt-4o [260ms, 520ms]
	// 6 . . . execute_tool read_file [520ms, 570ms]
	// 7 . . . chat gpt-4o [570ms, 810ms]
	// 4 . . invoke_agent reader [260ms, 810ms]
	// 3 . execute_tool delegate reader [260ms, 810ms]
	// 8 . chat gpt-4o [810ms, 1.11s]
	// 1 invoke_agent main [0s, 1.11s]
}
