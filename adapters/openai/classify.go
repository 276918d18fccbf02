package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	oa "github.com/sashabaranov/go-openai"
)

// attemptError classifies one failed attempt. Its detail is raw (neither
// redacted nor cut): Stream cleans it before it leaves the adapter.
type attemptError struct {
	failure    kernel.Failure
	retry      bool
	retryAfter time.Duration
	// retryHeader is the header that asked for retryAfter, as sent
	// ("Retry-After: 59.9"), for the error text.
	retryHeader string
	detail      string
	// final marks a failure whose class and detail already say what
	// happened to what arrived (a truncated answer, an empty one): it is
	// reported as it is, even after tokens reached the kernel.
	final bool
}

func (e *attemptError) Error() string { return e.detail }

// class is how a failure is reported and whether it is worth retrying.
type class struct {
	failure kernel.Failure
	retry   bool
}

var (
	// Authentication, permission, not found, invalid request: the same
	// request fails the same way again.
	classClient = class{kernel.FailureBadResponse, false}
	classRate   = class{kernel.FailureRateLimit, true}
	// OpenAI's insufficient_quota comes as a 429 but lasts until someone
	// pays: retrying only wastes the first-token budget.
	classQuota  = class{kernel.FailureRateLimit, false}
	classServer = class{kernel.FailureServer, true}
	// A request longer than the model's window fails the same way again:
	// the kernel compacts the history and asks once more
	// (docs/semantics.md, "Compaction").
	classContext = class{kernel.FailureContextLength, false}
)

// statusClass classifies an HTTP error status: 429 is a rate limit, 408 and
// 5xx are server failures (retried), every other 4xx a client error (not).
func statusClass(code int) class {
	switch {
	case code == http.StatusTooManyRequests:
		return classRate
	case code == http.StatusRequestTimeout || code >= 500:
		return classServer
	}
	return classClient
}

// codeClass classifies a server's error code or type (OpenAI's, Ollama's,
// vLLM's and the like); ok is false for one it does not know.
func codeClass(s string) (c class, ok bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return class{}, false
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n >= 400 && n <= 599 {
			return statusClass(n), true
		}
		return class{}, false
	}
	has := func(parts ...string) bool {
		for _, p := range parts {
			if strings.Contains(s, p) {
				return true
			}
		}
		return false
	}
	switch {
	case has("context_length", "exceed_context_size", "context_window"):
		return classContext, true
	case has("quota"):
		return classQuota, true
	case has("rate_limit", "ratelimit", "too_many_requests") || s == "requests" || s == "tokens":
		return classRate, true
	case has("api_key", "auth", "permission", "forbidden", "invalid", "not_found", "notfound",
		"unsupported", "bad_request", "badrequest"):
		return classClient, true
	case has("server", "overload", "unavailable", "internal", "timeout", "api_error", "gateway"):
		return classServer, true
	}
	return class{}, false
}

// contextLengthTexts are what servers say, in their error's message, when a
// request is longer than the model's context window (compared in lower
// case). Each is one server's wording, or several servers' shared one.
var contextLengthTexts = []string{
	"context_length_exceeded",                      // OpenAI, Groq (the code, quoted in a message)
	"maximum context length",                       // OpenAI, vLLM, DeepSeek, OpenRouter, Mistral, LiteLLM
	"context length exceeded",                      // generic
	"exceeds the available context size",           // llama.cpp server
	"exceeds the context length",                   // Ollama ("the input length exceeds the context length")
	"exceeded max context length",                  // Ollama ("prompt too long; exceeded max context length by N tokens")
	"prompt too long",                              // Ollama
	"prompt is too long",                           // Anthropic
	"longer than the maximum model length",         // vLLM ("the decoder prompt … is longer than the maximum model length")
	"longer than the model's context length",       // Together
	"exceeds the context window",                   // OpenAI ("your input exceeds the context window of this model")
	"maximum prompt length",                        // xAI
	"greater than the context length",              // LM Studio
	"input is too long for requested model",        // Amazon Bedrock
	"exceeds the maximum number of tokens allowed", // Google Gemini
	"`inputs` tokens + `max_new_tokens` must be",   // Hugging Face TGI
	"too large for model with",                     // Mistral ("… too large for model with N maximum context length")
	"reduce the length of the messages",            // OpenAI, Groq
}

// contextLength reports whether info says the request was longer than the
// model's context window: by its code or its type (whatever a numeric code
// beside it says), or by its message — but never a rate limit that speaks
// of tokens ("too many tokens, please wait").
func contextLength(info errorInfo) bool {
	for _, s := range []string{info.code, info.typ} {
		if c, ok := codeClass(s); ok && c == classContext {
			return true
		}
	}
	msg := strings.ToLower(info.String())
	if strings.Contains(msg, "rate limit") || strings.Contains(msg, "please wait") {
		return false
	}
	for _, t := range contextLengthTexts {
		if strings.Contains(msg, t) {
			return true
		}
	}
	return false
}

