package openai_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/kernel"
)

// TestAPIKeyRedacted: a server that echoes the key in its error body does
// not get it into the error text or a retry's cause, not even a prefix of
// it: a key straddling the cut at maxDetail bytes must be redacted before
// the text is cut.
func TestAPIKeyRedacted(t *testing.T) {
	for _, tc := range []struct {
		name string
		pad  int // bytes of the message before the key
	}{
		{"short body", 0},
		{"key straddles the cut", 280}, // the key spans byte maxDetail of the error text
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				msg := strings.Repeat("x", tc.pad) + strings.TrimPrefix(r.Auth, "Bearer ") + " is not a valid key"
				if r.N == 1 {
					w.Status(http.StatusInternalServerError, `{"error":{"message":"`+msg+`"}}`)
					return
				}
				w.Status(http.StatusUnauthorized, `{"error":{"message":"`+msg+`"}}`)
			})
			defer srv.Close()
			s := newSink()
			err := newModel(t, srv, nil).Stream(context.Background(), request(), s)
			if err == nil || !strings.Contains(err.Error(), "HTTP 401") {
				t.Fatalf("error %v, want the 401", err)
			}
			if len(s.retries) != 1 || !strings.Contains(s.retries[0], "HTTP 500") {
				t.Fatalf("retries %q, want one after the 500", s.retries)
			}
			prefix := apiKey[:8] // "sk-test-": what a cut key would leave
			for name, text := range map[string]string{"error": err.Error(), "retry cause": s.retries[0]} {
				if strings.Contains(text, prefix) {
					t.Errorf("%s leaks (part of) the key: %q", name, text)
				}
				if tc.pad == 0 && !strings.Contains(text, "[redacted]") {
					t.Errorf("%s lacks [redacted]: %q", name, text)
				}
			}
		})
	}
}

// TestAPIKeyPartsRedacted: a server that echoes only part of the key (a
// prefix, the middle, or the "sk-SECRET123...abcd" form OpenAI prints) does
// not get any 12-byte run of it into the error text.
func TestAPIKeyPartsRedacted(t *testing.T) {
	for name, echo := range map[string]string{
		"prefix":         apiKey[:14] + "...",
		"middle":         "key " + apiKey[4:17] + " refused",
		"first and last": apiKey[:12] + "****" + apiKey[len(apiKey)-4:],
	} {
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "Incorrect API key provided: " + echo, "code": "invalid_api_key"}})
			w.Status(http.StatusUnauthorized, string(b))
		})
		err := newModel(t, srv, nil).Stream(context.Background(), request(), newSink())
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "[redacted]") {
			t.Errorf("%s: %v, want the echo redacted", name, err)
			continue
		}
		for i := 0; i+redact.MinRun <= len(apiKey); i++ {
			if run := apiKey[i : i+redact.MinRun]; strings.Contains(err.Error(), run) {
				t.Errorf("%s: error text keeps %q of the key: %q", name, run, err.Error())
			}
		}
	}
}

