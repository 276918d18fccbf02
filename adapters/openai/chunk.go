package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/escapement/escapement/kernel"
)

// streamChunk is what the adapter reads of one chat.completion.chunk. It
// decodes the chunks itself (go-openai's reader only frames them) so that
// what servers other than OpenAI's send is read too: reasoning deltas
// (DeepSeek's and vLLM's reasoning_content, OpenRouter's and Ollama's
// reasoning), content given as a list of parts (Mistral), tool-call
// arguments given as an object instead of a string, Azure's content
// filter results. Fields it does not name (logprobs, system_fingerprint,
// x_groq, timings, …) are skipped unread, whatever their shape.
type streamChunk struct {
	Choices []streamChoice `json:"choices"`
	// Usage is token accounting, read by usage: kept raw so that an odd
	// shape is ignored instead of failing the chunk it rides on.
	Usage json.RawMessage `json:"usage"`
	// XGroq carries older Groq's usage (x_groq.usage), read when the chunk
	// has no usage of its own.
	XGroq json.RawMessage `json:"x_groq"`
}

// usage reads a chunk's token accounting: its usage, else x_groq's — the
// input and output counts, the cached part of the input
// (prompt_tokens_details.cached_tokens, else DeepSeek's
// prompt_cache_hit_tokens) and the reasoning part of the output
// (completion_tokens_details.reasoning_tokens). Usage is ancillary, so a
// shape that is not an object of numbers (a string, a count given as text)
// is ignored — ok false — never an unparseable chunk; so is a detail of
// another shape. Counts given as 12.0 are read as 12.
func (c *streamChunk) usage() (u kernel.Usage, ok bool) {
	raw := c.Usage
	if isNull(raw) && !isNull(c.XGroq) {
		var g struct {
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal(c.XGroq, &g) == nil {
			raw = g.Usage
		}
	}
	if isNull(raw) {
		return kernel.Usage{}, false
	}
	var w struct {
		PromptTokens        float64         `json:"prompt_tokens"`
		CompletionTokens    float64         `json:"completion_tokens"`
		PromptDetails       json.RawMessage `json:"prompt_tokens_details"`
		CompletionDetails   json.RawMessage `json:"completion_tokens_details"`
		PromptCacheHitCount json.RawMessage `json:"prompt_cache_hit_tokens"`
	}
	if json.Unmarshal(raw, &w) != nil || !count(w.PromptTokens) || !count(w.CompletionTokens) {
		return kernel.Usage{}, false
	}
	u = kernel.Usage{PromptTokens: int(w.PromptTokens), CompletionTokens: int(w.CompletionTokens)}
	u.CachedTokens = detail(w.PromptDetails, "cached_tokens")
	if u.CachedTokens == 0 {
		u.CachedTokens = number(w.PromptCacheHitCount)
	}
	u.ReasoningTokens = detail(w.CompletionDetails, "reasoning_tokens")
	return u, true
}

// detail reads a count from a details object (0 when absent or of another
// shape).
func detail(raw json.RawMessage, key string) int {
	var d map[string]json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &d) != nil {
		return 0
	}
	return number(d[key])
}

// number reads a count (0 when absent or not a count).
func number(raw json.RawMessage) int {
	var n float64
	if isNull(raw) || json.Unmarshal(raw, &n) != nil || !count(n) {
		return 0
	}
	return int(n)
}

// count reports whether a token count is one: whole or not, but within
// what an int holds exactly.
func count(n float64) bool { return n >= 0 && n <= 1<<50 }

// isNull reports whether a raw field is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

type streamChoice struct {
	Index int `json:"index"`
	Delta struct {
		Content          json.RawMessage `json:"content"`
		Refusal          json.RawMessage `json:"refusal"`
		ReasoningContent json.RawMessage `json:"reasoning_content"`
		Reasoning        json.RawMessage `json:"reasoning"`
		ReasoningDetails json.RawMessage `json:"reasoning_details"`
		ToolCalls        []callFragment  `json:"tool_calls"`
		FunctionCall     *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function_call"`
	} `json:"delta"`
	FinishReason         *string                    `json:"finish_reason"`
	ContentFilterResults map[string]json.RawMessage `json:"content_filter_results"`
}

// callFragment is one streamed tool-call fragment.
type callFragment struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

func decodeChunk(raw []byte) (streamChunk, error) {
	var c streamChunk
	err := json.Unmarshal(raw, &c)
	return c, err
}

// contentText reads a delta's content: a string, null, or a list of parts
// (Mistral), whose "text" parts are answer text and whose "thinking" parts
// are reasoning. ok is false for anything else.
func contentText(raw json.RawMessage) (text string, thinking, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, true
	}
	if raw[0] == '"' {
		err := json.Unmarshal(raw, &text)
		return text, false, err == nil
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     string          `json:"text"`
		Thinking json.RawMessage `json:"thinking"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false, false
	}
	var b strings.Builder
	for _, p := range parts {
		switch {
		case p.Type == "text" || (p.Type == "" && p.Text != ""):
			b.WriteString(p.Text)
		case p.Type == "thinking" || p.Type == "reasoning":
			thinking = true
		}
	}
	return b.String(), thinking, true
}

// present reports whether a raw field carries something: neither absent,
// null nor an empty string.
func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && string(raw) != "null" && string(raw) != `""`
}

// argumentsText reads tool-call arguments: a string as sent (the OpenAI
// shape), or any other JSON value (an object some servers send) as its
// JSON text; absent or null is "".
func argumentsText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// filtered names the categories Azure's content_filter_results flagged
// (filtered: true), sorted.
func filtered(results map[string]json.RawMessage) []string {
	var out []string
	for name, raw := range results {
		var r struct {
			Filtered bool `json:"filtered"`
		}
		if json.Unmarshal(raw, &r) == nil && r.Filtered {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// finishFailure judges a finish_reason that says the answer is not whole:
// "length" (the server's token limit cut it), "content_filter" (a filter
// stopped it), "error" (the server gave up). It returns nil for a reason
// that ends a whole answer (stop, tool_calls, function_call, eos, and any
// reason it does not know). answered says whether text or calls arrived.
func finishFailure(reason string, c streamChoice, answered bool) *attemptError {
	cut := func(detail string) *attemptError {
		// The answer is not retried (the same request is cut the same way);
		// the kernel keeps what arrived as partial and runs none of its calls.
		e := &attemptError{failure: failureCut(answered), final: true, detail: detail}
		return e
	}
	switch strings.ToLower(reason) {
	case "length", "max_tokens":
		return cut(fmt.Sprintf("the server cut the answer off at its token limit (finish_reason %q: max_tokens or the context window)", reason))
	case "content_filter":
		detail := fmt.Sprintf("the server's content filter stopped the answer (finish_reason %q)", reason)
		if names := filtered(c.ContentFilterResults); len(names) > 0 {
			detail = fmt.Sprintf("the server's content filter stopped the answer (finish_reason %q; flagged: %s)", reason, strings.Join(names, ", "))
		}
		return cut(detail)
	case "error":
		return &attemptError{failure: classServer.failure, retry: true,
			detail: fmt.Sprintf("the server ended the answer with finish_reason %q", reason)}
	}
	return nil
}
