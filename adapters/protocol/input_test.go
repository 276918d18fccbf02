package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/protocheck"
)

// TestParseInputIsTheSchema: ParseInput accepts exactly the lines the
// input schema accepts, reads each verb's fields, and says what is wrong
// with the others.
func TestParseInputIsTheSchema(t *testing.T) {
	good := []struct {
		line string
		want protocol.Input
	}{
		{`{"message":"hello"}`, protocol.Input{Kind: "message", Text: "hello"}},
		{`{"interject": "also this"}`, protocol.Input{Kind: "interject", Text: "also this"}},
		{`{"queue":"next"}`, protocol.Input{Kind: "queue", Text: "next"}},
		{`{"cancel":true}`, protocol.Input{Kind: "cancel"}},
		{`{"cancel":"main/explore"}`, protocol.Input{Kind: "cancel", Agent: "main/explore"}},
		{`{"approve":"c1","digest":"0123456789abcdef"}`, protocol.Input{Kind: "approve", CallID: "c1", Digest: "0123456789abcdef"}},
		{`{"approve":"c1","digest":"0123456789abcdef","agent":"main/a","for":"tool"}`, protocol.Input{Kind: "approve", CallID: "c1", Digest: "0123456789abcdef", Agent: "main/a", For: "tool"}},
		{`{"deny":"c1","note":"not that file"}`, protocol.Input{Kind: "deny", CallID: "c1", Note: "not that file"}},
		{`{"deny":"c1","note":""}`, protocol.Input{Kind: "deny", CallID: "c1"}},
		{`{"deny":"c1","digest":"0123456789abcdef","agent":"main/a"}`, protocol.Input{Kind: "deny", CallID: "c1", Digest: "0123456789abcdef", Agent: "main/a"}},
	}
	for _, tc := range good {
		got, err := protocol.ParseInput([]byte(tc.line))
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.line, got, err, tc.want)
		}
		if err := protocheck.Input([]byte(tc.line)); err != nil {
			t.Errorf("%s: the schema refuses it: %v", tc.line, err)
		}
	}
	bad := []struct{ line, says string }{
		{`hello`, "not a JSON object"},
		{`"hello"`, "not a JSON object"},
		{`null`, "not a JSON object"},
		{`[{"message":"a"}]`, "not a JSON object"},
		{`{"message":"a"} {"message":"b"}`, "more than one JSON value"},
		{`{}`, "want exactly one of"},
		{`{"message":"a","interject":"b"}`, "got interject, message"},
		{`{"text":"a"}`, "got none"},
		{`{"message":""}`, `"message" is empty`},
		{`{"message":"  "}`, `"message" is empty`},
		{`{"message":42}`, `"message" must be the text, not 42`},
		{`{"message":"a","agent":"main"}`, `message does not take "agent"`},
		{`{"cancel":false}`, `"cancel" must be true or an agent's path`},
		{`{"cancel":"main","note":"x"}`, `cancel does not take "note"`},
		{`{"approve":"c1"}`, "approve needs the digest"},
		{`{"approve":"c1","digest":"d","for":"ever"}`, `"for" is "args" or "tool"`},
		{`{"deny":"c1","digest":"d","for":"args"}`, `deny does not take`},
		{`{"deny":7}`, `"deny" must be a call id`},
	}
	for _, tc := range bad {
		_, err := protocol.ParseInput([]byte(tc.line))
		if err == nil || !errors.Is(err, protocol.ErrInput) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: error %v, want one saying %q", tc.line, err, tc.says)
		}
		if protocheck.Input([]byte(tc.line)) == nil {
			t.Errorf("%s: the schema accepts it", tc.line)
		}
	}
}

// TestIsDecision: a text line is taken as a decision exactly when it is
// an object of one decision verb and decision keys — a malformed one too
// (ParseInput then refuses it) — and every other line stays a message.
func TestIsDecision(t *testing.T) {
	for _, line := range []string{
		`{"approve":"call_1","digest":"0123456789abcdef"}`,
		` {"deny":"call_1","note":"use make test"} `,
		`{"approve":"call_1","digest":"d","agent":"main/a","for":"tool"}`,
		`{"approve":"call_1"}`,           // no digest: refused, never a message
		`{"deny":"call_1","for":"args"}`, // deny takes no for: refused
		`{"approve":7,"digest":"d"}`,     // not a call id: refused
	} {
		if !protocol.IsDecision([]byte(line)) {
			t.Errorf("%s: not taken as a decision", line)
		}
	}
	for _, line := range []string{
		`approve call_1`,
		`{"message":"approve call_1"}`,
		`{"approve":"c1","deny":"c1","digest":"d"}`,
		`{"approve":"c1","digest":"d","text":"x"}`,
		`{"note":"x"}`,
		`{"approve":"c1","digest":"d"} and more`,
		`["approve","c1"]`,
		`null`,
		`{}`,
	} {
		if protocol.IsDecision([]byte(line)) {
			t.Errorf("%s: taken as a decision", line)
		}
	}
}
