package explore

import (
	"fmt"
	"strings"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/scenario"
)

// Shape is what one agent of a small-scope world does when asked: the
// grammar of small-scope mode (docs/oracle.md, "Exhaustive exploration").
type Shape byte

// The shapes. A delegating agent asks for its children (in parallel) and,
// once they answered, replies with text; a tool agent asks for one tool and
// then replies with text.
const (
	Text       Shape = 'T' // replies "hi there" (two chunks)
	ToolStop   Shape = 'S' // calls a 1s tool that stops when cancelled
	ToolIgnore Shape = 'I' // calls a 1s tool that ignores its cancel (abandoned after grace)
	Stall      Shape = 'H' // streams one chunk, then stalls past stall_timeout
	Delegate   Shape = 'D' // delegates to its children
)

// leafShapes are the shapes without children.
var leafShapes = []Shape{Text, ToolStop, ToolIgnore, Stall}

// Tree is an agent tree: a shape per agent; a Delegate has children.
type Tree struct {
	Shape    Shape
	Children []Tree
}

// String writes the tree as main's shape, children in brackets:
// "D[T,S]".
func (t Tree) String() string {
	if len(t.Children) == 0 {
		return string(t.Shape)
	}
	parts := make([]string, len(t.Children))
	for i, c := range t.Children {
		parts[i] = c.String()
	}
	return string(t.Shape) + "[" + strings.Join(parts, ",") + "]"
}

// Size is how many agents the tree holds.
func (t Tree) Size() int {
	n := 1
	for _, c := range t.Children {
		n += c.Size()
	}
	return n
}

// Trees enumerates every tree of at most maxAgents agents (1..3): a leaf
// shape, or a delegation to one or two children (two siblings as an
// unordered pair: their order is the order of their calls, which the
// exploration's orders already cover).
func Trees(maxAgents int) []Tree {
	var out []Tree
	var build func(budget int) []Tree
	build = func(budget int) []Tree {
		var ts []Tree
		for _, s := range leafShapes {
			ts = append(ts, Tree{Shape: s})
		}
		if budget >= 2 {
			for _, c := range build(budget - 1) {
				ts = append(ts, Tree{Shape: Delegate, Children: []Tree{c}})
			}
		}
		if budget >= 3 {
			for i, a := range leafShapes {
				for _, b := range leafShapes[i:] {
					ts = append(ts, Tree{Shape: Delegate, Children: []Tree{{Shape: a}, {Shape: b}}})
				}
			}
		}
		return ts
	}
	for _, t := range build(maxAgents) {
		if t.Size() <= maxAgents {
			out = append(out, t)
		}
	}
	return out
}

// World is one small-scope world: its scenario (no inputs) and the
// alphabet its input sequences are drawn from: a submission, an
// interjection, and a cancel of each agent.
type World struct {
	Tree     Tree
	Scenario *scenario.Scenario
	Alphabet []scenario.Input
}

// Sequences is how many input sequences of at most n inputs the alphabet
// makes (the empty one included).
func (w World) Sequences(n int) int {
	total, k := 0, 1
	for i := 0; i <= n; i++ {
		total += k
		k *= len(w.Alphabet)
	}
	return total
}

// Worlds builds the world of every tree of at most maxAgents agents.
func Worlds(maxAgents int) []World {
	var out []World
	for _, t := range Trees(maxAgents) {
		out = append(out, NewWorld(t))
	}
	return out
}

// The small-scope world's times: a 1s tool, a stall_timeout of 1s and a
// stalling stream whose second chunk would come after 2s.
const (
	toolTime     = time.Second
	stallTimeout = time.Second
)

// NewWorld writes tree t as a scenario: agent scripts a, b, c (main is the
// root), limits at their defaults but stall_timeout 1s.
func NewWorld(t Tree) World {
	lim := kernel.DefaultLimits()
	lim.StallTimeout = stallTimeout
	s := &scenario.Scenario{
		Name:   "small-" + strings.NewReplacer("[", "_", "]", "", ",", ".").Replace(t.String()),
		About:  "small-scope world " + t.String() + " (escapement sim explore --small-scope)",
		Seed:   1,
		Limits: lim,
		Agents: map[string]scenario.Script{},
		Tools: map[string]scenario.ToolSpec{
			"stops":   {Duration: toolTime, Result: "done"},
			"ignores": {Duration: toolTime, Result: "done", OnCancel: scenario.CancelIgnore},
		},
	}
	w := World{Tree: t, Scenario: s}
	w.Alphabet = []scenario.Input{{Submit: "go"}, {Interject: "also"}}
	names := []string{scenario.RootScript, "a", "b", "c"}
	next := 0
	var add func(t Tree) string
	add = func(t Tree) string {
		name := names[next]
		next++
		w.Alphabet = append(w.Alphabet, scenario.Input{Cancel: name})
		reply := func(text string, calls ...scenario.Call) scenario.Reply {
			return scenario.Reply{Text: text, FirstToken: scenario.DefaultFirstToken, Rate: scenario.DefaultRate, Calls: calls}
		}
		var script scenario.Script
		switch t.Shape {
		case Text:
			script = scenario.Script{reply("hi there")}
		case ToolStop, ToolIgnore:
			tool := "stops"
			if t.Shape == ToolIgnore {
				tool = "ignores"
			}
			script = scenario.Script{reply("", scenario.Call{Tool: tool}), reply("ok")}
		case Stall:
			r := reply("slow reply")
			r.Rate = 0.5 // a chunk every 2s: the stall deadline comes first
			script = scenario.Script{r}
		case Delegate:
			var calls []scenario.Call
			for _, c := range t.Children {
				child := add(c)
				calls = append(calls, scenario.Call{Delegate: child, Prompt: "task " + child})
			}
			script = scenario.Script{reply("", calls...), reply("done")}
		}
		s.Agents[name] = script
		return name
	}
	add(t)
	if err := s.Validate(); err != nil {
		panic(fmt.Sprintf("explore: small-scope world %s: %v", t, err))
	}
	return w
}
