package openai_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// How answers of OpenAI-compatible servers other than OpenAI's end.

// TestFinishLengthIsATruncation: finish_reason "length" means the server
// cut the answer at its token limit. The request fails typed, saying so —
// never a normal completion passed off as the whole answer — the text so
// far is kept as partial, and a call whose arguments were cut never runs.
func TestFinishLengthIsATruncation(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text("The three reasons are: first, ")
		_ = w.End("length")
	})
	defer srv.Close()
	s := newSink()
	err := newModel(t, srv, nil).Stream(context.Background(), request(), s)
	if failure(err) != kernel.FailureStream || err == nil || !strings.Contains(err.Error(), `finish_reason "length"`) ||
		strings.Contains(err.Error(), "stream broke") || len(srv.Requests()) != 1 {
		t.Errorf("err %v (%s), %d requests: want one stream failure naming the length limit", err, failure(err), len(srv.Requests()))
	}

	calls := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text("Writing it.")
		_ = w.CallStart(0, "call_w", "write_file")
		_ = w.CallArgs(0, `{"path":"notes.md","content":"# Notes\n- one`)
		_ = w.End("length")
	})
	defer calls.Close()
	tl, ran := recordTools()
	end, k := runTurn(t, newModel(t, calls, nil), tl, "write")
	if end.Outcome != kernel.OutcomeFailed || len(ran()) != 0 || len(calls.Requests()) != 1 {
		t.Errorf("turn %s (%s), ran %q, %d requests: want a failed turn and no call run", end.Outcome, end.Reason, ran(), len(calls.Requests()))
	}
	h := k.Agent(kernel.Root).History()
	if len(h) < 2 || h[1].Content != "Writing it." || !h[1].Partial || len(h[1].ToolCalls) != 0 {
		t.Errorf("%d messages, the second %.200q: want the text kept as partial, without the cut call", len(h), h[min(1, len(h)-1)].Content)
	}
}

// TestContentFilterIsAFailure: Azure ends a filtered answer with
// finish_reason "content_filter" (after a first chunk with no choices and
// prompt_filter_results): a typed failure naming the filter and the
// categories it flagged, not a completed turn; not retried.
func TestContentFilterIsAFailure(t *testing.T) {
	for name, tc := range map[string]struct {
		before  bool
		failure kernel.Failure
	}{"after text": {true, kernel.FailureStream}, "before any text": {false, kernel.FailureBadResponse}} {
		t.Run(name, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				_ = w.Raw(`data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`)
				if tc.before {
					_ = w.Text("Here is how")
				}
				_ = w.Raw(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"content_filter","content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"medium"}}}]}`)
				_ = w.Done()
			})
			defer srv.Close()
			s := newSink()
			err := newModel(t, srv, nil).Stream(context.Background(), request(), s)
			if failure(err) != tc.failure || err == nil || !strings.Contains(err.Error(), `finish_reason "content_filter"`) ||
				!strings.Contains(err.Error(), "violence") || strings.Contains(err.Error(), "hate") || len(srv.Requests()) != 1 {
				t.Errorf("err %v (%s), %d requests", err, failure(err), len(srv.Requests()))
			}
		})
	}
}

// TestMidStreamErrorEvent: OpenRouter reports a failure after the 200 as
// an event carrying both an error and a choice with finish_reason "error";
// other servers send the error and keep the connection open. Either is a
// typed failure showing the server's message, at once: after tokens a
// stream failure, before them classified by its code (502: retried).
func TestMidStreamErrorEvent(t *testing.T) {
	openRouter := `data: {"id":"gen-1","object":"chat.completion.chunk","provider":"openai","error":{"code":502,"message":"Provider disconnected unexpectedly"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text("Half an ")
		_ = w.Raw(openRouter)
		_ = w.Done()
	})
	defer srv.Close()
	err := newModel(t, srv, nil).Stream(context.Background(), request(), newSink())
	if failure(err) != kernel.FailureStream || err == nil || !strings.Contains(err.Error(), "Provider disconnected unexpectedly (502)") {
		t.Errorf("after tokens: err %v (%s)", err, failure(err))
	}

	before := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Raw(openRouter)
		w.Stall(ctx) // the connection stays open after the error
	})
	defer before.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard, not a speed bound
	defer cancel()
	s := newSink()
	err = newModel(t, before, func(c *openai.Config) { c.MaxRetries = 1 }).Stream(ctx, request(), s)
	if ctx.Err() != nil || failure(err) != kernel.FailureServer || !strings.Contains(err.Error(), "Provider disconnected unexpectedly (502) (gave up after 2 attempts)") ||
		len(before.Requests()) != 2 || len(s.retries) != 1 {
		t.Errorf("before tokens: err %v (%s), %d requests, retries %q", err, failure(err), len(before.Requests()), s.retries)
	}
}

// TestErrorBodyWithStatus200: a 200 whose body is a bare JSON error (no
// event stream) fails with the server's message, classified by its code.
func TestErrorBodyWithStatus200(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(http.StatusOK, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`)
	})
	defer srv.Close()
	err := newModel(t, srv, nil).Stream(context.Background(), request(), newSink())
	if failure(err) != kernel.FailureBadResponse || err == nil || err.Error() != "error event in stream: Incorrect API key provided (invalid_api_key)" || len(srv.Requests()) != 1 {
		t.Errorf("err %v (%s), %d requests", err, failure(err), len(srv.Requests()))
	}
}

