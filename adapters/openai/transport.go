package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// capture records, for one attempt, what go-openai's errors and its stream
// reader drop: an error response's status, headers and body, and whether a
// stream said `data: [DONE]` (go-openai's Recv returns io.EOF both after
// [DONE] and when the connection just closes) or sent an error event that
// go-openai cannot decode (Ollama's `{"error":"…"}` with a string).
// capturingDoer fills it in the goroutine that calls Recv, the same one that
// reads it.
type capture struct {
	// An error response (status >= 400).
	status       int
	body         []byte
	retryAfter   string // Retry-After
	retryAfterMS string // retry-after-ms (OpenAI's finer-grained header)

	// A streaming response (status < 400).
	contentType string
	head        []byte // the body's first bytes, for a body that is not SSE
	sawData     bool   // a `data:` line arrived
	done        bool   // a `data: [DONE]` line arrived
	errEvent    []byte // the first `data: {"error": …}` payload
}

type captureKey struct{}

// maxErrorBody bounds how much of an error response is kept.
const maxErrorBody = 64 << 10

// capturingDoer wraps the HTTP client. For an error status it records the
// status, Retry-After and a bounded copy of the body in the attempt's
// capture (found through the request's context), closing the connection's
// body (go-openai reads error bodies but never closes them). For a stream it
// puts a line watcher between the connection and go-openai's reader.
type capturingDoer struct {
	c *http.Client
	// maxLine bounds one line of a stream (Config.MaxLineBytes).
	maxLine int
}

func (d *capturingDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(req)
	if err != nil {
		return resp, err
	}
	c, ok := req.Context().Value(captureKey{}).(*capture)
	if !ok {
		return resp, nil
	}
	if resp.StatusCode < 400 {
		c.contentType = resp.Header.Get("Content-Type")
		resp.Body = &sseBody{ReadCloser: resp.Body, c: c, maxLine: d.maxLine}
		return resp, nil
	}
	c.status = resp.StatusCode
	c.retryAfter = resp.Header.Get("Retry-After")
	c.retryAfterMS = resp.Header.Get("Retry-After-Ms")
	c.body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(c.body))
	return resp, nil
}

const (
	// maxWatchedLine bounds the bytes of one SSE line the watcher keeps: an
	// error event or [DONE] is short; a longer line (a huge token) is only
	// passed through.
	maxWatchedLine = 64 << 10
	// headBytes is how much of the body's start is kept for an error text.
	headBytes = 200
)

// sseBody watches the lines of a streaming response as go-openai reads them
// and records [DONE] and error events in the capture. It reads nothing on
// its own and keeps at most maxWatchedLine bytes of a line.
type sseBody struct {
	io.ReadCloser
	c    *capture
	line []byte // the current line's first maxWatchedLine bytes
	over bool   // the current line is longer than that
	// lineLen is the current line's length so far; a line longer than
	// maxLine ends the stream with a *lineTooLongError.
	lineLen int
	maxLine int
	tooLong error
}

// lineTooLongError ends a stream whose line went past Config.MaxLineBytes,
// before go-openai's reader buffers more of it.
type lineTooLongError struct{ limit int }

func (e *lineTooLongError) Error() string {
	return fmt.Sprintf("an event-stream line went past %d bytes (a single chunk larger than max_message_bytes allows); the stream was refused", e.limit)
}

func (b *sseBody) Read(p []byte) (int, error) {
	if b.tooLong != nil {
		return 0, b.tooLong
	}
	n, err := b.ReadCloser.Read(p)
	b.observe(p[:n])
	if b.tooLong != nil {
		return 0, b.tooLong // nothing of the overlong line reaches the reader's buffer any more
	}
	if err != nil {
		b.endLine() // a last line without its newline still counts
	}
	return n, err
}

func (b *sseBody) observe(p []byte) {
	if room := headBytes - len(b.c.head); room > 0 {
		b.c.head = append(b.c.head, p[:min(room, len(p))]...)
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if b.lineLen += len(seg); b.maxLine > 0 && b.lineLen > b.maxLine {
			b.tooLong = &lineTooLongError{limit: b.maxLine}
			return
		}
		if !b.over {
			room := maxWatchedLine - len(b.line)
			if len(seg) > room {
				seg, b.over = seg[:room], true
			}
			b.line = append(b.line, seg...)
		}
		if i < 0 {
			return
		}
		b.endLine()
		p = p[i+1:]
	}
}

// endLine judges the line just completed the way go-openai does: spaces
// trimmed, a `data:` prefix and the spaces after it removed; `[DONE]` ends
// the stream.
func (b *sseBody) endLine() {
	line, over := bytes.TrimSpace(b.line), b.over
	b.line, b.over, b.lineLen = b.line[:0], false, 0
	payload, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	b.c.sawData = true
	payload = bytes.TrimSpace(payload)
	if string(payload) == "[DONE]" {
		b.c.done = true
		return
	}
	if over || b.c.errEvent != nil || !bytes.Contains(payload, []byte(`"error"`)) {
		return
	}
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(payload, &ev) == nil && len(ev.Error) > 0 && string(ev.Error) != "null" {
		b.c.errEvent = bytes.Clone(payload)
	}
}
