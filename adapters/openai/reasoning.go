package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// The wire fields reasoning text comes in, kept with it so it goes back in
// the same one (docs/live.md, "Reasoning").
const (
	fieldReasoningContent = "reasoning_content" // DeepSeek, vLLM, Qwen, Z.ai
	fieldReasoning        = "reasoning"         // Ollama, Groq, OpenRouter
)

// maxReasoningBytes bounds what one answer's reasoning may hold; past it
// none is kept (sent back cut, a signature would not verify).
const maxReasoningBytes = 4 << 20

// reasoning collects one attempt's reasoning: its text, from the first
// field it came in, and OpenRouter's reasoning_details merged by index.
type reasoning struct {
	text    strings.Builder
	field   string
	details []map[string]json.RawMessage
	size    int
	dropped bool
}

// add appends a reasoning text delta that came in field.
func (r *reasoning) add(field string, raw json.RawMessage) {
	s, ok := jsonString(raw)
	if !ok || s == "" || r.dropped {
		return
	}
	if r.field == "" {
		r.field = field
	}
	if field != r.field {
		return // the same text under a second name (some servers send both)
	}
	if r.grow(len(s)) {
		r.text.WriteString(s)
	}
}

// addDetails merges a reasoning_details delta: a list of detail objects,
// each continuing the one with its "index" (its text, summary and data
// appended, its other fields — type, format, id, signature — set when
// given), or a new one.
func (r *reasoning) addDetails(raw json.RawMessage) {
	var items []map[string]json.RawMessage
	if isNull(raw) || r.dropped || json.Unmarshal(raw, &items) != nil || !r.grow(len(raw)) {
		return
	}
	for _, it := range items {
		i := slices.IndexFunc(r.details, func(d map[string]json.RawMessage) bool {
			return it["index"] != nil && bytes.Equal(d["index"], it["index"])
		})
		if i < 0 {
			r.details = append(r.details, it)
			continue
		}
		d := r.details[i]
		for k, v := range it { // determinism: each key set on its own
			prev, had := jsonString(d[k])
			next, isStr := jsonString(v)
			switch {
			case isStr && had && (k == "text" || k == "summary" || k == "data"):
				d[k], _ = json.Marshal(prev + next)
			case isNull(v) || (isStr && next == ""):
				// nothing new
			default:
				d[k] = v
			}
		}
	}
}

// grow counts n more bytes, dropping everything once past the bound.
func (r *reasoning) grow(n int) bool {
	if r.size += n; r.size > maxReasoningBytes {
		r.dropped, r.details = true, nil
		r.text.Reset()
		return false
	}
	return true
}

// deliver hands the reasoning to a sink that keeps it.
func (r *reasoning) deliver(sink ports.Sink) {
	rs, ok := sink.(ports.ReasoningSink)
	if !ok || r.dropped || (r.text.Len() == 0 && len(r.details) == 0) {
		return
	}
	out := kernel.Reasoning{Text: r.text.String(), Field: r.field}
	if len(r.details) > 0 {
		slices.SortStableFunc(r.details, func(a, b map[string]json.RawMessage) int {
			return cmp.Compare(number(a["index"]), number(b["index"]))
		})
		if b, err := json.Marshal(r.details); err == nil {
			out.Details = string(b)
		}
	}
	rs.Reasoning(out)
}
