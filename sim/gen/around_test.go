package gen

import (
	"bytes"
	"testing"

	"github.com/escapement/escapement/sim/scenario"
	"pgregory.net/rapid"
)

const aroundBase = `
name: base
agents:
  main:
    - text: "Working."
      calls: [{delegate: helper, prompt: "go"}, {tool: slow}]
  helper: [{text: "done"}]
tools:
  slow: {duration: 3s, on_cancel: ignore, result: "ok"}
faults: [{at: 1s, agent: main, fault: stream_error}]
inputs: [{at: 0s, submit: "hi"}]
expect: {outcomes: {main: completed}}
`

// TestAroundKeepsTheUsersWorld: Around draws inputs and faults around the
// base's own scripts, tools, limits and faults, drops the base's one story
// (inputs, expectations), and never modifies the base.
func TestAroundKeepsTheUsersWorld(t *testing.T) {
	base, err := scenario.Load("base.yaml", []byte(aroundBase))
	if err != nil {
		t.Fatal(err)
	}
	before := base.YAML()
	rapid.Check(t, func(t *rapid.T) {
		o := Options{MaxInputs: 6, Faults: rapid.Bool().Draw(t, "faults"), Shutdowns: true}
		s := Around(base, o).Draw(t, "world")
		if err := s.Validate(); err != nil {
			t.Fatalf("invalid world: %v\n%s", err, s.YAML())
		}
		if len(s.Inputs) == 0 || s.Inputs[0].Submit == "" || s.Inputs[0].At != 0 || len(s.Inputs) > o.MaxInputs+1 {
			t.Fatalf("inputs %+v: want a submission at 0 and at most %d more", s.Inputs, o.MaxInputs)
		}
		if len(s.Expect.Outcomes) != 0 {
			t.Fatalf("the base's expectations were kept: %+v", s.Expect)
		}
		if len(s.Faults) == 0 || s.Faults[0] != base.Faults[0] || (!o.Faults && len(s.Faults) != 1) {
			t.Fatalf("faults %+v: want the base's own first, drawn ones only with Options.Faults", s.Faults)
		}
		w, b := s.Clone(), base.Clone()
		w.Inputs, w.Faults, w.Expect = b.Inputs, b.Faults, b.Expect
		if !bytes.Equal(w.YAML(), before) {
			t.Fatalf("scripts, tools or limits changed:\n%s\nwant\n%s", w.YAML(), before)
		}
		if !bytes.Equal(base.YAML(), before) {
			t.Fatalf("Around modified its base:\n%s", base.YAML())
		}
	})
}
