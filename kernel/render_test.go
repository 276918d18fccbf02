package kernel

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// stdJSON is what encoding/json produces (without HTML escaping, which the
// kernel's content does not need).
func stdJSON(t testing.TB, v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

var trickyStrings = []string{
	"", "plain", `quote " and \ backslash`, "new\nline\ttab\rcr", "ctrl \x00\x01\x1f\x7f", "backspace \b formfeed \f",
	"ünïcödé ✓ 日本語", "bad utf8 \xff\xfe end", "line sep \u2028 para \u2029", "<html> & 'apos'",
	strings.Repeat("long ", 100),
}

// TestRenderIsJSON: the hand-written renderers agree byte for byte with
// encoding/json on every field shape they emit.
func TestRenderIsJSON(t *testing.T) {
	for _, s := range trickyStrings {
		for _, o := range []Outcome{OutcomeCompleted, OutcomeInterrupted, OutcomeFailed} {
			r := agentResult{Type: "agent_result", Agent: s, Outcome: o, Reason: ReasonUserCancel, Summary: s, Partial: s, Error: s}
			if got, want := renderAgentResult(r), stdJSON(t, r); got != want {
				t.Fatalf("agent result\n got %s\nwant %s", got, want)
			}
			r.Reason, r.Summary = ReasonNone, ""
			if got, want := renderAgentResult(r), stdJSON(t, r); got != want {
				t.Fatalf("agent result (omitted)\n got %s\nwant %s", got, want)
			}
		}
		ta := toolAborted{Type: "tool_error", Status: CallRefused, Reason: ReasonMaxDepth, Limit: 8, Error: s}
		if got, want := renderToolAborted(ta), stdJSON(t, ta); got != want {
			t.Fatalf("tool aborted\n got %s\nwant %s", got, want)
		}
	}
}

// FuzzAppendJSONString: any input renders to exactly the bytes encoding/json
// writes with HTML escaping off (invalid UTF-8 replaced, \b and \f short
// escapes, U+2028/9 escaped) — the trace encoder's byte-identity rests on it.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendJSONString(nil, s)), stdJSON(t, s); got != want {
			t.Fatalf("%q renders %s, encoding/json %s", s, got, want)
		}
	})
}

// TestEventKindTextRoundTrips: every event kind, known or not, reads back
// from the text it is written as — a host that fed an unknown kind logged
// it, and a rebuild must feed the same refusal again (docs/durable.md).
// Text that String never writes stays refused.
func TestEventKindTextRoundTrips(t *testing.T) {
	for n := range 256 {
		k := EventKind(n)
		text, _ := k.MarshalText()
		var back EventKind
		if err := back.UnmarshalText(text); err != nil || back != k {
			t.Fatalf("%d written as %q reads back as %d, %v", n, text, back, err)
		}
	}
	for _, bad := range []string{"event(1)", "event(256)", "event(020)", "event(-3)", "event()", "event(+30)", "event(30", "Event(30)", "boom"} {
		var k EventKind
		if err := k.UnmarshalText([]byte(bad)); err == nil {
			t.Fatalf("%q read as %d", bad, k)
		}
	}
}
