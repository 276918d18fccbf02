package scenario

import (
	"encoding/json"
	"testing"
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
		if got, _ := appendArgsJSON([]byte("pre"), m); string(got) != "pre"+string(want) {
			t.Errorf("appendArgsJSON(pre, %#v) = %s, want pre%s", m, got, want)
		}
	}
	for _, s := range []string{"", "plain", odd, "a<b", "x&y>z"} {
		want, _ := json.Marshal(s)
		if got := appendJSONHTML([]byte("pre"), s); string(got) != "pre"+string(want) {
			t.Errorf("appendJSONHTML(%q) = %s, want pre%s", s, got, want)
		}
	}
}
