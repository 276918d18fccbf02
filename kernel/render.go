package kernel

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// What the kernel writes into histories is structured content for the model,
// never text meant for a human screen (F5, I12). Everything here is
// deterministic: fixed field order, no timestamps.

// agentResult is the tool content a parent's model receives for a delegation.
type agentResult struct {
	Type    string  `json:"type"` // always "agent_result"
	Agent   string  `json:"agent"`
	Outcome Outcome `json:"outcome"`
	Reason  Reason  `json:"reason,omitempty"`
	Summary string  `json:"summary,omitempty"`
	Partial string  `json:"partial,omitempty"`
	Error   string  `json:"error,omitempty"`
}

// toolAborted is the synthetic tool content for a call that was cut off or
// refused.
type toolAborted struct {
	Type   string     `json:"type"` // "tool_aborted" or "tool_error"
	Status CallStatus `json:"status"`
	Reason Reason     `json:"reason"`
	Limit  int        `json:"limit,omitempty"`
	Error  string     `json:"error,omitempty"`
}

// The renderers below write JSON by hand: they run on every call result and
// every abort (thousands per simulated second), and reflection-based
// encoding/json would dominate the kernel's cost. TestRenderIsJSON checks
// them against encoding/json.

// jsonWriter appends one flat JSON object with fields in call order.
type jsonWriter struct {
	b     []byte
	first bool
}

func newJSON(capacity int) *jsonWriter {
	w := &jsonWriter{b: make([]byte, 0, capacity), first: true}
	w.b = append(w.b, '{')
	return w
}

func (w *jsonWriter) key(k string) {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
	w.b = append(w.b, '"')
	w.b = append(w.b, k...)
	w.b = append(w.b, '"', ':')
}

// str writes a string field; empty strings are omitted when omitEmpty.
func (w *jsonWriter) str(k, v string, omitEmpty bool) {
	if v == "" && omitEmpty {
		return
	}
	w.key(k)
	w.b = appendJSONString(w.b, v)
}

func (w *jsonWriter) num(k string, v int) {
	w.key(k)
	w.b = strconv.AppendInt(w.b, int64(v), 10)
}

func (w *jsonWriter) done() string {
	w.b = append(w.b, '}')
	return string(w.b)
}

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s quoted as a JSON string exactly as encoding/json
// does with HTML escaping off: quote, backslash and control characters are
// escaped, invalid UTF-8 becomes U+FFFD, U+2028/U+2029 are escaped, the rest
// is kept as UTF-8. Hot paths (trace lines, tool content) use it instead of
// reflection.
func AppendJSONString(b []byte, s string) []byte { return appendJSONString(b, s) }

// plainJSON marks the bytes a JSON string holds as they are: printable
// ASCII except '"' and '\\'.
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		// Copy the longest run that needs no escaping in one append.
		j := i
		for j < len(s) && plainJSON[s[j]] {
			j++
		}
		b = append(b, s[i:j]...)
		if i = j; i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, "\\ufffd"...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON either way; escaped like encoding/json does, so
			// the output is safe to embed in JavaScript (Perfetto, UIs).
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// renderAgentResult is the wire form of an agentResult.
func renderAgentResult(r agentResult) string {
	w := newJSON(96 + len(r.Summary) + len(r.Partial) + len(r.Error))
	w.str("type", r.Type, false)
	w.str("agent", r.Agent, false)
	w.str("outcome", r.Outcome.String(), false)
	w.str("reason", r.Reason.String(), true)
	w.str("summary", r.Summary, true)
	w.str("partial", r.Partial, true)
	w.str("error", r.Error, true)
	return w.done()
}

// renderToolAborted is the wire form of a toolAborted.
func renderToolAborted(t toolAborted) string {
	w := newJSON(80 + len(t.Error))
	w.str("type", t.Type, false)
	w.str("status", t.Status.String(), false)
	w.str("reason", t.Reason.String(), false)
	if t.Limit != 0 {
		w.num("limit", t.Limit)
	}
	w.str("error", t.Error, true)
	return w.done()
}

