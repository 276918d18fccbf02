// Package openai is escapement's model adapter for any OpenAI-compatible
// chat-completions endpoint (OpenAI, Ollama, vLLM, llama.cpp server, LM
// Studio, …), built on github.com/sashabaranov/go-openai's streaming API.
//
// It implements live.Model: text deltas and raw tool-call fragments go to
// the kernel as they arrive (the kernel assembles calls, F12, and answers
// malformed arguments itself, F11); failures before the first token are
// retried with exponential backoff and jitter, honouring Retry-After, each
// retry reported; a failure after tokens arrived is a typed stream error.
// Cancelling the request's context closes the HTTP response at once.
//
// The API key is only ever placed in the Authorization header: every error
// text this package produces is scrubbed of it, because servers echo keys
// back in 401 bodies.
package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	oa "github.com/sashabaranov/go-openai"
)

// DefaultBaseURL is OpenAI's API; OPENAI_BASE_URL or --base-url point the
// adapter at any compatible server (e.g. http://localhost:11434/v1).
const DefaultBaseURL = "https://api.openai.com/v1"

// Config configures a Model.
type Config struct {
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// BaseURL is the API root including /v1; DefaultBaseURL when empty.
	BaseURL string
	// Model names the model (required).
	Model string
	// Tools are the function definitions the model may call.
	Tools []live.ToolSpec
	// MaxRetries bounds the retries of one request before its first token;
	// 4 when 0, none when negative.
	MaxRetries int
	// RetryBase is the first backoff (doubling per retry, with jitter);
	// 500ms when 0.
	RetryBase time.Duration
	// RetryMax caps one backoff; 20s when 0.
	RetryMax time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a server asking for
	// more fails the request at once instead (the turn's watchdog would end
	// it anyway). 60s when 0.
	MaxRetryAfter time.Duration
	// TailWait bounds how long the stream may run on after its finish
	// reason (waiting for the usage chunk and [DONE]); 2s when 0.
	TailWait time.Duration
	// HTTPClient carries the requests; a client without a Timeout (streams
	// are long; contexts bound them) when nil.
	HTTPClient *http.Client
	// Jitter returns a number in [0, 1) for backoff jitter; math/rand/v2
	// when nil (tests pin it).
	Jitter func() float64
}

// Model streams chat completions from one endpoint. It is safe for
// concurrent use: parallel agents share it.
type Model struct {
	cfg    Config
	client *oa.Client
	tools  []oa.Tool
}

// New validates cfg and builds the client.
func New(cfg Config) (*Model, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("openai: model name is required (--model)")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai: base URL %q: want http(s)://host[:port]/path", redactURL(cfg.BaseURL))
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 4
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 500 * time.Millisecond
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 20 * time.Second
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = 60 * time.Second
	}
	if cfg.TailWait <= 0 {
		cfg.TailWait = 2 * time.Second
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	oc := oa.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	oc.HTTPClient = &capturingDoer{c: hc}
	m := &Model{cfg: cfg, client: oa.NewClientWithConfig(oc)}
	for _, s := range cfg.Tools {
		m.tools = append(m.tools, oa.Tool{Type: oa.ToolTypeFunction, Function: &oa.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: s.Parameters,
		}})
	}
	return m, nil
}

