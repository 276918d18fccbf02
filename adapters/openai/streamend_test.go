package openai_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// TestStreamErrorAfterTokens: once tokens reached the kernel, a failure is
// a typed stream error and is never retried (it would duplicate them),
// whatever arrived first (text, a refusal, a tool call, a legacy
// function_call) and however the stream failed (an error event, even one
// whose code would be retried before tokens; a hangup; a clean end without
// [DONE] or a finish_reason).
func TestStreamErrorAfterTokens(t *testing.T) {
	firsts := map[string]func(w *fakeopenai.Writer){
		"text": func(w *fakeopenai.Writer) { _ = w.Text("Half an "); _ = w.Text("answer") },
		"refusal": func(w *fakeopenai.Writer) {
			_ = w.Raw(`data: {"id":"x","choices":[{"index":0,"delta":{"refusal":"I can't"},"finish_reason":null}]}`)
		},
		"tool call": func(w *fakeopenai.Writer) { _ = w.CallStart(0, "call_1", "grep") },
		"function_call": func(w *fakeopenai.Writer) {
			_ = w.Raw(`data: {"id":"x","choices":[{"index":0,"delta":{"function_call":{"name":"grep","arguments":"{"}},"finish_reason":null}]}`)
		},
	}
	fails := map[string]func(w *fakeopenai.Writer){
		"error event":      func(w *fakeopenai.Writer) { _ = w.ErrorEvent("internal server error", "server_error", 500) },
		"rate limit event": func(w *fakeopenai.Writer) { _ = w.ErrorEvent("slow down", "requests", "rate_limit_exceeded") },
		"hangup":           func(w *fakeopenai.Writer) { w.Hangup() },
		"end without done": func(w *fakeopenai.Writer) {},
	}
	for fname, first := range firsts {
		for name, fail := range fails {
			t.Run(fname+" then "+name, func(t *testing.T) {
				srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
					first(w)
					fail(w)
				})
				defer srv.Close()
				s := newSink()
				err := newModel(t, srv, nil).Stream(context.Background(), request(), s)
				if failure(err) != kernel.FailureStream || !strings.Contains(err.Error(), "stream broke after tokens arrived") {
					t.Errorf("err %v (%s), want a stream failure", err, failure(err))
				}
				if len(srv.Requests()) != 1 || len(s.retries) != 0 {
					t.Errorf("%d requests, retries %v", len(srv.Requests()), s.retries)
				}
			})
		}
	}
}

// TestDoneWithoutFinishReason: `data: [DONE]` after text is a normal end
// even without a finish_reason (an npm mock server and some proxies never
// send one): the answer is whole, not a failure.
func TestDoneWithoutFinishReason(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.AnswerNoFinish("Hello, world!", 5)
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if s.text.String() != "Hello, world!" || s.usage == nil || len(srv.Requests()) != 1 {
		t.Errorf("text %q, usage %+v, %d requests", s.text.String(), s.usage, len(srv.Requests()))
	}
}

// TestDoneAfterToolCallsWithoutFinishReason: fully streamed tool calls
// followed by [DONE] (no finish_reason) run, and the turn completes.
func TestDoneAfterToolCallsWithoutFinishReason(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.AnswerNoFinish("listed", 3)
			return
		}
		_ = w.Call(0, "call_1", "list_dir", `{"path":"."}`, 4)
		_ = w.Done()
	})
	defer srv.Close()
	var ran []string
	tl := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
		ran = append(ran, c.Name+" "+c.Arguments)
		return ports.ToolResult{Status: kernel.ToolOK, Content: "a.txt"}
	})
	end, _ := runTurn(t, newModel(t, srv, nil), tl, "list")
	if end.Outcome != kernel.OutcomeCompleted || end.Text != "listed" || !slices.Equal(ran, []string{`list_dir {"path":"."}`}) {
		t.Errorf("turn %s %q, tools %q", end.Outcome, end.Text, ran)
	}
}

// TestEmptyStreamRefused: [DONE] with nothing before it (or only a role
// delta and usage) is not an answer: an empty assistant message is not a
// valid one, so the request fails as a bad response, once, saying so.
// (A finish_reason with no text is different: the model chose to say
// nothing, and the kernel completes the turn with empty text.)
func TestEmptyStreamRefused(t *testing.T) {
	for name, script := range map[string]func(w *fakeopenai.Writer){
		"bare [DONE]": func(w *fakeopenai.Writer) { _ = w.Done() },
		"role and usage only": func(w *fakeopenai.Writer) {
			_ = w.Raw(`data: {"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`)
			_ = w.Usage(10, 0)
			_ = w.Done()
		},
	} {
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { script(w) })
		s := newSink()
		err := newModel(t, srv, nil).Stream(context.Background(), request(), s)
		if failure(err) != kernel.FailureBadResponse || err == nil || !strings.Contains(err.Error(), "empty answer: the stream said [DONE] before any text, tool call or finish_reason") {
			t.Errorf("%s: err %v (%s)", name, err, failure(err))
		}
		if n := len(srv.Requests()); n != 1 || len(s.retries) != 0 {
			t.Errorf("%s: %d requests, retries %q", name, n, s.retries)
		}
		srv.Close()
	}

	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.End("stop") })
	defer srv.Close()
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), newSink()); err != nil {
		t.Errorf("finish_reason with no text: %v, want a normal end", err)
	}
}