// childContent renders a child's ended turn for its parent.
func childContent(c *agent) string {
	r := agentResult{Type: "agent_result", Agent: c.name, Outcome: c.outcome, Reason: c.reason}
	switch c.outcome {
	case OutcomeCompleted:
		r.Summary = c.summary
	case OutcomeFailed:
		r.Partial = c.summary
		r.Error = c.failDetail
	default:
		r.Partial = c.summary
	}
	return renderAgentResult(r)
}

// childContentAborted renders a child aborted together with its parent.
// A child whose own abort failed it (output_limit) keeps its failure's
// detail, as childContent gives it: the parent's model learns the same
// whether the child settled before its parent's abort or with it
// (docs/semantics.md, "Results").
func childContentAborted(c *agent, out Outcome) string {
	r := agentResult{Type: "agent_result", Agent: c.name, Outcome: out, Reason: c.abort, Partial: c.cut}
	if out == OutcomeFailed {
		r.Error = c.failDetail
	}
	return renderAgentResult(r)
}

func abortedToolContent(status CallStatus, reason Reason) string {
	return renderToolAborted(toolAborted{Type: "tool_aborted", Status: status, Reason: reason})
}

func toolErrorContent(status CallStatus, reason Reason, detail string) string {
	return renderToolAborted(toolAborted{Type: "tool_error", Status: status, Reason: reason, Error: detail})
}

// toolLostText is what the model reads for a call a crash cut off that was
// not safe to run again.
const toolLostText = "the process stopped while this ran; it may or may not have taken effect"

func toolLostContent() string {
	return renderToolAborted(toolAborted{Type: "tool_lost", Status: CallLost, Reason: ReasonCrash, Error: toolLostText})
}

func refusalContent(reason Reason, limit int) string {
	return renderToolAborted(toolAborted{Type: "tool_error", Status: CallRefused, Reason: reason, Limit: limit})
}

// MarkerPrefix starts every marker message, so tools and tests can find them.
const MarkerPrefix = "<turn_aborted "

// markerContent is the marker an aborted turn leaves (F6): it tells the next
// request's model that the turn was cut off, why (typed, F13), and that text
// flagged partial above it is incomplete.
func markerContent(outcome Outcome, reason Reason, partial bool) string {
	var b strings.Builder
	b.Grow(220)
	b.WriteString(MarkerPrefix)
	b.WriteString(`outcome="`)
	b.WriteString(outcome.String())
	b.WriteString(`" reason="`)
	b.WriteString(reason.String())
	b.WriteString(`" partial="`)
	b.WriteString(strconv.FormatBool(partial))
	b.WriteString(`">The previous turn ended before it finished`)
	if partial {
		b.WriteString("; the assistant message above it was cut off")
	}
	b.WriteString(". Calls without their own results did not complete.</turn_aborted>")
	return b.String()
}

// UI strings are what shells show to people. They live here, beside the
// kernel, so every shell uses the same ones and the oracle can prove none of
// them ever enters a transcript (I12, F5).
const (
	UIInterrupted = "Interrupted. Tell escapement what to do instead."
	UITimedOut    = "Timed out. The turn was stopped."
	UIFailed      = "The model request failed."
	UIBudget      = "Request budget exhausted for this turn."
	UIShutdown    = "Shutting down."
)

// UIStrings lists every UI string (a fresh slice each call).
func UIStrings() []string {
	return []string{UIInterrupted, UITimedOut, UIFailed, UIBudget, UIShutdown}
}

// UIText returns the UI string for a turn outcome ("" for completed).
func UIText(o Outcome, r Reason) string {
	switch o {
	case OutcomeInterrupted:
		if r == ReasonShutdown {
			return UIShutdown
		}
		return UIInterrupted
	case OutcomeTimedOut:
		return UITimedOut
	case OutcomeFailed:
		return UIFailed
	case OutcomeBudgetExhausted:
		return UIBudget
	}
	return ""
}
