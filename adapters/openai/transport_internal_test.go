package openai

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// decode reads body through an sseBody, the source giving one byte per
// read or the whole body at once, and returns what go-openai's reader
// gets and the capture.
func decode(t *testing.T, body string, oneByte bool) (string, *capture) {
	t.Helper()
	var src io.Reader = strings.NewReader(body)
	if oneByte {
		src = iotest.OneByteReader(src)
	}
	c := &capture{}
	b := &sseBody{ReadCloser: io.NopCloser(src), c: c}
	var out strings.Builder
	if _, err := io.Copy(&out, b); err != nil && !errors.Is(err, errErrorEvent) {
		t.Fatal(err)
	}
	return out.String(), c
}

// TestSSEBodyDecodesEvents: the decoder sees [DONE] and error events (with
// or without the space after `data:`, CR and LF ends, a last line without
// its line end), across reads of any size, and not inside a token, a
// comment or a payload too long to be an error; it hands go-openai one
// `data:` line per event and nothing else, and stops at an error event.
func TestSSEBodyDecodesEvents(t *testing.T) {
	long := `{"choices":[{"delta":{"content":"` + strings.Repeat("y", maxErrorEvent) + `"}}],"error":"x"}`
	for _, tc := range []struct {
		name string
		body string
		out  string
		done bool
		err  string
		data bool
	}{
		{"done", "data: {\"choices\":[]}\n\ndata: [DONE]\n\n", "data: {\"choices\":[]}\ndata: [DONE]\n", true, "", true},
		{"done CRLF no space", "data:[DONE]\r\n\r\n", "data: [DONE]\n", true, "", true},
		{"done without newline", "data: [DONE]", "data: [DONE]\n", true, "", true},
		{"done in a token", `data: {"choices":[{"delta":{"content":"data: [DONE]"}}]}` + "\n", `data: {"choices":[{"delta":{"content":"data: [DONE]"}}]}` + "\n", false, "", true},
		{"done in a comment", ": data: [DONE]\n", "", false, "", false},
		{"no done", "data: {\"choices\":[]}\n", "data: {\"choices\":[]}\n", false, "", true},
		{"cut last line", "data: {\"choices\":[]}\n\ndata: {\"cho", "data: {\"choices\":[]}\n", false, "", true},
		{"cut multi-line event", "data: {\"choices\":\ndata: [", "", false, "", false},
		{"error event", "data: {\"choices\":[]}\n\ndata: {\"error\":{\"message\":\"m\",\"code\":\"c\"}}\n\ndata: {\"choices\":[]}\n\n", "data: {\"choices\":[]}\n", false, `{"error":{"message":"m","code":"c"}}`, true},
		{"string error event", "data:  {\"error\":\"m\"}  \n", "", false, `{"error":"m"}`, true},
		{"bare error object", "{\"error\":{\"message\":\"m\"}}\n", "", false, `{"error":{"message":"m"}}`, true},
		{"error word in a token", `data: {"choices":[{"delta":{"content":"\"error\""}}]}` + "\n", `data: {"choices":[{"delta":{"content":"\"error\""}}]}` + "\n", false, "", true},
		// Not an error event; its first key is spaced off so that go-openai,
		// which matches `{"error":` alone, does not take it for one.
		{"null error", `data: {"error":null}` + "\n", `data: { "error":null}` + "\n", false, "", true},
		{"long payload", "data: " + long + "\n\ndata: [DONE]\n", "data: " + long + "\ndata: [DONE]\n", true, "", true},
		{"joined lines", "id: 1\nevent: x\nretry: 9\ndata: {\"a\":\ndata: 1}\n\n", "data: {\"a\": 1}\n", false, "", true},
		{"lone CR", "data: {\"a\":1}\r\rdata: [DONE]\r\r", "data: {\"a\":1}\ndata: [DONE]\n", true, "", true},
		{"empty data", "data:\n\ndata: \n\n", "", false, "", false},
		{"not SSE", "<html>hi</html>\n", "", false, "", false},
	} {
		for _, oneByte := range []bool{false, true} {
			out, c := decode(t, tc.body, oneByte)
			if out != tc.out || c.done != tc.done || string(c.errEvent) != tc.err || c.sawData != tc.data {
				t.Errorf("%s (one byte per read %v): out %.80q, done %v, error %q, data %v; want %.80q, %v, %q, %v",
					tc.name, oneByte, out, c.done, c.errEvent, c.sawData, tc.out, tc.done, tc.err, tc.data)
			}
		}
	}
	if _, c := decode(t, strings.Repeat("z", 1000), true); len(c.head) != headBytes {
		t.Errorf("kept %d bytes of the head, want %d", len(c.head), headBytes)
	}
}
