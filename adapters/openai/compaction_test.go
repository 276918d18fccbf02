package openai_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/openai"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// TestServerRefusalCompactsOnce: through the live driver, a server that
// refuses a request as too long (HTTP 400 context_length_exceeded) gets
// exactly one compaction — a request without tools, holding the history to
// summarise — and one retry, which carries the summary; refused again, the
// turn ends context_exhausted and nothing more is asked.
func TestServerRefusalCompactsOnce(t *testing.T) {
	refusal := `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}`
	for _, again := range []bool{false, true} {
		srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			switch {
			case r.N == 1, r.N == 3 && again:
				w.Status(400, refusal)
			case r.N == 2:
				_ = w.Answer("The user asked about the harbour's three piers.", 4)
			default:
				_ = w.Answer("The north pier.", 2)
			}
		})
		m := newModel(t, srv, func(c *openai.Config) {
			c.Tools = []ports.ToolSpec{{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)}}
		})
		history := []kernel.Message{
			{Role: kernel.RoleUser, Content: "Describe the harbour."},
			{Role: kernel.RoleAssistant, Content: strings.Repeat("The harbour has three piers. ", 40)},
		}
		end, _ := runTurn(t, m, failingTools, "Which pier takes the ferries?", func(c *kernel.Config) { c.History = history })
		srv.Close()
		reqs := srv.Requests()
		want, outcome := 3, kernel.OutcomeCompleted
		if again {
			outcome = kernel.OutcomeFailed
		}
		if len(reqs) != want || end.Outcome != outcome {
			t.Fatalf("again=%v: %d requests, turn %s/%s %q; want %d requests, %s", again, len(reqs), end.Outcome, end.Reason, end.Detail, want, outcome)
		}
		summarising := bodyOf(t, reqs[1])
		msgs := messagesOf(t, summarising)
		if summarising["tools"] != nil || len(msgs) != 1 || !strings.Contains(msgs[0]["content"].(string), "Which pier takes the ferries?") {
			t.Fatalf("the summarising request: %v", summarising)
		}
		retry := messagesOf(t, bodyOf(t, reqs[2]))
		if len(retry) != 1 || !strings.Contains(retry[0]["content"].(string), "<conversation_summary>\nThe user asked about the harbour's three piers.") {
			t.Fatalf("the retry sends %v", retry)
		}
		if again && (end.Reason != kernel.ReasonContextExhausted || !strings.Contains(end.Detail, "maximum context length is 8192")) {
			t.Fatalf("refused twice: %s %q", end.Reason, end.Detail)
		}
	}
}
