package openai_test

import (
	"context"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// Tool-call shapes of OpenAI-compatible servers other than OpenAI's.

// recordTools is a tool port that records what ran.
func recordTools() (ports.Tools, func() []string) {
	var (
		mu  sync.Mutex
		ran []string
	)
	tl := ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
		mu.Lock()
		ran = append(ran, c.ID+" "+c.Name+" "+c.Arguments)
		mu.Unlock()
		return ports.ToolResult{Status: kernel.ToolOK, Content: "ok"}
	})
	return tl, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(ran)
		sort.Strings(out)
		return out
	}
}

// TestGeminiCallsWithoutIndex: Gemini's OpenAI layer sends tool calls
// without an index, several whole calls in one chunk, with ids like
// "function-call-123": each is its own call, none merged into another.
func TestGeminiCallsWithoutIndex(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("done", 100)
			return
		}
		_ = w.Raw(`data: {"choices":[{"delta":{"role":"assistant","tool_calls":[` +
			`{"function":{"arguments":"{\"path\":\"a\"}","name":"read_file"},"id":"function-call-1","type":"function"},` +
			`{"function":{"arguments":"{\"path\":\"b\"}","name":"read_file"},"id":"function-call-2","type":"function"}]},"index":0}],` +
			`"created":1,"model":"gemini-2.5-flash","object":"chat.completion.chunk"}`)
		_ = w.Raw(`data: {"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"path\":\".\"}","name":"list_dir"},"id":"function-call-3","type":"function"}]},"finish_reason":"tool_calls","index":0}],"object":"chat.completion.chunk"}`)
		_ = w.Done()
	})
	defer srv.Close()
	tl, ran := recordTools()
	end, _ := runTurn(t, newModel(t, srv, nil), tl, "read")
	want := []string{`function-call-1 read_file {"path":"a"}`, `function-call-2 read_file {"path":"b"}`, `function-call-3 list_dir {"path":"."}`}
	if end.Outcome != kernel.OutcomeCompleted || !slices.Equal(ran(), want) {
		t.Errorf("turn %s %q, ran %q", end.Outcome, end.Text, ran())
	}
}

// TestWholeCallWithFinishStop: Ollama and some llama.cpp builds send a
// whole tool call in one chunk and finish with "stop", not "tool_calls":
// the call runs (what arrived decides, not the reason).
func TestWholeCallWithFinishStop(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("listed", 100)
			return
		}
		_ = w.Raw(`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","model":"llama3.1","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_x1","index":0,"type":"function","function":{"name":"list_dir","arguments":"{\"path\":\".\"}"}}]},"finish_reason":null}]}`)
		_ = w.Raw(`data: {"id":"chatcmpl-9","object":"chat.completion.chunk","model":"llama3.1","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}`)
		_ = w.Done()
	})
	defer srv.Close()
	tl, ran := recordTools()
	end, _ := runTurn(t, newModel(t, srv, nil), tl, "list")
	if end.Outcome != kernel.OutcomeCompleted || end.Text != "listed" || !slices.Equal(ran(), []string{`call_x1 list_dir {"path":"."}`}) {
		t.Errorf("turn %s %q, ran %q", end.Outcome, end.Text, ran())
	}
}

// TestVLLMCallShapes: vLLM repeats the call id on every argument chunk,
// may send the arguments whole in the first chunk and then empty-string
// deltas, and sends "content": null beside tool calls; a server that
// repeats the id on fragments without an index continues that call rather
// than starting a new one per fragment.
func TestVLLMCallShapes(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("fine", 100)
			return
		}
		// Call 0: id on every fragment, arguments split.
		_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"chatcmpl-tool-a1","type":"function","function":{"name":"grep"}}]},"logprobs":null,"finish_reason":null}]}`)
		_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"id":"chatcmpl-tool-a1","type":"function","function":{"arguments":"{\"pattern\":\"x\","}}]},"finish_reason":null}]}`)
		_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"id":"chatcmpl-tool-a1","type":"function","function":{"arguments":"\"path\":\".\"}"}}]},"finish_reason":null}]}`)
		// Call 1: arguments whole at once, then empty deltas.
		_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":1,"id":"chatcmpl-tool-b2","type":"function","function":{"name":"list_dir","arguments":"{\"path\":\"sub\"}"}}]},"finish_reason":null}]}`)
		_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":1,"function":{"arguments":""}}]},"finish_reason":null}]}`)
		_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":1,"id":"chatcmpl-tool-b2","function":{"arguments":""}}]},"finish_reason":null}]}`)
		// Call 2: no index, the id repeated on each fragment.
		_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"tool-c3","type":"function","function":{"name":"read_file","arguments":"{\"path\":"}}]},"finish_reason":null}]}`)
		_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"id":"tool-c3","type":"function","function":{"arguments":"\"c\"}"}}]},"finish_reason":null}]}`)
		_ = w.End("tool_calls")
	})
	defer srv.Close()
	tl, ran := recordTools()
	end, _ := runTurn(t, newModel(t, srv, nil), tl, "go")
	want := []string{`chatcmpl-tool-a1 grep {"pattern":"x","path":"."}`, `chatcmpl-tool-b2 list_dir {"path":"sub"}`, `tool-c3 read_file {"path":"c"}`}
	if end.Outcome != kernel.OutcomeCompleted || !slices.Equal(ran(), want) {
		t.Errorf("turn %s %q, ran %q\nwant %q", end.Outcome, end.Text, ran(), want)
	}
}

