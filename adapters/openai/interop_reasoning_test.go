package openai_test

import (
	"context"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// reasoningDelta is a chunk carrying only reasoning in field (DeepSeek's
// and vLLM's reasoning_content, OpenRouter's and Ollama's reasoning).
func reasoningDelta(field, text string) string {
	return `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"` + field + `":"` + text + `"},"finish_reason":null}]}`
}

// TestReasoningIsNoAnswer: reasoning deltas before the answer — in any of
// the fields servers use, and Mistral's "thinking" content parts — are not
// mixed into the answer text, and are reported as progress so the kernel's
// watchdogs see a live stream (at most one progress per progressEvery of
// the adapter's clock, which this test holds still: one). Text given as a
// list of parts is read.
func TestReasoningIsNoAnswer(t *testing.T) {
	for name, thinking := range map[string][]string{
		"reasoning_content": {reasoningDelta("reasoning_content", "Let me think"), reasoningDelta("reasoning_content", " harder.")},
		"reasoning":         {reasoningDelta("reasoning", "Let me think"), `data: {"choices":[{"index":0,"delta":{"content":"","reasoning":" harder.","reasoning_details":[{"type":"reasoning.text","text":" harder."}]},"finish_reason":null}]}`},
		"thinking parts":    {`data: {"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"Let me think"}]}]},"finish_reason":null}]}`},
	} {
		t.Run(name, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				for _, line := range thinking {
					_ = w.Raw(line)
				}
				_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"The answer "}]},"finish_reason":null}]}`)
				_ = w.Text("is 42.")
				_ = w.End("stop")
			})
			defer srv.Close()
			s := newSink()
			if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
				t.Fatal(err)
			}
			if got := s.text.String(); got != "The answer is 42." || s.progress != 1 {
				t.Errorf("text %q, %d progress reports; want only the answer, and one progress", got, s.progress)
			}
		})
	}
}

// TestReasoningOnlyIsNoAnswer: a stream that reasons and then ends with
// [DONE] and no answer is an empty answer (a bad response, not retried),
// and one whose token limit ran out while it reasoned says so.
func TestReasoningOnlyIsNoAnswer(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Raw(reasoningDelta("reasoning_content", "Hmm."))
		_ = w.Done()
	})
	defer srv.Close()
	s := newSink()
	err := newModel(t, srv, nil).Stream(context.Background(), request(), s)
	if failure(err) != kernel.FailureBadResponse || err == nil || !strings.HasPrefix(err.Error(), "empty answer") || len(srv.Requests()) != 1 {
		t.Errorf("err %v (%s), %d requests", err, failure(err), len(srv.Requests()))
	}

	cut := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Raw(reasoningDelta("reasoning_content", "Hmm, first consider"))
		_ = w.End("length")
	})
	defer cut.Close()
	err = newModel(t, cut, nil).Stream(context.Background(), request(), newSink())
	if failure(err) != kernel.FailureBadResponse || err == nil || !strings.Contains(err.Error(), `token limit (finish_reason "length"`) {
		t.Errorf("reasoning cut at length: err %v (%s)", err, failure(err))
	}
}

// TestArgumentsAsObject: a server that sends a call's arguments as a JSON
// object rather than a string gets them passed as that object's JSON text.
func TestArgumentsAsObject(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_o","type":"function","function":{"name":"list_dir","arguments":{"path":"."}}}]},"finish_reason":"tool_calls"}]}`)
		_ = w.Done()
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
		t.Fatal(err)
	}
	if got := s.assembled(); len(got) != 1 || got[0] != (kernel.ToolCall{ID: "call_o", Name: "list_dir", Arguments: `{"path":"."}`}) {
		t.Errorf("calls %+v", got)
	}
}

// TestReasoningThenDisconnectRetried: a connection lost while the model was
// still reasoning — progress reported, no answer text or call yet — is
// retried like one lost before the first token, for a sink with progress
// and one without; the answer comes from the second attempt.
func TestReasoningThenDisconnectRetried(t *testing.T) {
	for _, withProgress := range []bool{true, false} {
		n := 0
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			n++
			if n == 1 {
				_ = w.Raw(reasoningDelta("reasoning_content", "Hmm"))
				w.Hangup()
				return
			}
			_ = w.Text("ok")
			_ = w.End("stop")
		})
		s := newSink()
		var target ports.Sink = s
		if !withProgress {
			target = struct{ ports.Sink }{s} // hides Progress
		}
		err := newModel(t, srv, nil).Stream(context.Background(), request(), target)
		srv.Close()
		if err != nil || s.text.String() != "ok" || len(srv.Requests()) != 2 {
			t.Errorf("progress sink %v: err %v, text %q, %d requests", withProgress, err, s.text.String(), len(srv.Requests()))
		}
		if withProgress && s.progress != 1 {
			t.Errorf("progress reported %d times, want 1", s.progress)
		}
	}
}