// Messages converts a kernel history into the wire messages: Role, Content,
// ToolCalls (type "function") and ToolCallID. The kernel's flags (Partial,
// Marker, Synthetic, Interjection) stay home; the marker's text carries
// what the model needs to know.
func Messages(msgs []kernel.Message) []oa.ChatCompletionMessage {
	out := make([]oa.ChatCompletionMessage, 0, len(msgs))
	for _, m := range msgs {
		om := oa.ChatCompletionMessage{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		if m.Role == kernel.RoleTool && m.Content == "" {
			// Strict servers reject a tool message without content.
			om.Content = "(empty)"
		}
		for _, c := range m.ToolCalls {
			om.ToolCalls = append(om.ToolCalls, oa.ToolCall{
				ID: c.ID, Type: oa.ToolTypeFunction,
				Function: oa.FunctionCall{Name: c.Name, Arguments: c.Arguments},
			})
		}
		out = append(out, om)
	}
	return out
}

// Stream implements live.Model.
func (m *Model) Stream(ctx context.Context, req live.Request, sink live.Sink) error {
	creq := oa.ChatCompletionRequest{
		Model:         m.cfg.Model,
		Messages:      Messages(req.Messages),
		Tools:         m.tools,
		StreamOptions: &oa.StreamOptions{IncludeUsage: true},
	}
	for attempt := 1; ; attempt++ {
		started, err := m.attempt(ctx, creq, sink)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ae *attemptError
		if !errors.As(err, &ae) {
			ae = &attemptError{failure: kernel.FailureBadResponse, detail: err.Error()}
		}
		// Redact before cutting: a key straddling the cut would otherwise
		// survive as a prefix the redaction no longer recognises.
		detail := m.clean(ae.detail)
		if started {
			// Tokens reached the kernel: retrying would duplicate them.
			return m.fail(kernel.FailureStream, "stream broke after tokens arrived: "+detail)
		}
		if !ae.retry || m.cfg.MaxRetries < 0 || attempt > m.cfg.MaxRetries {
			if ae.retry && attempt > 1 {
				return m.fail(ae.failure, fmt.Sprintf("%s (gave up after %d attempts)", detail, attempt))
			}
			return m.fail(ae.failure, detail)
		}
		delay := m.backoff(attempt)
		if ae.retryAfter > 0 {
			if ae.retryAfter > m.cfg.MaxRetryAfter {
				return m.fail(ae.failure, fmt.Sprintf("%s (server asks to retry after %v, more than the %v this adapter waits)", detail, ae.retryAfter, m.cfg.MaxRetryAfter))
			}
			delay = ae.retryAfter
		}
		sink.Retry(attempt+1, delay, detail)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// backoff is exponential with "equal jitter": half fixed, half random, so
// parallel agents that failed together do not retry together.
func (m *Model) backoff(attempt int) time.Duration {
	d := m.cfg.RetryBase << min(attempt-1, 20)
	if d > m.cfg.RetryMax || d <= 0 {
		d = m.cfg.RetryMax
	}
	return d/2 + time.Duration(m.cfg.Jitter()*float64(d/2))
}

// maxDetail bounds the error text of one attempt (server bodies can be
// long) that reaches the kernel, the trace and the user.
const maxDetail = 300

func (m *Model) fail(f kernel.Failure, detail string) error {
	return live.Fail(f, errors.New(m.redact(detail)))
}

// clean makes an attempt's error text fit to leave the adapter: the key
// redacted first, then cut to maxDetail.
func (m *Model) clean(detail string) string {
	return textcut.Clip(m.redact(detail), maxDetail)
}

// redact removes the API key from any text that leaves the adapter.
func (m *Model) redact(s string) string {
	if k := m.cfg.APIKey; len(k) >= 4 {
		s = strings.ReplaceAll(s, k, "[redacted]")
	}
	return s
}

// attemptError classifies one failed attempt. Its detail is raw (neither
// redacted nor cut): Stream cleans it before it leaves the adapter.
type attemptError struct {
	failure    kernel.Failure
	retry      bool
	retryAfter time.Duration
	detail     string
}

func (e *attemptError) Error() string { return e.detail }

// attempt sends the request once and forwards the stream. started reports
// whether anything reached the sink (after which retrying is unsafe).
func (m *Model) attempt(ctx context.Context, creq oa.ChatCompletionRequest, sink live.Sink) (started bool, err error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	capt := &capture{}
	st, err := m.client.CreateChatCompletionStream(context.WithValue(actx, captureKey{}, capt), creq)
	if err != nil {
		return false, classifyOpen(err, capt)
	}
	// Close on every path: on a cancel this is what tears the connection
	// down (the context already aborted the read).
	defer st.Close()

	var (
		finished bool
		tail     *time.Timer
		calls    callIndexer
	)
	defer func() {
		if tail != nil {
			tail.Stop()
		}
	}()
	for {
		chunk, err := st.Recv()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return started, ctx.Err()
			case finished:
				// The answer is whole: [DONE], the tail wait ran out, or the
				// connection dropped after the finish reason.
				return started, nil
			case errors.Is(err, io.EOF):
				return started, &attemptError{failure: kernel.FailureDisconnect, retry: true, detail: "stream ended without a finish_reason"}
			}
			return started, classifyRecv(err)
		}
		if chunk.Usage != nil {
			sink.Usage(kernel.Usage{PromptTokens: chunk.Usage.PromptTokens, CompletionTokens: chunk.Usage.CompletionTokens})
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue // we ask for one choice; ignore any others
			}
			d := ch.Delta
			if d.Content != "" {
				sink.Text(d.Content)
				started = true
			}
			if d.Refusal != "" {
				sink.Text(d.Refusal)
				started = true
			}
			for _, tc := range d.ToolCalls {
				sink.Call(kernel.CallDelta{Index: calls.index(tc), ID: tc.ID, Name: tc.Function.Name, Args: tc.Function.Arguments})
				started = true
			}
			if fc := d.FunctionCall; fc != nil && len(d.ToolCalls) == 0 {
				// The legacy function_call shape: one call, no id.
				sink.Call(kernel.CallDelta{Index: 0, Name: fc.Name, Args: fc.Arguments})
				started = true
			}
			if ch.FinishReason != "" && !finished {
				// Decide by what arrived, not by the reason (servers send
				// "stop" with tool calls); what remains is the usage chunk
				// and [DONE], which get TailWait at most.
				finished = true
				tail = time.AfterFunc(m.cfg.TailWait, cancel)
			}
		}
	}
}

