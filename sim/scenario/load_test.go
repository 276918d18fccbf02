package scenario

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

const goodHead = `name: t
agents:
  main:
    - text: hi
      calls: [{delegate: child, prompt: go}, {tool: grep, args: {p: x}}]
  child:
    - text: ok
tools:
  grep: {duration: 1s, result: r}
`

// TestBadScenarios: each kind of bad input names file:line and what is wrong.
func TestBadScenarios(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, where, msg string
	}{
		{"unknown field", "name: t\nagents: {main: []}\nbogus: 1\n", "bad.yaml:3:1:", `unknown field "bogus"`},
		{"unknown nested field", "name: t\nagents:\n  main:\n    - text: hi\n      colour: red\n", "bad.yaml:5:7:", `unknown field "colour"`},
		{"wrong type", "name: t\nseed: seven\nagents: {main: []}\n", "bad.yaml:2:7:", "want a whole number"},
		{"wrong type list", "name: t\nagents: {main: {text: hi}}\n", "bad.yaml:2:16:", "want a list"},
		{"negative duration", "name: t\nlimits: {grace: -2s}\nagents: {main: []}\n", "bad.yaml:2:17:", "negative duration"},
		{"not a duration", "name: t\nlimits: {grace: 2}\nagents: {main: []}\n", "bad.yaml:2:17:", "duration in Go syntax"},
		{"unknown script", "name: t\nagents:\n  main:\n    - calls: [{delegate: ghost, prompt: boo}]\n", "bad.yaml:4:", `unknown script "ghost"`},
		{"unknown tool", "name: t\nagents:\n  main:\n    - calls: [{tool: hammer}]\n", "bad.yaml:4:", `unknown tool "hammer"`},
		{"missing name", "agents: {main: []}\n", "bad.yaml:1:1:", "name: required"},
		{"input unknown agent", goodHead + "inputs:\n  - {at: 0s, submit: go}\n  - {at: 1s, cancel: ghost}\n", "bad.yaml:12:", `no script named "ghost"`},
		{"fault unknown agent", goodHead + "faults:\n  - {at: 0s, agent: nobody, fault: hang}\n", "bad.yaml:11:", `no script named "nobody"`},
		{"unknown fault", goodHead + "faults:\n  - {at: 0s, agent: main, fault: meteor}\n", "bad.yaml:11:", `unknown fault "meteor"`},
		{"missing root", "name: t\nagents: {other: []}\n", "bad.yaml:2:", `root script "main" is missing`},
		{"duplicate key", "name: t\nname: u\nagents: {main: []}\n", "bad.yaml:2:1:", "given twice"},
		{"syntax", "name: t\nagents: [\n", "bad.yaml:2:", "YAML syntax"},
		{"bad on_cancel", strings.Replace(goodHead, "result: r}", "result: r, on_cancel: sulk}", 1), "bad.yaml:9:", "on_cancel"},
		{"inputs out of order", goodHead + "inputs:\n  - {at: 2s, submit: a}\n  - {at: 1s, submit: b}\n", "bad.yaml:12:", "before the previous input"},
		{"two actions", goodHead + "inputs:\n  - {at: 0s, submit: a, cancel: main}\n", "bad.yaml:11:", "exactly one of"},
		{"bad outcome", goodHead + "expect:\n  outcomes: {main: exploded}\n", "bad.yaml:11:", `unknown outcome "exploded"`},
		{"bad limit", "name: t\nlimits: {max_requests: 0}\nagents: {main: []}\n", "bad.yaml:2:", "max_requests"},
		{"empty", "", "bad.yaml:1:", "empty scenario"},
		{"two documents", "name: t\nagents: {main: []}\n---\nname: u\n", "bad.yaml:3:", "more than one YAML document"},
		{"args not JSON", "name: t\nagents:\n  main:\n    - calls: [{tool: x, args: {v: .nan}}]\ntools: {x: {duration: 1s}}\n", "bad.yaml:4:", "not representable as JSON"},
		{"expect line per section", goodHead + "expect:\n  outcomes: {main: completed}\n  llm_requests:\n    main: -1\n  history:\n    main: {marker: true}\n", "bad.yaml:13:", "must not be negative"},
		{"call with both", "name: t\nagents:\n  main:\n    - calls: [{tool: x, delegate: y}]\ntools: {x: {duration: 1s}}\n", "bad.yaml:4:", "exactly one of tool or delegate"},
		{"nameless tool call", "name: t\nagents:\n  main:\n    - calls: [{tool: x, nameless: true}]\ntools: {x: {duration: 1s}}\n", "bad.yaml:4:", "nameless belong to delegate calls"},
		{"nameless other script", "name: t\nagents:\n  main:\n    - calls: [{delegate: y, nameless: true}]\n  y: []\n", "bad.yaml:4:", `a nameless delegation runs the script "agent", not "y"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("bad.yaml", []byte(tc.yaml))
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("want a *LoadError, got %v", err)
			}
			if !strings.HasPrefix(err.Error(), tc.where) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %q\nwant prefix %q containing %q", err, tc.where, tc.msg)
			}
		})
	}
}

// FuzzLoad: the loader never panics and only returns *LoadError, which
// names a line; whatever it accepts is valid and survives the canonical
// round trip. CI runs it for a few seconds (make fuzz).
func FuzzLoad(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Load("fuzz.yaml", data)
		if err != nil {
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if le.Line < 1 && len(data) <= MaxScenarioBytes {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("loaded, yet invalid: %v", err)
		}
		// The canonical form (what a trace header embeds) loads back to a
		// scenario with the same canonical form.
		back, err := Load("again.yaml", s.YAML())
		if err != nil {
			t.Fatalf("canonical form does not load: %v\n%s", err, s.YAML())
		}
		if !bytes.Equal(back.YAML(), s.YAML()) {
			t.Fatalf("canonical form changes on reload:\n%s\n---\n%s", s.YAML(), back.YAML())
		}
	})
}

// TestPruneKeepsReferencedScripts: shrinking drops scripts nothing uses, but
// keeps one an expectation or a path names, so the pruned world still loads.
func TestPruneKeepsReferencedScripts(t *testing.T) {
	s := mustLoad(t, "name: p\nagents:\n  main: [{text: hi}]\n  ghost: [{text: boo}]\n  extra: [{text: x}]\n  deep: [{text: d}]\n"+
		"inputs:\n  - {at: 0s, submit: go}\n  - {at: 1s, cancel: main/deep}\nexpect:\n  outcomes: {ghost: completed}\n")
	c := s.Pruned()
	if c == nil {
		t.Fatal("nothing pruned")
	}
	if _, ok := c.Agents["extra"]; ok {
		t.Fatal("an unused script was kept")
	}
	for _, keep := range []string{"ghost", "deep"} {
		if _, ok := c.Agents[keep]; !ok {
			t.Fatalf("script %q is referenced but was pruned", keep)
		}
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("pruned world is invalid: %v", err)
	}
}
