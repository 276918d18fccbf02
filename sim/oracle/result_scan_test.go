package oracle

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/escapement/escapement/kernel"
	"pgregory.net/rapid"
)

// resultPieces are what drawn results are made of: the kernel's own field
// names and values, and every kind of byte on which flatObject's form and
// encoding/json's could part ways.
var resultPieces = []string{
	`{`, `}`, `"`, `:`, `,`, ` `, `\`, `\"`, `\n`, `\u0041`, `\u2028`, "\u2028", "\u2029", "\x00", "\n", "\x7f", "\xff", "\xe2\x80",
	"é", "\uFFFD", `<`, `&`, `0`, `-`, `1`, `9`, `01`, `-0`, `1.5`, `1e3`, `9223372036854775808`, `null`, `true`, `[`, `]`,
	`"type"`, `"agent"`, `"outcome"`, `"status"`, `"reason"`, `"summary"`, `"partial"`, `"error"`, `"limit"`, `"note"`, `"approval"`, `"Type"`, `"LIMIT"`, `"other"`, `""`,
	`"tool_aborted"`, `"cancelled"`, `"user_cancel"`, `"x y"`, `"a\"b"`, `"3"`,
}

// realResults are results as the kernel writes them.
var realResults = []string{
	`{"type":"tool_aborted","status":"cancelled","reason":"user_cancel"}`,
	`{"type":"tool_error","status":"refused","reason":"max_calls","limit":3}`,
	`{"type":"agent_result","agent":"root/c1","outcome":"failed","reason":"llm_error","partial":"hé","error":"boom"}`,
	`{"type":"tool_not_approved","status":"denied","reason":"approval_denied","note":"not now"}`,
	`{"type":"tool_aborted","status":"cancelled","reason":"turn_timeout","approval":"withdrawn"}`,
}

// drawResult is a mutation of a real result (or pieces strung together).
func drawResult(t *rapid.T) string {
	s := rapid.SampledFrom(append(realResults, "")).Draw(t, "base")
	for range rapid.IntRange(0, 6).Draw(t, "edits") {
		at := rapid.IntRange(0, len(s)).Draw(t, "at")
		cut := rapid.IntRange(0, min(3, len(s)-at)).Draw(t, "cut")
		s = s[:at] + rapid.SampledFrom(resultPieces).Draw(t, "piece") + s[at+cut:]
	}
	return s
}

// TestFlatResultMatchesEncodingJSON: the oracle's allocation-free reading
// of results decides exactly as encoding/json does — what it calls
// canonical encoding/json writes back byte for byte, and what it parses
// json.Unmarshal parses to the same fields (and it parses nothing
// json.Unmarshal rejects).
func TestFlatResultMatchesEncodingJSON(t *testing.T) {
	rendered := 0
	agree := func(t interface{ Fatalf(string, ...any) }, s string) {
		if canonicalFlat(s) {
			rendered++
			if why := canonicalResultJSON(s); why != "" {
				t.Fatalf("flat path calls %q canonical; encoding/json: %s", s, why)
			}
		}
		var fast, slow resultContent
		okFast := parseResult(s, &fast)
		okSlow := json.Unmarshal([]byte(s), &slow) == nil
		if okFast != okSlow || (okSlow && fast != slow) {
			t.Fatalf("%q: parseResult %v %+v, json.Unmarshal %v %+v", s, okFast, fast, okSlow, slow)
		}
	}
	// Every single edit of a real result: one piece replacing up to three
	// bytes anywhere.
	for _, base := range append(realResults, `{"type":7,"limit":"7"}`) {
		for at := range len(base) + 1 {
			for cut := range min(3, len(base)-at) + 1 {
				for _, p := range resultPieces {
					agree(t, base[:at]+p+base[at+cut:])
				}
			}
		}
	}
	// And random strings of edits.
	rapid.Check(t, func(t *rapid.T) { agree(t, drawResult(t)) })
	if rendered == 0 {
		t.Fatal("no drawn result took the flat path")
	}
	// The kernel's own renderings take it (else it buys nothing).
	for _, s := range []string{
		`{"type":"tool_aborted","status":"timed_out","reason":"tool_timeout"}`,
		`{"type":"tool_error","status":"refused","reason":"max_depth","limit":2}`,
	} {
		if !canonicalFlat(s) {
			t.Errorf("%s does not take the flat path", s)
		}
	}
	// And a non-canonical result is still reported, with encoding/json's
	// reason.
	for s, want := range map[string]string{
		`{"type":"tool_error","error":""}`:   "field error is empty",
		`{"type": "tool_error"}`:             "written otherwise",
		`{"type":"a\u003cb"}`:                "written otherwise",
		`["tool_error"]`:                     "not a JSON object",
		kernel.MarkerPrefix + `outcome="x">`: "not a JSON object",
	} {
		if got := canonicalResult(s); !strings.Contains(got, want) {
			t.Errorf("canonicalResult(%s) = %q, want %q", s, got, want)
		}
	}
}
