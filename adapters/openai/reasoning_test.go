package openai_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// failingTools answers every call with an error result.
var failingTools = ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
	return ports.ToolResult{Status: kernel.ToolError, Content: "unknown tool " + c.Name}
})

// recordedReasoning is the reasoning_content a recorded stream carried, in
// order, and its usage chunk's counts.
func recordedReasoning(t *testing.T, body string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					ReasoningContent *string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("recorded chunk: %v", err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.ReasoningContent != nil {
				b.WriteString(*ch.Delta.ReasoningContent)
			}
		}
	}
	return b.String()
}

// TestDeepSeekReasoningSentBack: DeepSeek's thinking mode reasons, then
// calls a tool (the recorded stream of deepseek-reasoner); the follow-up
// request carries that reasoning back, whole, as reasoning_content on the
// assistant message with the call — without it DeepSeek answers 400 "The
// reasoning_content in the thinking mode must be passed back to the API".
// The reasoning is never in the answer, and the request's usage (cached and
// reasoning tokens included) rides on its end.
func TestDeepSeekReasoningSentBack(t *testing.T) {
	recorded := providerStream(t, "deepseek-reasoner-tool-call.body.sse")
	thought := recordedReasoning(t, recorded)
	if len(thought) < 40 {
		t.Fatalf("the recording's reasoning is %q", thought)
	}
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.N == 1 {
			_ = w.Bytes(recorded)
			return
		}
		_ = w.Answer("I cannot check the weather.", 5)
	})
	defer srv.Close()
	end, k := runTurn(t, newModel(t, srv, nil), failingTools, "What is the weather in San Francisco?")
	if end.Outcome != kernel.OutcomeCompleted || end.Text != "I cannot check the weather." {
		t.Fatalf("turn ended %s %q", end.Outcome, end.Text)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	msgs := messagesOf(t, bodyOf(t, reqs[1]))
	var withCalls map[string]any
	for _, m := range msgs {
		if m["role"] == "assistant" && m["tool_calls"] != nil {
			withCalls = m
		}
	}
	if withCalls == nil || withCalls["reasoning_content"] != thought {
		t.Fatalf("the follow-up's assistant message with calls is %v; want reasoning_content %q", withCalls, thought)
	}
	calls, _ := withCalls["tool_calls"].([]any)
	if c, _ := calls[0].(map[string]any); c["id"] != "call_00_IhCAliIHtM9gKpgfqbBV9873" {
		t.Fatalf("call %v", calls)
	}
	for _, m := range msgs {
		if m["role"] != "assistant" && m["reasoning_content"] != nil {
			t.Fatalf("reasoning on a %s message", m["role"])
		}
	}
	var first *kernel.Usage
	_ = k.Log().Range(1, func(l kernel.Lifecycle) bool {
		if l.Kind == kernel.LifeOpEnded && l.Usage != nil && first == nil {
			first = l.Usage
		}
		return true
	})
	if first == nil || *first != (kernel.Usage{PromptTokens: 374, CompletionTokens: 61, CachedTokens: 256, ReasoningTokens: 17}) {
		t.Fatalf("the first request's usage %+v", first)
	}
	if end.Usage == nil || end.Usage.Requests != 2 || end.Usage.Unreported != 0 || end.Usage.PromptTokens != 384 {
		t.Fatalf("the turn's total %+v", end.Usage)
	}
}

// reasoningThenCall streams reasoning in field, then one tool call.
func reasoningThenCall(w *fakeopenai.Writer, lines ...string) {
	for _, l := range lines {
		_ = w.Raw(l)
	}
	_ = w.Call(0, "call_1", "lookup", `{"q":"tide"}`, 3)
	_ = w.End("tool_calls")
}