// callIndexer maps streamed tool-call fragments to call indices. OpenAI
// sends an index on every fragment; older Ollama sent whole calls without
// one, so a fragment without an index that names a call (id or name) starts
// a new call at the lowest index not used yet, and one that does not
// continues the last. (An absurd index is passed through for the kernel to
// refuse; it does not push later calls out of range.)
type callIndexer struct {
	used map[int]bool
	last int
}

func (c *callIndexer) index(tc oa.ToolCall) int {
	var i int
	switch {
	case tc.Index != nil:
		i = *tc.Index
	case tc.ID != "" || tc.Function.Name != "":
		for c.used[i] {
			i++
		}
	default:
		i = c.last
	}
	if c.used == nil {
		c.used = make(map[int]bool)
	}
	c.used[i] = true
	c.last = i
	return i
}

// classifyOpen classifies a failure to open the stream (no response, or an
// HTTP error status).
func classifyOpen(err error, capt *capture) error {
	// RequestError first: it wraps an empty APIError (LIBRARIES.md).
	var re *oa.RequestError
	if errors.As(err, &re) {
		return statusError(re.HTTPStatusCode, strings.TrimSpace(string(re.Body)), capt)
	}
	var ae *oa.APIError
	if errors.As(err, &ae) && ae.HTTPStatusCode > 0 {
		return statusError(ae.HTTPStatusCode, ae.Message, capt)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return &attemptError{failure: kernel.FailureDisconnect, retry: true, detail: "connection failed: " + ue.Err.Error()}
	}
	return &attemptError{failure: kernel.FailureBadResponse, detail: err.Error()}
}

func statusError(code int, msg string, capt *capture) error {
	detail := fmt.Sprintf("HTTP %d", code)
	if msg != "" {
		detail += ": " + msg // cut by Stream, after redaction
	}
	e := &attemptError{failure: kernel.FailureBadResponse, detail: detail}
	switch {
	case code == http.StatusTooManyRequests:
		e.failure, e.retry = kernel.FailureRateLimit, true
	case code >= 500 || code == http.StatusRequestTimeout:
		e.failure, e.retry = kernel.FailureServer, true
	}
	if e.retry {
		e.retryAfter = parseRetryAfter(capt.retryAfter, time.Now())
	}
	return e
}

// classifyRecv classifies a failure while reading the stream before any
// token arrived (after tokens, Stream reports a stream error whatever it is).
func classifyRecv(err error) error {
	var ae *oa.APIError
	if errors.As(err, &ae) {
		// An error event inside the stream ({"error": …}): the server gave up.
		return &attemptError{failure: kernel.FailureServer, retry: true, detail: "error event in stream: " + ae.Message}
	}
	if errors.Is(err, oa.ErrTooManyEmptyStreamMessages) {
		return &attemptError{failure: kernel.FailureBadResponse, detail: err.Error()}
	}
	var (
		syntaxErr *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
	)
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) {
		return &attemptError{failure: kernel.FailureBadResponse, detail: "unparseable chunk: " + err.Error()}
	}
	return &attemptError{failure: kernel.FailureDisconnect, retry: true, detail: "connection lost: " + err.Error()}
}

// parseRetryAfter reads a Retry-After header: delta-seconds or an HTTP
// date; 0 when absent or unparseable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// capture carries what go-openai's errors drop: the Retry-After header.
type capture struct {
	retryAfter string
}

type captureKey struct{}

// capturingDoer wraps the HTTP client: for error statuses it records
// Retry-After for the attempt (found through the request's context) and
// replaces the body with a bounded in-memory copy, closing the connection's
// body (go-openai reads error bodies but never closes them).
type capturingDoer struct{ c *http.Client }

func (d *capturingDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	if c, ok := req.Context().Value(captureKey{}).(*capture); ok {
		c.retryAfter = resp.Header.Get("Retry-After")
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// redactURL drops userinfo from a URL for error messages.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparseable URL)"
}
