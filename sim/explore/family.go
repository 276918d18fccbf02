package explore

import (
	"fmt"
	"strings"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/scenario"
)

// The everyday family: scenarios of the size users write — two or three
// agents, a tool, streams of up to ten chunks, up to seven user inputs —
// generated on a grid (chunks × inputs × agents) so that how exploration
// scales can be measured again and again (docs/semantics.md,
// "Exploration"; `escapement sim explore --family`).

// Tree shapes of the family.
const (
	// Pair: main calls a tool and delegates to one helper.
	Pair = "pair"
	// Chain: main delegates to a, which calls a tool and delegates to b.
	Chain = "chain"
	// Fan: main calls a tool and delegates to a and b at once; their
	// streams run side by side, chunk for chunk in the same instants.
	Fan = "fan"
)

// Everyday names one member of the family.
type Everyday struct {
	Shape  string // Pair, Chain or Fan
	Chunks int    // text chunks of every stream (1..10)
	Inputs int    // user inputs (1..7): a submission first, then the everyday ones
}

// Agents is how many agents the shape holds.
func (e Everyday) Agents() int {
	if e.Shape == Pair {
		return 2
	}
	return 3
}

func (e Everyday) String() string {
	return fmt.Sprintf("everyday-%s-c%d-i%d", e.Shape, e.Chunks, e.Inputs)
}

// FamilyChunks, FamilyInputs and FamilyShapes span the grid Family walks.
var (
	FamilyChunks = []int{2, 5, 10}
	FamilyInputs = []int{1, 3, 5, 7}
	FamilyShapes = []string{Pair, Chain, Fan}
)

// Family is every member of the grid, smallest first.
func Family() []Everyday {
	var out []Everyday
	for _, shape := range FamilyShapes {
		for _, c := range FamilyChunks {
			for _, n := range FamilyInputs {
				out = append(out, Everyday{Shape: shape, Chunks: c, Inputs: n})
			}
		}
	}
	return out
}

// everydayInputs are the user's actions, in time order: ask, add a detail
// while the first reply streams, stop the helper, add another detail,
// stop everything, ask again, add a last detail. The first n are used.
var everydayInputs = []scenario.Input{
	{At: 0, Submit: "find the bug"},
	{At: 250 * time.Millisecond, Interject: "it is in the parser"},
	{At: 900 * time.Millisecond, Cancel: "helper"},
	{At: 1300 * time.Millisecond, Interject: "and explain it"},
	{At: 2 * time.Second, Cancel: scenario.RootScript},
	{At: 2500 * time.Millisecond, Submit: "try again"},
	{At: 2700 * time.Millisecond, Interject: "briefly"},
}

// Scenario writes e. It panics on a member outside the grid's ranges.
func (e Everyday) Scenario() *scenario.Scenario {
	if e.Chunks < 1 || e.Chunks > 10 || e.Inputs < 1 || e.Inputs > len(everydayInputs) {
		panic(fmt.Sprintf("explore: everyday member %+v out of range", e))
	}
	words := make([]string, e.Chunks)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i+1)
	}
	text := strings.Join(words, " ")
	reply := func(text string, calls ...scenario.Call) scenario.Reply {
		return scenario.Reply{Text: text, FirstToken: scenario.DefaultFirstToken, Rate: scenario.DefaultRate, Calls: calls}
	}
	tool := scenario.Call{Tool: "search", Args: map[string]any{"q": "bug"}}
	s := &scenario.Scenario{
		Name:   e.String(),
		About:  fmt.Sprintf("everyday family: %s tree, %d chunks a stream, %d inputs (escapement sim explore --family)", e.Shape, e.Chunks, e.Inputs),
		Seed:   1,
		Limits: kernel.DefaultLimits(),
		Tools:  map[string]scenario.ToolSpec{"search": {Duration: time.Second, Result: "3 hits", OnCancel: scenario.CancelDelay, CancelDelay: 200 * time.Millisecond}},
		Inputs: append([]scenario.Input(nil), everydayInputs[:e.Inputs]...),
	}
	switch e.Shape {
	case Pair:
		s.Agents = map[string]scenario.Script{
			scenario.RootScript: {reply(text, tool, scenario.Call{Delegate: "helper", Prompt: "read the code"}), reply(text), reply("ok")},
			"helper":            {reply(text), reply("again")},
		}
	case Chain:
		s.Agents = map[string]scenario.Script{
			scenario.RootScript: {reply(text, scenario.Call{Delegate: "helper", Prompt: "find it"}), reply(text), reply("ok")},
			"helper":            {reply("", tool, scenario.Call{Delegate: "reader", Prompt: "read the code"}), reply(text), reply("again")},
			"reader":            {reply(text), reply("again")},
		}
	case Fan:
		s.Agents = map[string]scenario.Script{
			scenario.RootScript: {reply("", tool, scenario.Call{Delegate: "helper", Prompt: "read a"}, scenario.Call{Delegate: "reader", Prompt: "read b"}), reply(text), reply("ok")},
			"helper":            {reply(text), reply("again")},
			"reader":            {reply(text), reply("again")},
		}
	default:
		panic(fmt.Sprintf("explore: everyday shape %q", e.Shape))
	}
	if err := s.Validate(); err != nil {
		panic(fmt.Sprintf("explore: everyday member %s: %v", e, err))
	}
	return s
}
