package headless_test

import (
	"errors"
	"testing"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/headless"
)

// TestStdinDecides: only run --json with its prompt as an argument reads
// decision lines from text stdin; a prompt from stdin keeps stdin its.
func TestStdinDecides(t *testing.T) {
	for _, c := range []struct {
		args          []string
		jsonOut, json bool
		want          bool
	}{
		{[]string{"hi"}, true, false, true},
		{[]string{"hi"}, false, false, false}, // run without --json: as it was
		{[]string{"-"}, true, false, false},   // the prompt is stdin's
		{nil, true, false, false},             // no PROMPT: stdin's, or --resume
		{[]string{"hi"}, true, true, false},   // --input-format json reads every line
	} {
		if got := headless.StdinDecides(c.args, c.jsonOut, c.json); got != c.want {
			t.Errorf("StdinDecides(%q, json %v, input json %v) = %v, want %v", c.args, c.jsonOut, c.json, got, c.want)
		}
	}
}

// TestParseDecisionInput: with decisionsOnly, messages, interjections,
// cancels and text are refused with ErrNotDecision; decisions parse (a
// malformed one is refused with ParseInput's reason).
func TestParseDecisionInput(t *testing.T) {
	for _, line := range []string{`hello`, `{"message":"hi"}`, `{"interject":"hi"}`, `{"cancel":""}`, `{"queue":"x"}`} {
		if _, err := headless.ParseDecisionInput(line, true); !errors.Is(err, headless.ErrNotDecision) {
			t.Errorf("%s: %v, want ErrNotDecision", line, err)
		}
	}
	if in, err := headless.ParseDecisionInput(`{"deny":"call_1","note":"no"}`, true); err != nil || in.Kind != protocol.InputDeny || in.Note != "no" {
		t.Errorf("deny: %+v %v", in, err)
	}
	if _, err := headless.ParseDecisionInput(`{"approve":"call_1"}`, true); err == nil || errors.Is(err, headless.ErrNotDecision) {
		t.Errorf("approve without digest: %v, want ParseInput's refusal", err)
	}
	if in, err := headless.ParseDecisionInput(`{"message":"hi"}`, false); err != nil || in.Kind != protocol.InputMessage {
		t.Errorf("message without decisionsOnly: %+v %v", in, err)
	}
}