// TestReasoningSentBackBySetting: what goes back, setting by setting:
// under auto the reasoning_content of a message with calls, never a text
// answer's and never what came only as "reasoning"; under all a text
// answer's too; under off nothing. The kernel keeps it either way.
func TestReasoningSentBackBySetting(t *testing.T) {
	for _, tc := range []struct {
		setting    string
		field      string
		callsBack  bool // the message with calls carries it
		answerBack bool // a later request carries the text answer's
	}{
		{"", "reasoning_content", true, false},
		{openai.ReasoningAll, "reasoning_content", true, true},
		{openai.ReasoningOff, "reasoning_content", false, false},
		{"", "reasoning", false, false},
	} {
		t.Run(tc.setting+"/"+tc.field, func(t *testing.T) {
			srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				switch r.N {
				case 1:
					reasoningThenCall(w, reasoningDelta(tc.field, "Look it up."))
				default:
					_ = w.Raw(reasoningDelta(tc.field, "Now answer."))
					_ = w.Answer("High tide at six.", 4)
				}
			})
			defer srv.Close()
			m := newModel(t, srv, func(c *openai.Config) { c.Reasoning = tc.setting })
			_, k := runTurn(t, m, failingTools, "When is high tide?")
			hist := k.Agent(kernel.Root).History()
			if r := hist[1].Reasoning; r == nil || r.Text != "Look it up." || r.Field != tc.field {
				t.Fatalf("the kernel kept %+v with the message with calls", hist[1].Reasoning)
			}
			if r := hist[3].Reasoning; r == nil || r.Text != "Now answer." {
				t.Fatalf("the kernel kept %+v with the answer", hist[3].Reasoning)
			}
			// A third request (a new turn) reads the whole history.
			s := newSink()
			if err := m.Stream(context.Background(), request(append(hist, kernel.Message{Role: kernel.RoleUser, Content: "And low?"})...), s); err != nil {
				t.Fatal(err)
			}
			msgs := messagesOf(t, bodyOf(t, srv.Requests()[2]))
			if got := msgs[1]["reasoning_content"] != nil; got != tc.callsBack {
				t.Errorf("message with calls carries reasoning_content: %v, want %v", got, tc.callsBack)
			}
			if got := msgs[3]["reasoning_content"] != nil; got != tc.answerBack {
				t.Errorf("text answer carries reasoning_content: %v, want %v", got, tc.answerBack)
			}
			if strings.Contains(string(srv.Requests()[2].Raw), `"reasoning":`) {
				t.Error("reasoning went back under the name \"reasoning\", which no provider asks for")
			}
		})
	}
}

// TestOpenRouterReasoningDetailsSentBack: OpenRouter streams a thinking
// model's reasoning_details in pieces (text, then its signature, by
// index; a piece's empty string adds nothing, and clears nothing); they are
// merged and go back unchanged on the message with calls, as OpenRouter
// asks, beside no reasoning_content.
func TestOpenRouterReasoningDetailsSentBack(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.N == 1 {
			reasoningThenCall(w,
				`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Let me","reasoning_details":[{"type":"reasoning.text","text":"Let me","format":"anthropic-claude-v1","index":0}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{"content":"","reasoning":" look.","reasoning_details":[{"type":"reasoning.text","text":" look.","format":"anthropic-claude-v1","index":0}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{"content":"","reasoning":null,"reasoning_details":[{"type":"reasoning.text","signature":"EtsBCkgI","format":"anthropic-claude-v1","index":0}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{"content":"","reasoning":"","reasoning_details":[{"type":"reasoning.text","text":"","signature":"","format":"anthropic-claude-v1","index":0}]}}]}`,
				`data: {"choices":[{"index":0,"delta":{"content":"","reasoning":null,"reasoning_details":[{"type":"reasoning.encrypted","data":"gAAAA","id":"rs_1","format":"openai-responses-v1","index":1}]}}]}`,
			)
			return
		}
		_ = w.Answer("Done.", 2)
	})
	defer srv.Close()
	runTurn(t, newModel(t, srv, nil), failingTools, "Look.")
	msgs := messagesOf(t, bodyOf(t, srv.Requests()[1]))
	want := []any{
		map[string]any{"type": "reasoning.text", "text": "Let me look.", "signature": "EtsBCkgI", "format": "anthropic-claude-v1", "index": float64(0)},
		map[string]any{"type": "reasoning.encrypted", "data": "gAAAA", "id": "rs_1", "format": "openai-responses-v1", "index": float64(1)},
	}
	if got := msgs[1]["reasoning_details"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("reasoning_details sent back:\n%v\nwant\n%v", got, want)
	}
	if msgs[1]["reasoning_content"] != nil {
		t.Fatal("OpenRouter's reasoning went back as reasoning_content too")
	}
}

// TestReasoningNotKeptFromFailedAttempt: a retried attempt's reasoning is
// not mixed into the answer's: only the attempt that answered reports it.
func TestReasoningNotKeptFromFailedAttempt(t *testing.T) {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.N == 1 {
			_ = w.Raw(reasoningDelta("reasoning_content", "First try."))
			w.Hangup()
			return
		}
		_ = w.Raw(reasoningDelta("reasoning_content", "Second try."))
		_ = w.Answer("ok", 1)
	})
	defer srv.Close()
	s := &reasoningSink{sink: newSink()}
	if err := newModel(t, srv, nil).Stream(context.Background(), request(), s); err != nil {
		t.Fatal(err)
	}
	if len(s.got) != 1 || s.got[0] != (kernel.Reasoning{Text: "Second try.", Field: "reasoning_content"}) {
		t.Fatalf("reasoning reported %+v", s.got)
	}
}

type reasoningSink struct {
	*sink
	got []kernel.Reasoning
}

func (s *reasoningSink) Reasoning(r kernel.Reasoning) { s.got = append(s.got, r) }