// TestStreamEndWithoutDone: a body that ends without [DONE] and without a
// finish_reason was cut off. Before any token it is a disconnect, retried;
// after tokens a stream failure (TestStreamErrorAfterTokens).
func TestStreamEndWithoutDone(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Raw(": keep-alive")
	})
	defer srv.Close()
	s := newSink()
	err := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 1 }).Stream(context.Background(), request(), s)
	if failure(err) != kernel.FailureDisconnect || err == nil || err.Error() != "stream ended without [DONE] or a finish_reason (connection closed) (gave up after 2 attempts)" {
		t.Errorf("err %v (%s)", err, failure(err))
	}
	if len(srv.Requests()) != 2 || len(s.retries) != 1 {
		t.Errorf("%d requests, retries %q", len(srv.Requests()), s.retries)
	}
}

// TestDoneSplitAndHugeToken: [DONE] split across reads and a 1 MiB token
// (a line far longer than what the [DONE] watcher keeps) still end the
// stream normally, with every byte of the token delivered.
func TestDoneSplitAndHugeToken(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text(huge)
		_ = w.Text(`data: [DONE] inside a token is text`)
		_ = w.Split("data: [DONE]", 3)
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := s.text.String(); got != huge+`data: [DONE] inside a token is text` {
		t.Errorf("text of %d bytes, want %d", len(got), len(huge)+35)
	}
}

// TestHugeLineRefused: one event-stream line past MaxLineBytes fails the
// request as a bad response, not retried, before go-openai buffers the rest
// of the line (a 50 MB token once took the process to 653 MB); text that
// arrived before it stays the kernel's partial, and a line within the bound
// passes whole.
func TestHugeLineRefused(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text("before ")
		_ = w.Text(strings.Repeat("x", 8<<20))
		_ = w.Done()
	})
	defer srv.Close()
	s := newSink()
	err := newModel(t, srv, func(c *openai.Config) { c.MaxLineBytes = 1 << 20 }).Stream(context.Background(), request(), s)
	if failure(err) != kernel.FailureStream || !strings.Contains(err.Error(), "went past 1048576 bytes") {
		t.Fatalf("err %v (%s), want a stream failure naming the line bound", err, failure(err))
	}
	if got := s.text.String(); got != "before " || len(srv.Requests()) != 1 {
		t.Fatalf("text %q, %d requests", got, len(srv.Requests()))
	}

	first := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text(strings.Repeat("y", 2<<20))
		_ = w.Done()
	})
	defer first.Close()
	err = newModel(t, first, func(c *openai.Config) { c.MaxLineBytes = 1 << 20 }).Stream(context.Background(), request(), newSink())
	if failure(err) != kernel.FailureBadResponse || len(first.Requests()) != 1 {
		t.Fatalf("a huge first line: err %v (%s), %d requests; want one bad_response", err, failure(err), len(first.Requests()))
	}
	if openai.MaxLineFor(1<<20) <= 6<<20 {
		t.Fatal("the derived bound must let a fully escaped message of the cap through")
	}
}

// TestEmptyBodyIsADisconnect: a 200 whose body ends before its first byte
// (a proxy that drops the connection right after the headers, whatever
// Content-Type they named) is a lost connection, retried, not a page at a
// wrong base URL: there is no page to show.
func TestEmptyBodyIsADisconnect(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(200, "", "Content-Type", "application/json")
	})
	defer srv.Close()
	s := newSink()
	err := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 1 }).Stream(context.Background(), request(), s)
	if failure(err) != kernel.FailureDisconnect || err == nil || !strings.Contains(err.Error(), "stream ended without [DONE] or a finish_reason") {
		t.Errorf("err %v (%s), want a disconnect", err, failure(err))
	}
	if n := len(srv.Requests()); n != 2 || len(s.retries) != 1 {
		t.Errorf("%d requests, retries %q: want 2 and 1", n, s.retries)
	}
}

// TestOnlyTheFirstChoiceIsRead: the adapter asks for one choice; a server
// that streams others too (index 1, interleaved) does not get their text
// or calls into the answer.
func TestOnlyTheFirstChoiceIsRead(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text("first ")
		_ = w.Raw(`data: {"id":"x","choices":[{"index":1,"delta":{"content":"OTHER"},"finish_reason":null}]}`)
		_ = w.Raw(`data: {"id":"x","choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"call_other","type":"function","function":{"name":"grep","arguments":"{}"}}]},"finish_reason":null}]}`)
		_ = w.Raw(`data: {"id":"x","choices":[{"index":1,"delta":{},"finish_reason":"stop"},{"index":0,"delta":{"content":"choice"},"finish_reason":null}]}`)
		_ = w.End("stop")
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
		t.Fatal(err)
	}
	if got := s.text.String(); got != "first choice" || len(s.calls) != 0 {
		t.Errorf("text %q, calls %v: want only choice 0's text", got, s.calls)
	}
}
