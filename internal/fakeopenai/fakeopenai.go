// Package fakeopenai is a scriptable OpenAI-protocol chat-completions server
// for tests: it listens on loopback (net/http/httptest), records every
// request, and lets a test script each response as real SSE bytes — text
// deltas (of any size), tool-call fragments, finish reasons (or none),
// usage, error statuses with Retry-After in its forms, error events with
// codes, lines split across reads, abrupt disconnects, stalls, or a stream
// that never ends.
//
// A handler that returns without Done ends the response cleanly (the
// chunked body is terminated) but without `data: [DONE]`: what a client sees
// when a proxy cuts a stream at an event boundary.
package fakeopenai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Message is a chat message as the server received it.
type Message struct {
	Role       string `json:"role"`
	Content    string `json:"content"`
	ToolCallID string `json:"tool_call_id"`
	// ReasoningContent and ReasoningDetails are the reasoning a client
	// sent back (DeepSeek's field, OpenRouter's).
	ReasoningContent string          `json:"reasoning_content"`
	ReasoningDetails json.RawMessage `json:"reasoning_details"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// Body is the decoded request body.
type Body struct {
	Model         string          `json:"model"`
	Stream        bool            `json:"stream"`
	Messages      []Message       `json:"messages"`
	Tools         json.RawMessage `json:"tools"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// The model settings a client sent (nil or 0 when it sent none).
	Temperature         *float64        `json:"temperature"`
	MaxTokens           int             `json:"max_tokens"`
	MaxCompletionTokens int             `json:"max_completion_tokens"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ResponseFormat      json.RawMessage `json:"response_format"`
}

// Last is the last message of the request.
func (b Body) Last() Message { return b.Messages[len(b.Messages)-1] }

// SummaryInstruction starts the user message of escapement's summarising
// request (kernel/summary.go): a compaction.
const SummaryInstruction = "Summarise the conversation between the <conversation> tags"

// Compaction reports whether the request is a compaction's summarising
// request: no tools offered, and one user message (after the system
// prompt) that asks for the summary (docs/semantics.md, "Compaction").
func (b Body) Compaction() bool {
	if len(b.Messages) == 0 || len(b.Tools) > 0 && string(b.Tools) != "null" {
		return false
	}
	last := b.Last()
	return last.Role == "user" && strings.HasPrefix(last.Content, SummaryInstruction)
}

// Tokens is the prompt's size as this server counts it: escapement's
// measure of each message (docs/semantics.md, "Compaction": 4 tokens of
// framing plus a quarter, rounded up, of the bytes of its content,
// tool_call_id, calls and reasoning), plus a quarter of the tools'
// definitions, which a real server counts too and escapement's measure
// does not see. A test's server reports it as prompt_tokens and refuses a
// request over its window, as a real one does.
func (b Body) Tokens() int {
	n := (len(b.Tools) + 3) / 4
	if string(b.Tools) == "null" {
		n = 0
	}
	for _, m := range b.Messages {
		bytes := len(m.Content) + len(m.ToolCallID) + len(m.ReasoningContent) + len(m.ReasoningDetails)
		for _, c := range m.ToolCalls {
			bytes += len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
		}
		n += 4 + (bytes+3)/4
	}
	return n
}

// FirstUser is the first user message's content (a child's task).
func (b Body) FirstUser() string {
	for _, m := range b.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// Request is one recorded request.
type Request struct {
	N      int // 1-based arrival order
	Path   string
	Auth   string
	Raw    []byte
	Body   Body
	At     time.Time
	Closed time.Time // when the handler saw the client go away (zero: never)
}

// Handler scripts one response. It runs in the server's goroutine for the
// request; ctx is done when the client closes the connection.
type Handler func(ctx context.Context, req *Request, w *Writer)

// Server is the fake endpoint.
type Server struct {
	*httptest.Server
	handler Handler

	mu   sync.Mutex
	reqs []*Request
	cond chan struct{} // closed and replaced on every change
}

// New starts a server on loopback; URL()+"/v1" is its base URL.
func New(h Handler) *Server {
	s := &Server{handler: h, cond: make(chan struct{})}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// BaseURL is the OpenAI base URL of the server.
func (s *Server) BaseURL() string { return s.URL + "/v1" }

func (s *Server) changed() {
	close(s.cond)
	s.cond = make(chan struct{})
}

func (s *Server) serve(rw http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	req := &Request{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Raw: raw, At: time.Now()}
	if err := json.Unmarshal(raw, &req.Body); err != nil {
		http.Error(rw, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	req.N = len(s.reqs)
	s.changed()
	s.mu.Unlock()

	w := &Writer{rw: rw, srv: s, req: req}
	if f, ok := rw.(http.Flusher); ok {
		w.flush = f.Flush
	}
	s.handler(r.Context(), req, w)
}

// markClosed records that the handler saw the client go away.
func (s *Server) markClosed(req *Request, at time.Time) {
	s.mu.Lock()
	req.Closed = at
	s.changed()
	s.mu.Unlock()
}

// Requests returns a snapshot of the recorded requests.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = *r
	}
	return out
}

// WaitFor blocks until cond holds for the recorded requests or ctx ends.
func (s *Server) WaitFor(ctx context.Context, cond func([]Request) bool) error {
	for {
		s.mu.Lock()
		ch := s.cond
		s.mu.Unlock()
		if cond(s.Requests()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("fakeopenai: condition not met: %w", ctx.Err())
		}
	}
}

// Writer writes one scripted response.
type Writer struct {
	srv     *Server
	req     *Request
	rw      http.ResponseWriter
	flush   func()
	started bool
	chunkN  int
}

func (w *Writer) start() {
	if w.started {
		return
	}
	w.started = true
	h := w.rw.Header()
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "text/event-stream")
	}
	h.Set("Cache-Control", "no-cache")
	w.rw.WriteHeader(http.StatusOK)
}

// Raw writes one line (plus the blank line that ends an SSE event when it
// is a data line) and flushes it.
func (w *Writer) Raw(line string) error {
	w.start()
	sep := "\n"
	if strings.HasPrefix(line, "data:") {
		sep = "\n\n"
	}
	if _, err := io.WriteString(w.rw, line+sep); err != nil {
		return err
	}
	if w.flush != nil {
		w.flush()
	}
	return nil
}

// Bytes writes s verbatim (no line end added) and flushes it: for line
// endings, byte-order marks and field layouts Raw does not produce.
func (w *Writer) Bytes(s string) error {
	w.start()
	if _, err := io.WriteString(w.rw, s); err != nil {
		return err
	}
	if w.flush != nil {
		w.flush()
	}
	return nil
}

// Header sets a response header before anything is written (a
// Content-Type with parameters, a Content-Encoding); Raw, Bytes and the
// other writers keep it.
func (w *Writer) Header(name, value string) { w.rw.Header().Set(name, value) }

func (w *Writer) chunk(choice string) error {
	w.chunkN++
	return w.Raw(fmt.Sprintf(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"fake","choices":[%s]}`, choice))
}