// errorInfo is what a server said about a failure.
type errorInfo struct {
	message string
	typ     string
	code    string
	// provider and cause are what a router passes on from the provider
	// behind it (OpenRouter's error.metadata.provider_name and .raw): its
	// own message is then only "Provider returned error".
	provider string
	cause    string
}

// String is the message with its code (or type) when the message does not
// already say it, then the provider's cause when there is one:
// `Incorrect API key provided (invalid_api_key)`, `Provider returned error
// (Google): google/gemini-2.0-flash-exp:free is temporarily rate-limited
// upstream`.
func (e errorInfo) String() string {
	tag := e.code
	if tag == "" {
		tag = e.typ
	}
	var s string
	switch {
	case e.message == "":
		s = tag
	case tag == "" || strings.Contains(e.message, tag):
		s = e.message
	default:
		s = e.message + " (" + tag + ")"
	}
	if e.provider != "" && !strings.Contains(s, e.provider) {
		s += " (" + e.provider + ")"
	}
	if e.cause != "" && !strings.Contains(s, e.cause) {
		if s == "" {
			return e.cause
		}
		s += ": " + e.cause
	}
	return s
}

// class classifies by code, then type; ok is false when neither is known.
func (e errorInfo) class() (class, bool) {
	if c, ok := codeClass(e.code); ok {
		return c, true
	}
	return codeClass(e.typ)
}

// parseErrorBody reads a server's error body: OpenAI's
// {"error":{"message","type","code"}}, Ollama's {"error":"…"}, vLLM's
// top-level {"message","type","code"}, FastAPI's {"detail":…}, or plain
// text (HTML included), whitespace collapsed. A router's error also
// carries the cause from the provider behind it (OpenRouter's
// {"error":{"message":"Provider returned error","metadata":{"raw",
// "provider_name"}}}): it is kept (providerCauseDepth).
func parseErrorBody(body []byte) errorInfo {
	return parseErrorBodyDepth(body, maxCauseDepth)
}

