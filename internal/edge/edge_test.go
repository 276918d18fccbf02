package edge

import (
	"context"
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
