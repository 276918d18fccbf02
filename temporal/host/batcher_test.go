package host

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/protocol"
)

// The batcher merges what was not sent yet (text into text, a call's
// argument fragments into its first, progress into anything), never what
// a batch already carried; a batch whose signal failed is sent again from
// the first unacknowledged item, with the same numbers; the result and
// the heartbeat hold what no batch was acknowledged for.
func TestBatcherNumbersMergesAndResends(t *testing.T) {
	b := &batcher{op: 7, wake: make(chan struct{}, 1)}
	var sent []protocol.Chunks
	fail := false
	send := func(_ context.Context, c protocol.Chunks) error {
		sent = append(sent, c)
		if fail {
			return errors.New("unavailable")
		}
		return nil
	}
	b.Progress()
	b.Text("Hel")
	b.Text("lo")
	b.Call(kernel.CallDelta{Index: 0, ID: "c1", Name: "grep"})
	b.Call(kernel.CallDelta{Index: 0, Args: `{"pat`})
	b.Progress()
	b.Call(kernel.CallDelta{Index: 0, Args: `tern":"x"}`})
	if !b.flush(context.Background(), send) {
		t.Fatal("the first batch failed")
	}
	want := protocol.Chunks{Op: 7, First: 1, Items: []protocol.Item{
		{Text: "Hello"},
		{Call: &kernel.CallDelta{Index: 0, ID: "c1", Name: "grep", Args: `{"pattern":"x"}`}},
	}}
	if !reflect.DeepEqual(sent[0], want) {
		t.Fatalf("first batch %+v, want %+v", sent[0], want)
	}
	// Sent items are frozen: new text starts a new item.
	b.Text(" world")
	b.Retry(2, time.Second, "429")
	b.Text("!")
	fail = true
	if b.flush(context.Background(), send) {
		t.Fatal("a failed signal was reported sent")
	}
	if p := b.progress(); p.Offset != 5 || p.Text != " world!" {
		t.Fatalf("heartbeat progress %+v, want the unacknowledged text at offset 5", p)
	}
	b.Text(" again")
	fail = false
	b.flush(context.Background(), send)
	last := sent[len(sent)-1]
	if last.First != 3 || len(last.Items) != 4 || last.Items[0].Text != " world" || last.Items[1].Retry == nil || last.Items[2].Text != "!" || last.Items[3].Text != " again" {
		t.Fatalf("the batch after a failure %+v: want items 3.. again, frozen as first sent, and the new one", last)
	}
	if r := b.rest(); r.First != 7 || len(r.Items) != 0 {
		t.Fatalf("rest %+v, want nothing after item 6", r)
	}
	if p := b.progress(); p.Offset != len("Hello world! again") || p.Text != "" {
		t.Fatalf("heartbeat progress %+v after everything was acknowledged", p)
	}
}

func TestTranscriptRoundTrip(t *testing.T) {
	msgs := []kernel.Message{
		{Role: kernel.RoleSystem, Content: "be brief"},
		{Role: kernel.RoleUser, Content: "hi"},
		{Role: kernel.RoleAssistant, Content: "cut", Partial: true},
		{Role: kernel.RoleAssistant, ToolCalls: []kernel.ToolCall{{ID: "a", Name: "noop", Arguments: "{}"}}},
		{Role: kernel.RoleTool, ToolCallID: "a", Content: "ok", Synthetic: true},
	}
	tr, err := protocol.Pack(msgs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tr.Messages()
	if err != nil || !reflect.DeepEqual(got, msgs) {
		t.Fatalf("round trip: %v %+v", err, got)
	}
	again, _ := protocol.Pack(msgs)
	if !reflect.DeepEqual(again, tr) {
		t.Fatal("packing the same messages twice gave different bytes (a workflow must be deterministic)")
	}
	if empty, err := (protocol.Transcript{}).Messages(); err != nil || empty != nil {
		t.Fatalf("the zero transcript: %v %v", empty, err)
	}
}