// Text sends a content delta.
func (w *Writer) Text(s string) error {
	b, _ := json.Marshal(s)
	return w.chunk(fmt.Sprintf(`{"index":0,"delta":{"content":%s},"finish_reason":null}`, b))
}

// CallStart sends a tool call's first fragment (index, id, name, empty
// arguments), as OpenAI does.
func (w *Writer) CallStart(index int, id, name string) error {
	return w.chunk(fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]},"finish_reason":null}`, index, id, name))
}

// CallArgs sends an argument fragment of call index.
func (w *Writer) CallArgs(index int, frag string) error {
	b, _ := json.Marshal(frag)
	return w.chunk(fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"finish_reason":null}`, index, b))
}

// Call sends a whole call split into argument fragments of size n.
func (w *Writer) Call(index int, id, name, args string, n int) error {
	if err := w.CallStart(index, id, name); err != nil {
		return err
	}
	for len(args) > 0 {
		k := min(n, len(args))
		if err := w.CallArgs(index, args[:k]); err != nil {
			return err
		}
		args = args[k:]
	}
	return nil
}

// Finish sends the finish reason.
func (w *Writer) Finish(reason string) error {
	return w.chunk(fmt.Sprintf(`{"index":0,"delta":{},"finish_reason":%q}`, reason))
}