func parseErrorBodyDepth(body []byte, depth int) errorInfo {
	body = bytes.TrimSpace(body)
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Type    json.RawMessage `json:"type"`
		Code    json.RawMessage `json:"code"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) != nil {
		return errorInfo{message: strings.Join(strings.Fields(string(body)), " ")}
	}
	if s, ok := jsonString(v.Error); ok {
		return errorInfo{message: s}
	}
	var nested struct {
		Message  json.RawMessage `json:"message"`
		Type     json.RawMessage `json:"type"`
		Code     json.RawMessage `json:"code"`
		Metadata json.RawMessage `json:"metadata"`
	}
	if len(v.Error) > 0 && json.Unmarshal(v.Error, &nested) == nil {
		v.Message, v.Type, v.Code = nested.Message, nested.Type, nested.Code
	}
	e := errorInfo{message: jsonText(v.Message), typ: jsonText(v.Type), code: jsonText(v.Code)}
	e.provider, e.cause = providerCauseDepth(nested.Metadata, depth)
	if e.message == "" {
		e.message = jsonText(v.Detail)
	}
	if e.message == "" && e.typ == "" && e.code == "" {
		e.message = string(body)
	}
	return e
}

// maxCauseDepth bounds how deep a provider's cause is unwrapped: a raw
// body that holds a router's error that holds another, and so on.
const maxCauseDepth = 4

// providerCauseDepth reads the cause a router passes on (OpenRouter's
// error.metadata): the provider's name and its raw answer — itself an
// error body in any of parseErrorBody's shapes, unwrapped depth levels
// deep at most, or plain text — or, for a moderation refusal, the reasons
// given.
func providerCauseDepth(metadata json.RawMessage, depth int) (provider, cause string) {
	var m struct {
		Raw          json.RawMessage `json:"raw"`
		ProviderName json.RawMessage `json:"provider_name"`
		Reasons      json.RawMessage `json:"reasons"`
	}
	if len(metadata) == 0 || json.Unmarshal(metadata, &m) != nil {
		return "", ""
	}
	provider = jsonText(m.ProviderName)
	raw := m.Raw
	if s, ok := jsonString(raw); ok {
		raw = json.RawMessage(strings.TrimSpace(s))
		if !json.Valid(raw) {
			return provider, strings.Join(strings.Fields(s), " ")
		}
	}
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return provider, jsonText(m.Reasons)
	case depth > 1:
		return provider, parseErrorBodyDepth(raw, depth-1).String()
	}
	return provider, jsonText(raw)
}

// jsonString decodes a JSON string.
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// jsonText renders a JSON value for an error text: a string as itself, a
// list of strings joined, null as nothing, anything else as compact JSON.
func jsonText(raw json.RawMessage) string {
	if s, ok := jsonString(raw); ok {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, ", ")
	}
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// statusError classifies an HTTP error response: the status decides, except
// that a 429 whose code says the quota is gone is not retried. The detail is
// `HTTP 404 Not Found: model "x" not found, try pulling it first`.
func statusError(c *capture, now time.Time) *attemptError {
	info := parseErrorBody(c.body)
	if info.code == strconv.Itoa(c.status) {
		info.code = "" // vLLM repeats the status as its code
	}
	cls := statusClass(c.status)
	if cc, ok := info.class(); ok && cls == classRate && cc == classQuota {
		cls = classQuota
	}
	if (c.status == http.StatusBadRequest || c.status == http.StatusRequestEntityTooLarge ||
		c.status == http.StatusUnprocessableEntity) && contextLength(info) {
		cls = classContext
	}
	detail := strings.TrimSpace(fmt.Sprintf("HTTP %d %s", c.status, http.StatusText(c.status)))
	if c.status == http.StatusNotFound && !json.Valid(bytes.TrimSpace(c.body)) {
		// No API answered (a web server's own 404 page): the base URL is
		// the likely cause. Said before the body, which may be cut.
		detail += " at POST " + c.url + " (is the base URL the API root, with /v1?)"
	}
	if msg := info.String(); msg != "" {
		detail += ": " + msg // cut by Stream, after redaction
	}
	e := &attemptError{failure: cls.failure, retry: cls.retry, detail: detail}
	if e.retry {
		e.retryAfter, e.retryHeader = retryAfter(c, now)
	}
	return e
}

// openError classifies a failure to open the stream: an HTTP error status
// (from the capture), no connection, or a request go-openai refused.
func openError(err error, c *capture, now time.Time) *attemptError {
	if c.status != 0 {
		return statusError(c, now)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return &attemptError{failure: kernel.FailureDisconnect, retry: true, detail: "connection failed: " + ue.Err.Error()}
	}
	return &attemptError{failure: kernel.FailureBadResponse, detail: err.Error()}
}

// eventError classifies an error event inside the stream by its code and
// type like the HTTP statuses; one that names neither is a server failure
// (the server gave up mid-answer) and is retried.
func eventError(info errorInfo) *attemptError {
	cls, ok := info.class()
	switch {
	case contextLength(info):
		cls = classContext
	case !ok:
		cls = classServer
	}
	return &attemptError{failure: cls.failure, retry: cls.retry, detail: "error event in stream: " + info.String()}
}

// recvError classifies the end of a stream that went wrong before a finish
// reason: an error event, a body that is not an event stream, an event too
// long, a stream that stopped without [DONE], or a lost connection. (A clean
// [DONE] and an unparseable chunk are judged by the caller.)
func recvError(err error, c *capture) *attemptError {
	if c.errEvent != nil {
		// sseBody ended the stream at it; decoded here rather than by
		// go-openai, which cannot read Ollama's string form.
		return eventError(parseErrorBody(c.errEvent))
	}
	if !c.sawData && len(c.head) > 0 && !strings.Contains(c.contentType, "event-stream") && errors.Is(err, io.EOF) {
		// A body that ended cleanly without one data line (one that broke
		// is a disconnect, below, whatever it had sent).
		return &attemptError{failure: kernel.FailureBadResponse, detail: fmt.Sprintf(
			"not an event stream (Content-Type %q, no data: line; is the base URL the API root?): %s",
			c.contentType, strings.Join(strings.Fields(string(c.head)), " "))}
	}
	var long *lineTooLongError
	if errors.As(err, &long) {
		return &attemptError{failure: kernel.FailureBadResponse, detail: long.Error()}
	}
	if errors.Is(err, oa.ErrTooManyEmptyStreamMessages) {
		return &attemptError{failure: kernel.FailureBadResponse, detail: err.Error()}
	}
	if errors.Is(err, io.EOF) { // without [DONE]: the body ended early
		return &attemptError{failure: kernel.FailureDisconnect, retry: true,
			detail: "stream ended without [DONE] or a finish_reason (connection closed)"}
	}
	return &attemptError{failure: kernel.FailureDisconnect, retry: true, detail: "connection lost: " + err.Error()}
}

// retryAfter reads how long the server asks to wait: retry-after-ms
// (OpenAI's, in milliseconds), else Retry-After in delta-seconds (fractions
// kept) or as an HTTP date (RFC 9110's IMF-fixdate and the two obsolete
// forms, http.ParseTime); 0 when absent, unparseable or already past. It
// also returns the header as sent, for the error text.
func retryAfter(c *capture, now time.Time) (time.Duration, string) {
	if v := strings.TrimSpace(c.retryAfterMS); v != "" {
		if d, ok := seconds(v, time.Millisecond); ok {
			return d, "retry-after-ms: " + textcut.Clip(v, 40)
		}
	}
	v := strings.TrimSpace(c.retryAfter)
	if v == "" {
		return 0, ""
	}
	if d, ok := seconds(v, time.Second); ok {
		return d, "Retry-After: " + textcut.Clip(v, 40)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d, "Retry-After: " + v
		}
	}
	return 0, ""
}

// seconds parses a non-negative decimal count of unit; a count too large
// for a Duration saturates (it is then longer than any bound).
func seconds(v string, unit time.Duration) (time.Duration, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || math.IsNaN(f) {
		return 0, false // out of range is ±Inf or 0, judged below
	}
	switch ns := f * float64(unit); {
	case ns <= 0:
		return 0, true
	case ns >= math.MaxInt64:
		return math.MaxInt64, true
	default:
		return time.Duration(ns), true
	}
}
