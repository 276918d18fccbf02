package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// TestEveryErrorStatusClassified: every HTTP error status from 400 to 599,
// one by one, as an answer to a request. The transient ones — 408 Request
// Timeout, 429 Too Many Requests and every 5xx — are retried (MaxRetries 1:
// two requests) and fail as a server failure or a rate limit; every other
// 4xx is the same request failing the same way again: one request, a bad
// response. The error names the status.
func TestEveryErrorStatusClassified(t *testing.T) {
	for status := 400; status <= 599; status++ {
		want, requests := kernel.FailureBadResponse, 1
		switch {
		case status == http.StatusTooManyRequests:
			want, requests = kernel.FailureRateLimit, 2
		case status == http.StatusRequestTimeout || status >= 500:
			want, requests = kernel.FailureServer, 2
		}
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			w.Status(status, `{"error":{"message":"status test","type":"x"}}`)
		})
		err := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 1 }).Stream(context.Background(), request(), newSink())
		n := len(srv.Requests())
		srv.Close()
		if failure(err) != want || n != requests {
			t.Errorf("HTTP %d: %s after %d request(s), want %s after %d (%v)", status, failure(err), n, want, requests, err)
			continue
		}
		if says := fmt.Sprintf("HTTP %d", status); !strings.Contains(err.Error(), says) {
			t.Errorf("HTTP %d: %q does not say %q", status, err, says)
		}
	}
}

// TestStatusBodyRefinesClass: the two cases where the body overrules the
// status. A 429 whose code says the quota is gone is not retried (it lasts
// until someone pays), and a 400, 413 or 422 that says the request is
// longer than the model's window is a context-length failure (the kernel
// compacts); the same bodies under other statuses change nothing.
func TestStatusBodyRefinesClass(t *testing.T) {
	const quota = `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`
	const long = `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error"}}`
	for _, c := range []struct {
		status   int
		body     string
		want     kernel.Failure
		requests int
	}{
		{429, quota, kernel.FailureRateLimit, 1},
		{503, quota, kernel.FailureServer, 2},
		{403, quota, kernel.FailureBadResponse, 1},
		{400, long, kernel.FailureContextLength, 1},
		{413, long, kernel.FailureContextLength, 1},
		{422, long, kernel.FailureContextLength, 1},
		{404, long, kernel.FailureBadResponse, 1},
		{500, long, kernel.FailureServer, 2},
	} {
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			w.Status(c.status, c.body)
		})
		err := newModel(t, srv, func(cfg *openai.Config) { cfg.MaxRetries = 1 }).Stream(context.Background(), request(), newSink())
		n := len(srv.Requests())
		srv.Close()
		if failure(err) != c.want || n != c.requests {
			t.Errorf("HTTP %d %s: %s after %d request(s), want %s after %d (%v)", c.status, c.body, failure(err), n, c.want, c.requests, err)
		}
	}
}

// TestEveryFinishReasonJudged: each finish_reason a server sends, after a
// text chunk. stop, tool_calls, function_call, eos, end_turn and one no
// server defined end a whole answer; length and max_tokens (the token
// limit) and content_filter cut it — the partial text is kept, the failure
// is a cut stream, and it is not retried; error is the server giving up:
// after text it is a broken stream (what arrived cannot be taken back, so
// it is not retried), before any text it is a server failure, retried.
// Reasons are matched whatever their case.
func TestEveryFinishReasonJudged(t *testing.T) {
	for _, c := range []struct {
		reason   string
		want     kernel.Failure // FailureNone: a whole answer
		requests int
	}{
		{"stop", kernel.FailureNone, 1},
		{"tool_calls", kernel.FailureNone, 1},
		{"function_call", kernel.FailureNone, 1},
		{"eos", kernel.FailureNone, 1},
		{"end_turn", kernel.FailureNone, 1},
		{"something_new", kernel.FailureNone, 1},
		{"length", kernel.FailureStream, 1},
		{"LENGTH", kernel.FailureStream, 1},
		{"max_tokens", kernel.FailureStream, 1},
		{"content_filter", kernel.FailureStream, 1},
		{"Content_Filter", kernel.FailureStream, 1},
		{"error", kernel.FailureStream, 1},
		{"ERROR", kernel.FailureStream, 1},
	} {
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"content":"partial"},"finish_reason":null}]}`)
			_ = w.Raw(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"` + c.reason + `"}]}`)
			_ = w.Raw("data: [DONE]")
		})
		s := newSink()
		err := newModel(t, srv, func(cfg *openai.Config) { cfg.MaxRetries = 1 }).Stream(context.Background(), request(), s)
		n := len(srv.Requests())
		srv.Close()
		if failure(err) != c.want || n != c.requests {
			t.Errorf("finish_reason %q: failure %s after %d request(s), want %s after %d (%v)", c.reason, failure(err), n, c.want, c.requests, err)
			continue
		}
		if c.want == kernel.FailureStream && !strings.Contains(err.Error(), `finish_reason "`+c.reason+`"`) {
			t.Errorf("finish_reason %q: %q does not name it", c.reason, err)
		}
		if !strings.HasPrefix(s.text.String(), "partial") {
			t.Errorf("finish_reason %q: text %q, want the partial answer kept", c.reason, s.text.String())
		}
	}
	for _, reason := range []string{"error", "Error"} {
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			_ = w.Raw(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`)
			_ = w.Raw("data: [DONE]")
		})
		err := newModel(t, srv, func(cfg *openai.Config) { cfg.MaxRetries = 1 }).Stream(context.Background(), request(), newSink())
		n := len(srv.Requests())
		srv.Close()
		if failure(err) != kernel.FailureServer || n != 2 {
			t.Errorf("finish_reason %q before any text: failure %s after %d request(s), want %s after 2 (%v)", reason, failure(err), n, kernel.FailureServer, err)
		}
	}
}