// TestExtraFieldsIgnored: the fields other servers add — Azure's
// prompt_filter_results in a first chunk without choices, system
// fingerprints, logprobs, Groq's x_groq, llama.cpp's timings, a usage-only
// last chunk — change nothing in the answer.
func TestExtraFieldsIgnored(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Raw(`data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}`)
		_ = w.Raw(`data: {"id":"x","object":"chat.completion.chunk","system_fingerprint":"fp_44709d6fcb","x_groq":{"id":"req_01"},"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"logprobs":{"content":[{"token":"Hel","logprob":-0.01,"bytes":[72,101,108],"top_logprobs":[]}]},"finish_reason":null,"content_filter_results":{}}]}`)
		_ = w.Raw(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"},"logprobs":null,"finish_reason":null}],"timings":{"predicted_ms":12.5}}`)
		_ = w.Raw(`data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":null}],"x_groq":{"id":"req_01","usage":{"queue_time":0.01,"prompt_tokens":9,"completion_tokens":2}}}`)
		_ = w.Raw(`data: {"id":"x","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0}}}`)
		_ = w.Done()
	})
	defer srv.Close()
	s := newSink()
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
		t.Fatal(err)
	}
	if s.text.String() != "Hello" || s.usage == nil || s.usage.CompletionTokens != 2 || s.progress != 0 {
		t.Errorf("text %q, usage %+v, progress %d", s.text.String(), s.usage, s.progress)
	}
}

// TestOddUsageIgnored: token accounting is ancillary — counts written as
// 12.0 are read, older Groq's x_groq.usage is read when the chunk has no
// usage of its own, the cached and reasoning parts are read from OpenAI's
// details (DeepSeek's cache hits when those are absent), and a usage or a
// detail of any other shape is ignored; none of it ever fails the answer
// it rides on.
func TestOddUsageIgnored(t *testing.T) {
	for _, tc := range []struct {
		name, chunk string
		want        *kernel.Usage
	}{
		{"float counts", `"usage":{"prompt_tokens":3.0,"completion_tokens":4.0}`, &kernel.Usage{PromptTokens: 3, CompletionTokens: 4}},
		{"x_groq", `"x_groq":{"id":"req_1","usage":{"prompt_tokens":9,"completion_tokens":2}}`, &kernel.Usage{PromptTokens: 9, CompletionTokens: 2}},
		{"own usage first", `"usage":{"prompt_tokens":1,"completion_tokens":1},"x_groq":{"usage":{"prompt_tokens":9,"completion_tokens":2}}`, &kernel.Usage{PromptTokens: 1, CompletionTokens: 1}},
		{"counts as text", `"usage":{"prompt_tokens":"12","completion_tokens":"7"}`, nil},
		{"a number", `"usage":5`, nil},
		{"negative", `"usage":{"prompt_tokens":-1,"completion_tokens":2}`, nil},
		{"x_groq not an object", `"x_groq":"fast"`, nil},
		// The breakdowns: cached input and reasoning output.
		{"OpenAI details", `"usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":12}}`,
			&kernel.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 64, ReasoningTokens: 12}},
		{"DeepSeek cache hits", `"usage":{"prompt_tokens":374,"completion_tokens":61,"prompt_cache_hit_tokens":256,"prompt_cache_miss_tokens":118}`,
			&kernel.Usage{PromptTokens: 374, CompletionTokens: 61, CachedTokens: 256}},
		{"details of another shape", `"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":"none","completion_tokens_details":{"reasoning_tokens":"x"}}`,
			&kernel.Usage{PromptTokens: 5, CompletionTokens: 1}},
		{"null details", `"usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":null}`, &kernel.Usage{PromptTokens: 5, CompletionTokens: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				_ = w.Raw(`data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`)
				_ = w.Raw(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],` + tc.chunk + `}`)
				_ = w.Done()
			})
			defer srv.Close()
			s := newSink()
			if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
				t.Fatal(err)
			}
			if s.text.String() != "Hi" {
				t.Errorf("text %q", s.text.String())
			}
			switch {
			case tc.want == nil && s.usage != nil:
				t.Errorf("usage %+v, want none", *s.usage)
			case tc.want != nil && (s.usage == nil || *s.usage != *tc.want):
				t.Errorf("usage %+v, want %+v", s.usage, *tc.want)
			}
		})
	}
}
