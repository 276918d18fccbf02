package openai

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// watch reads body through an sseBody, r wrapping the source (one byte per
// read, or the whole body at once), and returns the capture.
func watch(t *testing.T, body string, oneByte bool) *capture {
	t.Helper()
	var src io.Reader = strings.NewReader(body)
	if oneByte {
		src = iotest.OneByteReader(src)
	}
	c := &capture{}
	b := &sseBody{ReadCloser: io.NopCloser(src), c: c}
	if _, err := io.Copy(io.Discard, b); err != nil {
		t.Fatal(err)
	}
	if len(b.line) > maxWatchedLine {
		t.Errorf("watcher kept %d bytes of a line (bound %d)", len(b.line), maxWatchedLine)
	}
	return c
}

// TestSSEBodyWatchesLines: the watcher sees [DONE] and error events the way
// go-openai reads lines (spaces and CR trimmed, `data:` with or without a
// space, a last line without its newline), across reads of any size, and
// not inside a token, a comment or a line too long to be either.
func TestSSEBodyWatchesLines(t *testing.T) {
	long := `data: {"choices":[{"delta":{"content":"` + strings.Repeat("y", maxWatchedLine) + `"}}],"error":"x"}`
	for _, tc := range []struct {
		name string
		body string
		done bool
		err  string
		data bool
	}{
		{"done", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", true, "", true},
		{"done CRLF no space", "data:[DONE]\r\n\r\n", true, "", true},
		{"done without newline", "data: [DONE]", true, "", true},
		{"done in a token", `data: {"choices":[{"delta":{"content":"data: [DONE]"}}]}` + "\n", false, "", true},
		{"done in a comment", ": data: [DONE]\n", false, "", false},
		{"no done", "data: {\"choices\":[]}\n", false, "", true},
		{"error event", "data: {\"error\":{\"message\":\"m\",\"code\":\"c\"}}\n\n", false, `{"error":{"message":"m","code":"c"}}`, true},
		{"string error event", "data:  {\"error\":\"m\"}  \n", false, `{"error":"m"}`, true},
		{"error word in a token", `data: {"choices":[{"delta":{"content":"\"error\""}}]}` + "\n", false, "", true},
		{"null error", `data: {"error":null}` + "\n", false, "", true},
		{"long line", long + "\n" + "data: [DONE]\n", true, "", true},
		{"not SSE", "<html>hi</html>\n", false, "", false},
	} {
		for _, oneByte := range []bool{false, true} {
			c := watch(t, tc.body, oneByte)
			if c.done != tc.done || string(c.errEvent) != tc.err || c.sawData != tc.data {
				t.Errorf("%s (one byte per read %v): done %v, error %q, data %v; want %v, %q, %v",
					tc.name, oneByte, c.done, c.errEvent, c.sawData, tc.done, tc.err, tc.data)
			}
		}
	}
	if c := watch(t, strings.Repeat("z", 1000), true); len(c.head) != headBytes {
		t.Errorf("kept %d bytes of the head, want %d", len(c.head), headBytes)
	}
}
