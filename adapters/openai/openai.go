// Package openai is escapement's model adapter for any OpenAI-compatible
// chat-completions endpoint (OpenAI, Ollama, vLLM, llama.cpp server, LM
// Studio, …), built on github.com/sashabaranov/go-openai's streaming API.
//
// It implements ports.Model: text deltas and raw tool-call fragments go to
// the kernel as they arrive (the kernel assembles calls, F12, and answers
// malformed arguments itself, F11); failures before the first token that
// may pass (rate limits, server errors, lost connections) are retried with
// exponential backoff and jitter, honouring Retry-After, each retry
// reported; those that will not (authentication, not found, invalid
// request) fail at once; a failure after tokens arrived is a typed stream
// error. Every failure's text names its cause: the HTTP status and the
// server's message, or the error event's message and code. Cancelling the
// request's context closes the HTTP response at once.
//
// The files split by job: retry.go holds the request loop (Stream),
// stream.go one attempt and how a stream's end is judged, chunk.go what is
// read of a chunk (reasoning, content parts, finish reasons that mean a cut
// answer), classify.go what a failure means, transport.go what is captured
// below go-openai (error bodies, Retry-After), sse.go the event-stream
// grammar (line ends, BOM, multi-line data, [DONE], error events), whole.go
// a whole JSON answer from a server that does not stream.
//
// The API key is only ever placed in the Authorization header: every error
// text this package produces is scrubbed of it (internal/redact: any run of
// 12 or more of its bytes), because servers echo keys back in 401 bodies.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/redact"
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
	// Tools are the function definitions the model may call; a request
	// that names its own (ports.Request.Tools) offers those instead.
	Tools []ports.ToolSpec
	// MaxRetries bounds the retries of one request before its first token;
	// 4 when 0, none when negative.
	MaxRetries int
	// RetryBase is the first backoff (doubling per retry, with jitter);
	// 500ms when 0.
	RetryBase time.Duration
	// RetryMax caps one backoff; 20s when 0.
	RetryMax time.Duration
	// MaxRetryWait is how long a request may take to its first token,
	// failed attempts and the waits between them included. Set it to the
	// kernel's FirstTokenTimeout (the CLI passes --first-token-timeout): the
	// kernel's watchdog ends a request that shows no token by then, retries
	// or not, so a retry whose wait (Retry-After or backoff) would end past
	// it can never help, and the request fails at once instead, with its
	// own class (rate_limit for a 429) and the server's Retry-After in the
	// error text. kernel.DefaultLimits().FirstTokenTimeout when 0.
	MaxRetryWait time.Duration
	// MaxLineBytes bounds one event of the event stream (its data lines
	// together). An event is read whole before it is decoded, so a single
	// 50 MB token would be buffered entirely before the kernel's
	// max_message_bytes could cut the message; a longer event fails the
	// request (bad_response, not retried) as soon as it passes the bound. The CLI derives it from
	// max_message_bytes (MaxLineFor); MaxLineFor(1 MiB) when 0.
	MaxLineBytes int
	// TailWait bounds how long the stream may run on after its finish
	// reason (waiting for the usage chunk and [DONE]); 2s when 0.
	TailWait time.Duration
	// HTTPClient carries the requests; a client without a Timeout (streams
	// are long; contexts bound them) when nil.
	HTTPClient *http.Client
	// Jitter returns a number in [0, 1) for backoff jitter; math/rand/v2
	// when nil (tests pin it).
	Jitter func() float64
	// Now reads the clock for MaxRetryWait, HTTP-date Retry-Afters and the
	// spacing of reasoning progress (one report per 250 ms: a clock that
	// never moves reports once per attempt); time.Now when nil (tests pin
	// it).
	Now func() time.Time
	// Sleep waits between attempts: d, or until ctx is done (then it
	// returns ctx's error); a timer when nil (tests record the waits
	// instead of sleeping them).
	Sleep func(ctx context.Context, d time.Duration) error

	// Model settings (docs/live.md, "Model settings").

	// Temperature, when set, is sent with every request (0 included).
	Temperature *float64
	// MaxOutputTokens, when positive, bounds every answer, reasoning
	// included: sent as OutputTokensField.
	MaxOutputTokens int
	// OutputTokensField is the field MaxOutputTokens goes in:
	// FieldMaxTokens or FieldMaxCompletionTokens; "" picks
	// max_completion_tokens on OpenAI's API (which refuses max_tokens for
	// its reasoning models) and max_tokens elsewhere (what Ollama,
	// llama.cpp and older servers read).
	OutputTokensField string
	// ToolChoice is sent as tool_choice with the root's requests: "auto",
	// "none", "required" or the name of one of Tools (that tool forced);
	// nothing when "".
	ToolChoice string
	// OutputSchema is the JSON Schema the root's final answer must meet:
	// sent as response_format with the root's requests, as
	// StructuredOutput says (escapement validates the answer either way:
	// internal/outputschema).
	OutputSchema json.RawMessage
	// OutputSchemaName names the schema in response_format; "answer" when
	// empty.
	OutputSchemaName string
	// StructuredOutput is how OutputSchema is sent: StructuredJSONSchema
	// (the default), StructuredJSONObject (servers that only promise JSON)
	// or StructuredNone (nothing sent).
	StructuredOutput string
	// Extra is a JSON object merged into every request body, its fields
	// replacing the adapter's (model, messages, stream and stream_options
	// excepted): a provider's own parameters (top_p, seed,
	// reasoning_effort, DeepSeek's thinking, vLLM's chat_template_kwargs).
	Extra json.RawMessage
	// Reasoning says which of the model's reasoning goes back to the
	// server (docs/live.md, "Reasoning"): ReasoningAuto when "",
	// ReasoningAll or ReasoningOff.
	Reasoning string
}