// TestFailureTextSaysWhy: every failed request says why in its error text
// (which the live driver hands the kernel as the failure's detail): the HTTP
// status with its text and the server's message, read from OpenAI's body,
// Ollama's, vLLM's, FastAPI's or plain text, cut to a bounded length.
// Authentication, not-found and invalid-request errors are not retried;
// 5xx are, and say so when the retries run out.
func TestFailureTextSaysWhy(t *testing.T) {
	long := strings.Repeat("proxy says no. ", 100)
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		headers  []string
		want     string // the whole error text
		failure  kernel.Failure
		requests int
	}{
		{"401 OpenAI", http.StatusUnauthorized,
			`{"error":{"message":"Incorrect API key provided: sk-abc****wxyz.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`, nil,
			"HTTP 401 Unauthorized: Incorrect API key provided: sk-abc****wxyz. (invalid_api_key)", kernel.FailureBadResponse, 1},
		{"404 Ollama model not pulled", http.StatusNotFound,
			`{"error":"model \"llama9\" not found, try pulling it first"}`, nil,
			`HTTP 404 Not Found: model "llama9" not found, try pulling it first`, kernel.FailureBadResponse, 1},
		{"403 plain text", http.StatusForbidden, "Forbidden by\n  proxy policy\n", []string{"Content-Type", "text/plain"},
			"HTTP 403 Forbidden: Forbidden by proxy policy", kernel.FailureBadResponse, 1},
		{"400 vLLM", http.StatusBadRequest,
			`{"object":"error","message":"maximum context length is 4096 tokens","type":"BadRequestError","param":null,"code":400}`, nil,
			"HTTP 400 Bad Request: maximum context length is 4096 tokens (BadRequestError)", kernel.FailureContextLength, 1},
		{"422 FastAPI", http.StatusUnprocessableEntity, `{"detail":[{"loc":["body","model"],"msg":"field required"}]}`, nil,
			`HTTP 422 Unprocessable Entity: [{"loc":["body","model"],"msg":"field required"}]`, kernel.FailureBadResponse, 1},
		{"400 message list", http.StatusBadRequest, `{"statusCode":400,"message":["model must be a string","messages should not be empty"]}`, nil,
			"HTTP 400 Bad Request: model must be a string, messages should not be empty", kernel.FailureBadResponse, 1},
		{"429 quota gone", http.StatusTooManyRequests,
			`{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, nil,
			"HTTP 429 Too Many Requests: You exceeded your current quota (insufficient_quota)", kernel.FailureRateLimit, 1},
		{"500 after retries", http.StatusInternalServerError, `{"error":{"message":"boom","type":"server_error"}}`, nil,
			"HTTP 500 Internal Server Error: boom (server_error) (gave up after 3 attempts)", kernel.FailureServer, 3},
		{"502 empty body", http.StatusBadGateway, "", nil,
			"HTTP 502 Bad Gateway (gave up after 3 attempts)", kernel.FailureServer, 3},
		{"403 long body", http.StatusForbidden, long, []string{"Content-Type", "text/html"},
			"HTTP 403 Forbidden: " + long[:300-len("HTTP 403 Forbidden: ")] + "…", kernel.FailureBadResponse, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				w.Status(tc.status, tc.body, tc.headers...)
			})
			defer srv.Close()
			s := newSink()
			err := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 2 }).Stream(context.Background(), request(), s)
			if err == nil || err.Error() != tc.want || failure(err) != tc.failure {
				t.Errorf("err %v (%s)\nwant %s (%s)", err, failure(err), tc.want, tc.failure)
			}
			if n := len(srv.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

// TestNotAnEventStream: a 200 that is not SSE (a web page at a wrong base
// URL) fails at once and says what arrived instead.
func TestNotAnEventStream(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(http.StatusOK, "<html>\n<body>Welcome to nginx!</body>\n</html>\n", "Content-Type", "text/html")
	})
	defer srv.Close()
	err := newModel(t, srv, nil).Stream(context.Background(), request(), newSink())
	want := `not an event stream (Content-Type "text/html", no data: line; is the base URL the API root?): <html> <body>Welcome to nginx!</body> </html>`
	if failure(err) != kernel.FailureBadResponse || err.Error() != want || len(srv.Requests()) != 1 {
		t.Errorf("err %v (%s), %d requests\nwant %s", err, failure(err), len(srv.Requests()), want)
	}
}

// TestErrorEventInvalidAPIKeyNotRetried: a server that reports a bad key as
// an error event inside a 200 stream gets exactly one request, and the
// error says what the server said.
func TestErrorEventInvalidAPIKeyNotRetried(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.ErrorEvent("Incorrect API key provided", "invalid_request_error", "invalid_api_key")
	})
	defer srv.Close()
	s := newSink()
	err := newModel(t, srv, nil).Stream(context.Background(), request(), s)
	if n := len(srv.Requests()); n != 1 || len(s.retries) != 0 {
		t.Errorf("%d requests, retries %q: want exactly one request", n, s.retries)
	}
	if failure(err) != kernel.FailureBadResponse || err == nil || err.Error() != "error event in stream: Incorrect API key provided (invalid_api_key)" {
		t.Errorf("err %v (%s)", err, failure(err))
	}
}

// TestErrorEventsClassified: an error event before the first token is
// classified by its code, then its type, like the HTTP statuses: auth,
// permission, not found and invalid requests fail at once; rate limits,
// server errors and overload are retried (and give up typed); one that
// names nothing known is a server failure. Ollama's string form keeps its
// message.
func TestErrorEventsClassified(t *testing.T) {
	for _, tc := range []struct {
		name     string
		line     string
		failure  kernel.Failure
		requests int
		says     string
	}{
		{"model_not_found code", `data: {"error":{"message":"The model x does not exist","type":"invalid_request_error","code":"model_not_found"}}`, kernel.FailureBadResponse, 1, "The model x does not exist (model_not_found)"},
		{"authentication_error type", `data: {"error":{"message":"invalid x-api-key","type":"authentication_error"}}`, kernel.FailureBadResponse, 1, "invalid x-api-key (authentication_error)"},
		{"permission_error type", `data: {"error":{"message":"no access","type":"permission_error"}}`, kernel.FailureBadResponse, 1, "no access"},
		{"numeric 401 code", `data: {"error":{"message":"unauthorized","code":401}}`, kernel.FailureBadResponse, 1, "unauthorized (401)"},
		// Too long for the window: its own class, never retried as is (the
		// kernel compacts and asks again).
		{"context length", `data: {"error":{"message":"too long","code":"context_length_exceeded"}}`, kernel.FailureContextLength, 1, "too long"},
		{"llama.cpp context size", `data: {"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`, kernel.FailureContextLength, 1, "the request exceeds the available context size, try increasing it (400)"},
		{"insufficient_quota", `data: {"error":{"message":"quota","type":"insufficient_quota"}}`, kernel.FailureRateLimit, 1, "quota"},
		{"rate_limit_exceeded", `data: {"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`, kernel.FailureRateLimit, 3, "slow down (rate_limit_exceeded) (gave up after 3 attempts)"},
		// OpenAI's rate-limit errors name the limit that was hit as their
		// type: requests or tokens.
		{"requests type", `data: {"error":{"message":"slow down","type":"requests"}}`, kernel.FailureRateLimit, 3, "slow down"},
		{"tokens type", `data: {"error":{"message":"slow down","type":"tokens"}}`, kernel.FailureRateLimit, 3, "slow down"},
		{"server_error type", `data: {"error":{"message":"The server had an error","type":"server_error"}}`, kernel.FailureServer, 3, "The server had an error (server_error)"},
		{"numeric 500 code", `data: {"error":{"message":"internal","type":"api_error","code":500}}`, kernel.FailureServer, 3, "internal (500)"},
		// A numeric code anywhere in 400–599 is a status and decides before
		// the type; one outside that range says nothing and the type decides.
		{"numeric 599 code before a client type", `data: {"error":{"message":"edge","type":"invalid_request_error","code":599}}`, kernel.FailureServer, 3, "edge (599)"},
		{"numeric 400 code before a server type", `data: {"error":{"message":"edge","type":"server_error","code":400}}`, kernel.FailureBadResponse, 1, "edge (400)"},
		{"numeric 600 code is no status", `data: {"error":{"message":"edge","type":"invalid_request_error","code":600}}`, kernel.FailureBadResponse, 1, "edge (600)"},
		{"numeric 399 code is no status", `data: {"error":{"message":"edge","type":"server_error","code":399}}`, kernel.FailureServer, 3, "edge (399)"},
		{"overloaded", `data: {"error":{"message":"Overloaded","type":"overloaded_error"}}`, kernel.FailureServer, 3, "Overloaded (overloaded_error)"},
		{"unknown code", `data: {"error":{"message":"odd","code":"flux_capacitor"}}`, kernel.FailureServer, 3, "odd (flux_capacitor)"},
		{"Ollama string", `data: {"error":"model requires more system memory (9.8 GiB) than is available (4.1 GiB)"}`, kernel.FailureServer, 3, "model requires more system memory (9.8 GiB) than is available (4.1 GiB)"},
		// Codes and types are matched whatever their case and padding.
		{"capitalised type", `data: {"error":{"message":"who are you","type":" Authentication_Error "}}`, kernel.FailureBadResponse, 1, "who are you"},
		// A one-digit code (gRPC-style, as some gateways pass on) is no
		// status, and is still named.
		{"one-digit code", `data: {"error":{"message":"exhausted","code":8}}`, kernel.FailureServer, 3, "exhausted (8)"},
		{"spaced data prefix", `data:   {"error":{"message":"bad key","code":"invalid_api_key"}}`, kernel.FailureBadResponse, 1, "bad key (invalid_api_key)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				_ = w.Raw(": keep-alive")
				_ = w.Raw(tc.line)
			})
			defer srv.Close()
			err := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 2 }).Stream(context.Background(), request(), newSink())
			if failure(err) != tc.failure || err == nil || !strings.Contains(err.Error(), "error event in stream: "+tc.says) {
				t.Errorf("err %v (%s), want %s saying %q", err, failure(err), tc.failure, tc.says)
			}
			if n := len(srv.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

// TestProviderNestedCauseShown: a router's error whose own message says
// only "Provider returned error" (OpenRouter's) shows the cause it passes
// on from the provider behind it — error.metadata.raw, as text or as the
// provider's own error body, with the provider's name — or the reasons of
// a moderation refusal; in an HTTP error and in an error event alike.
func TestProviderNestedCauseShown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int    // an HTTP error; 0 for an error event in a 200 stream
		body   string // the body, or the event's data
		want   string
	}{
		{"raw text", http.StatusTooManyRequests,
			`{"error":{"code":429,"message":"Provider returned error","metadata":{"provider_name":"Google","raw":"google/gemma-7b:free is temporarily rate-limited upstream."}},"user_id":"u1"}`,
			"HTTP 429 Too Many Requests: Provider returned error (Google): google/gemma-7b:free is temporarily rate-limited upstream."},
		{"raw error body", http.StatusBadGateway,
			`{"error":{"code":502,"message":"Provider returned error","metadata":{"provider_name":"Together","raw":"{\"error\":{\"message\":\"model overloaded, retry later\",\"type\":\"server_error\"}}"}}}`,
			"HTTP 502 Bad Gateway: Provider returned error (Together): model overloaded, retry later (server_error)"},
		{"raw object", http.StatusBadRequest,
			`{"error":{"code":400,"message":"Provider returned error","metadata":{"raw":{"detail":"temperature must be at most 1"}}}}`,
			"HTTP 400 Bad Request: Provider returned error: temperature must be at most 1"},
		{"moderation reasons", http.StatusForbidden,
			`{"error":{"code":403,"message":"Your chosen model requires moderation and your input was flagged","metadata":{"reasons":["violence","harassment"],"provider_name":"OpenAI","flagged_input":"..."}}}`,
			"HTTP 403 Forbidden: Your chosen model requires moderation and your input was flagged (OpenAI): violence, harassment"},
		{"error event", 0,
			`{"error":{"code":"server_error","message":"Provider returned error","metadata":{"provider_name":"Fireworks","raw":"upstream connect error"}}}`,
			"error event in stream: Provider returned error (server_error) (Fireworks): upstream connect error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				if tc.status != 0 {
					w.Status(tc.status, tc.body)
					return
				}
				_ = w.Raw("data: " + tc.body)
			})
			defer srv.Close()
			err := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 0 }).Stream(context.Background(), request(), newSink())
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err %v\nwant it to start %s", err, tc.want)
			}
		})
	}
}
