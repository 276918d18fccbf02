package sim

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/kernel"
)

// TestArgsJSON: the reflection-free rendering of call arguments is byte for
// byte json.Marshal's, on the flat maps it handles itself and on the values
// it hands over.
func TestArgsJSON(t *testing.T) {
	odd := "quote \" back \\ nl \n tab \t ctrl \x01 \b \f é ✓ sep \u2028 <html>&amp; bad \xff"
	cases := []map[string]any{
		nil,
		{},
		{"n": 1},
		{"b": true, "a": false, "c": nil, "d": -42, "e": "x"},
		{odd: odd, "<k>": "&"},
		{"f": 1.5},                                   // float: json.Marshal
		{"nested": map[string]any{"z": 1, "a": "<"}}, // nested: json.Marshal
		{"list": []any{1, "two", nil}},
		{"big": 1 << 62},
	}
	for _, m := range cases {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := argsJSON(m)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("argsJSON(%#v)\n got %s\nwant %s", m, got, want)
		}
	}
	for _, s := range []string{"", "plain", odd, "a<b", "x&y>z"} {
		want, _ := json.Marshal(s)
		if got := appendJSONHTML([]byte("pre"), s); string(got) != "pre"+string(want) {
			t.Errorf("appendJSONHTML(%q) = %s, want pre%s", s, got, want)
		}
	}
}

// TestOpTable: ops below and above the dense bound are found, missing ones
// are nil, and ids come back in increasing order across both parts.
func TestOpTable(t *testing.T) {
	var tab opTable
	ids := []kernel.OpID{denseOps + 7, 3, 1, denseOps, 1 << 62, denseOps - 1}
	for i, id := range ids {
		tab.set(id, &opObs{agent: kernel.AgentID(i)})
	}
	for i, id := range ids {
		if op := tab.get(id); op == nil || op.agent != kernel.AgentID(i) {
			t.Fatalf("get(%d) = %+v", id, op)
		}
	}
	for _, id := range []kernel.OpID{0, 2, 4, denseOps + 1, 1<<62 + 1} {
		if op := tab.get(id); op != nil {
			t.Fatalf("get(%d) = %+v, want nil", id, op)
		}
	}
	want := []kernel.OpID{1, 3, denseOps - 1, denseOps, denseOps + 7, 1 << 62}
	if got := tab.ids(); !slices.Equal(got, want) {
		t.Fatalf("ids() = %v, want %v", got, want)
	}
}

// TestStreamTokens: the world streams a reply's text a token at a time, each
// token a word with the space after it, and the chunks concatenate back to
// the text (leading, doubled and trailing spaces included); calls follow
// the text.
func TestStreamTokens(t *testing.T) {
	texts := []string{"one", "one two", "one two ", " lead", "a  b", "  ", "x y z  w   ", "a b c d e f g h"}
	for _, fault := range []string{"", "faults:\n  - {at: 0s, agent: main, fault: duplicate_event}\n"} {
		for _, text := range texts {
			streamTokens(t, text, fault)
		}
	}
}

// streamTokens runs one reply of text (under fault, if any) and checks its
// chunks; a chunk delivered twice (a duplicate_event fault) counts once.
func streamTokens(t *testing.T, text, fault string) {
	t.Helper()
	src := "name: tokens\nagents:\n  main:\n    - text: " + jsonString(text) + "\n      calls: [{tool: t}]\n    - text: done\ntools:\n  t: {duration: 1s, result: ok}\ninputs:\n  - {at: 0s, submit: go}\n" + fault
	s := mustLoad(t, src)
	var got []string
	seen := map[uint32]bool{}
	calls, dups, afterCall := 0, 0, false
	mustRun(t, s, Options{Observe: func(si StepInfo) {
		ev := si.Event
		if ev.Kind != kernel.EvLLMDelta || ev.Op != 2 {
			return // the first request only
		}
		if seen[ev.Chunk] {
			dups++ // each chunk once
			return
		}
		seen[ev.Chunk] = true
		if ev.Call != nil {
			calls++
			return
		}
		if calls > 0 {
			afterCall = true
		}
		got = append(got, ev.Text)
	}})
	want := 0
	for rest := text; rest != ""; rest = rest[len(nextToken(rest)):] {
		want++
	}
	if (fault != "") != (dups > 0) {
		t.Errorf("text %q (fault %q): %d chunks delivered twice", text, fault, dups)
	}
	if joined := strings.Join(got, ""); joined != text || len(got) != want || calls != 3 || afterCall {
		t.Errorf("text %q (fault %q): streamed %q (%d chunks, want %d) and %d call fragments (want 3, after the text)", text, fault, got, len(got), want, calls)
	}
}