// MaxLineFor is the event-stream line bound that lets every message of at
// most maxMessageBytes through: a chunk's content may be JSON-escaped to six
// bytes per byte (\u0000), plus the chunk's framing.
func MaxLineFor(maxMessageBytes int) int { return 6*maxMessageBytes + 64<<10 }

// Model streams chat completions from one endpoint. It is safe for
// concurrent use: parallel agents share it.
type Model struct {
	cfg    Config
	client *oa.Client
	tools  []oa.Tool
	redact *redact.Redactor
	// What every request sends beside the messages, read from cfg once.
	extra          map[string]json.RawMessage
	toolChoice     any
	responseFormat any
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
	if cfg.MaxRetryWait <= 0 {
		cfg.MaxRetryWait = kernel.DefaultLimits().FirstTokenTimeout
	}
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = MaxLineFor(kernel.DefaultLimits().MaxMessageBytes)
	}
	if cfg.TailWait <= 0 {
		cfg.TailWait = 2 * time.Second
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.Float64
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	settings, err := modelSettings(&cfg)
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	oc := oa.DefaultConfig(cfg.APIKey)
	oc.BaseURL = cfg.BaseURL
	oc.HTTPClient = &capturingDoer{c: hc, maxLine: cfg.MaxLineBytes}
	m := &Model{cfg: cfg, client: oa.NewClientWithConfig(oc), redact: redact.New(cfg.APIKey), tools: wireTools(cfg.Tools),
		extra: settings.extra, toolChoice: settings.toolChoice, responseFormat: settings.responseFormat}
	return m, nil
}

// wireTools converts tool specs into the wire's function definitions.
func wireTools(specs []ports.ToolSpec) []oa.Tool {
	var tools []oa.Tool
	for _, s := range specs {
		tools = append(tools, oa.Tool{Type: oa.ToolTypeFunction, Function: &oa.FunctionDefinition{
			Name: s.Name, Description: s.Description, Parameters: s.Parameters,
		}})
	}
	return tools
}

// settings are the request fields Config's model settings make.
type settings struct {
	extra          map[string]json.RawMessage
	toolChoice     any
	responseFormat any
}

// modelSettings checks cfg's model settings, naming the bad one, fills in
// their defaults and returns the request fields they make.
func modelSettings(cfg *Config) (settings, error) {
	var s settings
	if t := cfg.Temperature; t != nil && (*t < 0 || *t > 2 || *t != *t) {
		return s, fmt.Errorf("openai: temperature %v: want 0 to 2", *t)
	}
	if cfg.MaxOutputTokens < 0 {
		return s, fmt.Errorf("openai: output-token limit %d: want a positive number (0: none)", cfg.MaxOutputTokens)
	}
	switch cfg.OutputTokensField {
	case "":
		cfg.OutputTokensField = FieldMaxTokens
		if u, err := url.Parse(cfg.BaseURL); err == nil && u.Host == "api.openai.com" {
			cfg.OutputTokensField = FieldMaxCompletionTokens
		}
	case FieldMaxTokens, FieldMaxCompletionTokens:
	default:
		return s, fmt.Errorf("openai: output-token field %q: want %s or %s", cfg.OutputTokensField, FieldMaxTokens, FieldMaxCompletionTokens)
	}
	switch cfg.Reasoning {
	case "":
		cfg.Reasoning = ReasoningAuto
	case ReasoningAuto, ReasoningAll, ReasoningOff:
	default:
		return s, fmt.Errorf("openai: reasoning %q: want %s, %s or %s", cfg.Reasoning, ReasoningAuto, ReasoningAll, ReasoningOff)
	}
	var err error
	if s.extra, err = parseExtra(cfg.Extra); err != nil {
		return s, err
	}
	if s.toolChoice, err = toolChoiceOf(cfg.ToolChoice, cfg.Tools); err != nil {
		return s, err
	}
	s.responseFormat, err = responseFormatOf(cfg.OutputSchema, cfg.OutputSchemaName, cfg.StructuredOutput)
	return s, err
}

// maxDetail bounds the error text of one attempt (server bodies can be
// long) that reaches the kernel, the trace and the user.
const maxDetail = 300

func (m *Model) fail(f kernel.Failure, detail string) error {
	return ports.Fail(f, errors.New(m.redact.Redact(detail)))
}

// clean makes an attempt's error text fit to leave the adapter: the key
// redacted first, then cut to maxDetail.
func (m *Model) clean(detail string) string {
	return textcut.Clip(m.redact.Redact(detail), maxDetail)
}

// redactURL drops userinfo from a URL for error messages.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparseable URL)"
}
