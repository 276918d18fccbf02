package mcp

import (
	"io"
	"strings"
	"testing"
)

// TestEventsNotJudgedPassAsTheyCame: the events the client does not judge
// reach the SDK byte for byte and unreported — one without data, one named
// other than "message", one with empty data, a batch (its data a JSON
// array, which the SDK judges itself) — and so do the messages around
// them.
func TestEventsNotJudgedPassAsTheyCame(t *testing.T) {
	for _, event := range []string{
		"id: 7\nretry: 10\n\n",
		"event: ping\ndata: not json\n\n",
		"event: message\ndata:\n\n",
		"data: \r\n\r\n",
		`data: [{"jsonrpc":"2.0","id":1,"result":{}}]` + "\n\n",
		"data: [\ndata: ]\n\n",
	} {
		in := `data: {"jsonrpc":"2.0","id":1,"result":{}}` + "\n\n" + event + `event: message` + "\n" + `data: {"jsonrpc":"2.0","id":2,"result":{}}` + "\n\n"
		var noise []string
		b := newEventBody(io.NopCloser(strings.NewReader(in)), "", nil, func(s string) { noise = append(noise, s) })
		got, err := io.ReadAll(b)
		if err != nil || string(got) != in || len(noise) != 0 {
			t.Errorf("event %q: the SDK read %q (%v), reported %q; want the stream as it came, nothing reported", event, got, err, noise)
		}
	}
}