// TestJSONAnswerAccepted: a server or proxy that ignores stream:true and
// answers a whole chat.completion as application/json is read as one
// complete answer: its text, its tool calls (which run), its usage.
func TestJSONAnswerAccepted(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			w.Status(http.StatusOK, `{"id":"chatcmpl-2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"It holds a.txt."},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`,
				"Content-Type", "application/json; charset=utf-8")
			return
		}
		w.Status(http.StatusOK, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_j","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":7,"total_tokens":17}}`)
	})
	defer srv.Close()
	tl, ran := recordTools()
	end, _ := runTurn(t, newModel(t, srv, nil), tl, "what is here?")
	if end.Outcome != kernel.OutcomeCompleted || end.Text != "It holds a.txt." || len(ran()) != 1 || ran()[0] != `call_j list_dir {"path":"."}` {
		t.Errorf("turn %s %q, ran %q", end.Outcome, end.Text, ran())
	}

	cut := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(http.StatusOK, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Cut"},"finish_reason":"length"}]}`)
	})
	defer cut.Close()
	s := newSink()
	err := newModel(t, cut, nil).Stream(context.Background(), request(), s)
	if failure(err) != kernel.FailureStream || !strings.Contains(err.Error(), `finish_reason "length"`) || s.text.String() != "Cut" {
		t.Errorf("a whole answer cut at length: err %v (%s), text %q", err, failure(err), s.text.String())
	}

	// A whole answer is held to MaxLineBytes like a streamed event: one
	// longer is not read whole, and is refused.
	long := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(http.StatusOK, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`+strings.Repeat("x", 200)+`"},"finish_reason":"stop"}]}`)
	})
	defer long.Close()
	for _, limit := range []int{100} {
		s := newSink()
		err := newModel(t, long, func(c *openai.Config) { c.MaxLineBytes = limit }).Stream(context.Background(), request(), s)
		if failure(err) != kernel.FailureBadResponse || s.text.Len() != 0 {
			t.Errorf("a whole answer over MaxLineBytes %d: err %v (%s), text %d bytes", limit, err, failure(err), s.text.Len())
		}
	}
}

// TestGzipAndCharset: a gzip-encoded event stream and a Content-Type with
// parameters read as any other stream.
func TestGzipAndCharset(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write([]byte("data: " + chunkJSON("zipped") + "\n\ndata: " + finishJSON + "\n\ndata: [DONE]\n\n"))
	_ = zw.Close()
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(http.StatusOK, z.String(), "Content-Type", "text/event-stream; charset=utf-8", "Content-Encoding", "gzip")
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil || s.text.String() != "zipped" {
		t.Errorf("err %v, text %q", err, s.text.String())
	}
}

// TestBaseURLForms: a base URL with a trailing slash reaches the same
// endpoint; one without the API root's /v1 gets the server's 404 with the
// URL that was asked and a hint, so the user sees what to fix (a JSON 404,
// an API's "model not found", gets no such hint: TestFailureTextSaysWhy).
func TestBaseURLForms(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Path != "/v1/chat/completions" {
			w.Status(http.StatusNotFound, "404 page not found\n", "Content-Type", "text/plain; charset=utf-8")
			return
		}
		_ = w.Answer("ok", 10)
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, func(c *openai.Config) { c.BaseURL = srv.URL + "/v1/" }).Stream(context.Background(), request(), s); err != nil || s.text.String() != "ok" {
		t.Errorf("trailing slash: err %v, text %q", err, s.text.String())
	}
	err := newModel(t, srv, func(c *openai.Config) { c.BaseURL = srv.URL }).Stream(context.Background(), request(), newSink())
	want := "HTTP 404 Not Found at POST " + srv.URL + "/chat/completions (is the base URL the API root, with /v1?): 404 page not found"
	if failure(err) != kernel.FailureBadResponse || err == nil || err.Error() != want {
		t.Errorf("no /v1: err %v (%s)\nwant %s", err, failure(err), want)
	}
}

// TestCutJSONAnswerRetried: a whole JSON answer whose connection breaks
// half-way is a disconnect — retried, the second answer taken — not a body
// that is "not an event stream".
func TestCutJSONAnswerRetried(t *testing.T) {
	n := 0
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		n++
		w.Header("Content-Type", "application/json")
		if n == 1 {
			_ = w.Bytes(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hel`)
			w.Hangup()
			return
		}
		_ = w.Bytes(`{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}]}`)
	})
	defer srv.Close()
	s := newSink()
	err := newModel(t, srv, nil).Stream(context.Background(), request(), s)
	if err != nil || s.text.String() != "Hello" || len(srv.Requests()) != 2 {
		t.Fatalf("err %v (%s), text %q, %d requests", err, failure(err), s.text.String(), len(srv.Requests()))
	}
}
