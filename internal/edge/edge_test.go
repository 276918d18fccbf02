package edge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/kernel"
)

type textSink struct{ text, args strings.Builder }

func (s *textSink) Text(t string)                    { s.text.WriteString(t) }
func (s *textSink) Call(d kernel.CallDelta)          { s.args.WriteString(d.Args) }
func (s *textSink) Retry(int, time.Duration, string) {}
func (s *textSink) Usage(kernel.Usage)               {}

// TestSecretSplitAcrossChunksIsRedacted: a key the model streams in pieces
// (in its text and in a call's arguments) and a tool's result that holds it
// reach the kernel masked; text around it passes whole.
func TestSecretSplitAcrossChunksIsRedacted(t *testing.T) {
	const key = "sk-test-0123456789abcdefXYZ"
	model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		sink.Text("the key is " + key[:9])
		sink.Text(key[9:] + ", done")
		sink.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "echo", Args: `{"k":"` + key[:5]})
		sink.Call(kernel.CallDelta{Index: 0, Args: key[5:] + `"}`})
		return nil
	})
	tools := ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult {
		return ports.ToolResult{Content: "env: " + key}
	})
	m, tl := Redact(model, tools, redact.New(key))
	var s textSink
	if err := m.Stream(context.Background(), ports.Request{}, &s); err != nil {
		t.Fatal(err)
	}
	res := tl.Run(context.Background(), ports.Call{})
	for what, got := range map[string]string{"text": s.text.String(), "arguments": s.args.String(), "tool result": res.Content} {
		if strings.Contains(got, key[:12]) || strings.Contains(got, key[12:]) {
			t.Errorf("%s %q holds the key", what, got)
		}
	}
	if !strings.HasPrefix(s.text.String(), "the key is ") || !strings.HasSuffix(s.text.String(), ", done") {
		t.Errorf("text %q: want what surrounds the key kept", s.text.String())
	}
}

// reasoningSink is a textSink that keeps reasoning too.
type reasoningSink struct {
	textSink
	got []kernel.Reasoning
}

func (s *reasoningSink) Reasoning(r kernel.Reasoning) { s.got = append(s.got, r) }

// TestReasoningIsRedacted: the reasoning a model hands over reaches the
// kernel's sink with the key masked in its text and its details (which
// stay valid JSON), its field untouched; under a sink that keeps no
// reasoning it is dropped.
func TestReasoningIsRedacted(t *testing.T) {
	const key = "sk-test-0123456789abcdefXYZ"
	model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
		sink.Text("ok")
		rs, ok := sink.(ports.ReasoningSink)
		if !ok {
			t.Fatal("the edge's sink keeps no reasoning: a provider that needs it back would refuse the next request")
		}
		rs.Reasoning(kernel.Reasoning{Text: "the user's key is " + key, Field: "reasoning_content",
			Details: `[{"type":"reasoning.text","text":"key ` + key + `"}]`})
		return nil
	})
	m, _ := Redact(model, nil, redact.New(key))
	var s reasoningSink
	if err := m.Stream(context.Background(), ports.Request{}, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.got) != 1 {
		t.Fatalf("reasoning reached the sink %d times, want once", len(s.got))
	}
	r := s.got[0]
	if strings.Contains(r.Text, key[:12]) || strings.Contains(r.Details, key[:12]) {
		t.Errorf("reasoning %+v holds the key", r)
	}
	if !strings.HasPrefix(r.Text, "the user's key is ") || r.Field != "reasoning_content" || !json.Valid([]byte(r.Details)) {
		t.Errorf("reasoning %+v: want the text around the key, the field and JSON details kept", r)
	}
	var plain textSink
	if err := m.Stream(context.Background(), ports.Request{}, &plain); err != nil {
		t.Fatal(err)
	}
}

// TestModelErrorRedacted: a model's error reaches the kernel with the key
// masked in its text, and still is what it was: its failure kind
// (ports.FailureOf) and its cause (errors.Is) are kept.
func TestModelErrorRedacted(t *testing.T) {
	const key = "sk-test-0123456789abcdefXYZ"
	model := ports.ModelFunc(func(context.Context, ports.Request, ports.Sink) error {
		return ports.Fail(kernel.FailureRateLimit, fmt.Errorf("Incorrect API key provided: %s: %w", key, context.DeadlineExceeded))
	})
	m, _ := Redact(model, ports.ToolsFunc(nil), redact.New(key))
	err := m.Stream(context.Background(), ports.Request{}, &textSink{})
	if err == nil || strings.Contains(err.Error(), key[:12]) || !strings.Contains(err.Error(), "Incorrect API key provided") {
		t.Fatalf("error %v", err)
	}
	if ports.FailureOf(err, 0) != kernel.FailureRateLimit || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v: failure %v, is DeadlineExceeded %v", err, ports.FailureOf(err, 0), errors.Is(err, context.DeadlineExceeded))
	}
}