// Usage sends the usage chunk (empty choices).
func (w *Writer) Usage(prompt, completion int) error {
	return w.Raw(fmt.Sprintf(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"fake","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, prompt, completion, prompt+completion))
}

// UsageDetail sends the usage chunk with OpenAI's breakdown: the cached
// part of the input and the reasoning part of the output.
func (w *Writer) UsageDetail(prompt, completion, cached, reasoning int) error {
	return w.Raw(fmt.Sprintf(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"fake","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":%d}}}`,
		prompt, completion, prompt+completion, cached, reasoning))
}

// Reasoning sends a reasoning delta in DeepSeek's field,
// reasoning_content.
func (w *Writer) Reasoning(s string) error {
	b, _ := json.Marshal(s)
	return w.chunk(fmt.Sprintf(`{"index":0,"delta":{"reasoning_content":%s},"finish_reason":null}`, b))
}

// ContextLengthExceeded answers 400 with OpenAI's body for a request
// longer than the model's context window (tokens is what it counted).
func (w *Writer) ContextLengthExceeded(window, tokens int) {
	w.Status(http.StatusBadRequest, fmt.Sprintf(`{"error":{"message":"This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, window, tokens))
}

// Done sends [DONE].
func (w *Writer) Done() error { return w.Raw("data: [DONE]") }

// End finishes a normal answer: finish reason, usage, [DONE].
func (w *Writer) End(reason string) error {
	if err := w.Finish(reason); err != nil {
		return err
	}
	if err := w.Usage(10, w.chunkN); err != nil {
		return err
	}
	return w.Done()
}

// Answer streams text in pieces of n bytes and ends it.
func (w *Writer) Answer(text string, n int) error {
	for len(text) > 0 {
		k := min(n, len(text))
		if err := w.Text(text[:k]); err != nil {
			return err
		}
		text = text[k:]
	}
	return w.End("stop")
}

// AnswerNoFinish streams text in pieces of n bytes and ends with usage and
// [DONE] but no finish_reason, as some servers and proxies do.
func (w *Writer) AnswerNoFinish(text string, n int) error {
	for len(text) > 0 {
		k := min(n, len(text))
		if err := w.Text(text[:k]); err != nil {
			return err
		}
		text = text[k:]
	}
	if err := w.Usage(10, w.chunkN); err != nil {
		return err
	}
	return w.Done()
}

// ErrorEvent sends an error event inside the stream, OpenAI's shape:
// data: {"error":{"message":…,"type":…,"code":…}}. An empty typ and a nil
// code are left out; code may be a string or a number.
func (w *Writer) ErrorEvent(message, typ string, code any) error {
	e := map[string]any{"message": message}
	if typ != "" {
		e["type"] = typ
	}
	if code != nil {
		e["code"] = code
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	return w.Raw("data: " + string(b))
}

// Split writes one data line (and the blank line after it) in pieces of n
// bytes, flushing after each, so the client reads it in several reads.
func (w *Writer) Split(line string, n int) error {
	w.start()
	rest := line + "\n\n"
	for len(rest) > 0 {
		k := min(max(n, 1), len(rest))
		if _, err := io.WriteString(w.rw, rest[:k]); err != nil {
			return err
		}
		if w.flush != nil {
			w.flush()
		}
		rest = rest[k:]
	}
	return nil
}

// Status answers with an HTTP error status, extra headers (name, value
// pairs: "Retry-After", "1.5") and a body; the Content-Type is JSON unless
// the headers set one.
func (w *Writer) Status(code int, body string, headers ...string) {
	w.rw.Header().Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		w.rw.Header().Set(headers[i], headers[i+1])
	}
	w.rw.WriteHeader(code)
	_, _ = io.WriteString(w.rw, body)
}

// RateLimited answers 429 with OpenAI's rate-limit body and, unless
// retryAfter is empty, that Retry-After header (delta-seconds, fractional,
// or an HTTP date).
func (w *Writer) RateLimited(retryAfter string) {
	var h []string
	if retryAfter != "" {
		h = []string{"Retry-After", retryAfter}
	}
	w.Status(http.StatusTooManyRequests, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`, h...)
}

// Stall sends the response headers (if nothing was sent yet) and then
// nothing more until the client goes away; it records when in the request's
// Closed.
func (w *Writer) Stall(ctx context.Context) {
	w.start()
	if w.flush != nil {
		w.flush()
	}
	<-ctx.Done()
	w.srv.markClosed(w.req, time.Now())
}

// Hangup closes the connection abruptly (no [DONE], no finish reason).
func (w *Writer) Hangup() {
	w.start()
	if w.flush != nil {
		w.flush()
	}
	if hj, ok := w.rw.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
		}
	}
}

// Forever streams a text chunk every gap until the client goes away, and
// records when it noticed in the request's Closed.
func (w *Writer) Forever(ctx context.Context, text string, gap time.Duration) {
	t := time.NewTicker(gap)
	defer t.Stop()
	for {
		if err := w.Text(text); err != nil {
			w.srv.markClosed(w.req, time.Now())
			return
		}
		select {
		case <-ctx.Done():
			w.srv.markClosed(w.req, time.Now())
			return
		case <-t.C:
		}
	}
}
