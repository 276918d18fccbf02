package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// sseBody decodes a streaming response by the server-sent-events grammar
// (WHATWG HTML, "Server-sent events": a byte-order mark at the start; lines
// ended by CRLF, LF or a lone CR; `field: value` with one optional space;
// comments; several `data:` lines of one event joined with "\n"; a blank
// line dispatching the event) and hands go-openai's line reader, which
// knows only `data:` lines ended by LF, one canonical `data: <payload>\n`
// line per event. Comments, `event:`, `id:` and `retry:` fields go no
// further, so keep-alives never count against go-openai's limit of 300
// lines without data.
//
// Two leniencies for servers that do not follow the grammar: a `data:` line
// that follows an event whose data is already a whole JSON value (or
// [DONE]) starts a new event even without the blank line between them (a
// JSON object split over several lines is not whole until its last one),
// and a line that is a bare `{"error":…}` object, without `data:`, is an
// error event.
//
// On the way it records in the capture what go-openai's errors drop: that a
// data line arrived, [DONE], the first bytes of the body, and an error
// event. An error event ends the stream at once (errErrorEvent, after the
// events before it), whatever else it carries (OpenRouter adds a choice
// with finish_reason "error") and whether or not the server then closes
// the connection.
type sseBody struct {
	io.ReadCloser
	c *capture
	// maxLine bounds one event's data (Config.MaxLineBytes): a longer one
	// ends the stream with a *lineTooLongError before more of it is read.
	maxLine int

	buf     []byte // raw bytes read from the connection
	line    []byte // the current line so far
	data    []byte // the current event's data
	hasData bool   // a data field arrived for the current event
	lines   int    // lines completed so far (the first may start with a BOM)
	skipLF  bool   // the last byte was a CR: an LF right after it ends nothing
	out     []byte // canonical lines for go-openai; out[pos:] is not read yet
	pos     int
	err     error // the stream's end, returned once out is drained
	// gen counts the events begun; wholeGen, wholeLen and wholeIs cache
	// whole() for the data of event gen at length wholeLen (data only
	// grows within an event), so the bound's check near its limit does
	// not rescan the data on every read.
	gen, wholeGen, wholeLen int
	wholeIs                 bool
}

// errErrorEvent ends a stream at its error event: the event is in the
// capture (errEvent), which recvError reads first.
var errErrorEvent = errors.New("error event in stream")

// lineTooLongError ends a stream whose event went past Config.MaxLineBytes,
// before more of it is buffered.
type lineTooLongError struct{ limit int }

func (e *lineTooLongError) Error() string {
	return fmt.Sprintf("an event-stream line went past %d bytes (a single chunk larger than max_message_bytes allows); the stream was refused", e.limit)
}

const (
	// maxErrorEvent bounds the payload that is checked for an error event:
	// an error is short; a longer payload (a huge token) is only passed on.
	maxErrorEvent = 64 << 10
	// headBytes is how much of the body's start is kept for an error text.
	headBytes = 200
	// readSize is what one read from the connection asks for.
	readSize = 32 << 10
)

var (
	bom         = []byte("\xEF\xBB\xBF")
	donePayload = []byte("[DONE]")
)

func (b *sseBody) Read(p []byte) (int, error) {
	for b.pos == len(b.out) {
		if b.err != nil {
			return 0, b.err
		}
		b.out, b.pos = b.out[:0], 0
		if cap(b.out) > maxErrorEvent {
			b.out = nil // let a huge event's copy go
		}
		if b.buf == nil {
			b.buf = make([]byte, readSize)
		}
		n, err := b.ReadCloser.Read(b.buf)
		b.feed(b.buf[:n])
		if err != nil && b.err == nil {
			b.end()
			b.err = err
		}
	}
	n := copy(p, b.out[b.pos:])
	b.pos += n
	return n, nil
}

// feed splits raw bytes into lines.
func (b *sseBody) feed(p []byte) {
	if room := headBytes - len(b.c.head); room > 0 {
		b.c.head = append(b.c.head, p[:min(room, len(p))]...)
	}
	for len(p) > 0 && b.err == nil {
		if b.skipLF {
			b.skipLF = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		seg := p
		if i >= 0 {
			seg = p[:i]
		}
		if b.maxLine > 0 && b.over(len(seg)) {
			b.err = &lineTooLongError{limit: b.maxLine}
			b.line, b.data = nil, nil
			return
		}
		b.line = append(b.line, seg...)
		if i < 0 {
			return
		}
		b.skipLF = p[i] == '\r'
		p = p[i+1:]
		b.endLine()
	}
}

// over reports whether n more bytes of the current line take the event
// past maxLine. An event whose data is already whole does not count: the
// next data line starts a new event (the leniency above) and sends it on
// first, so two whole events without a blank line between them are held
// to the bound one by one. (Wholeness is checked only near the bound.)
func (b *sseBody) over(n int) bool {
	if len(b.data)+len(b.line)+n <= b.maxLine {
		return false
	}
	return !(b.hasData && b.whole()) || len(b.line)+n > b.maxLine
}

// endLine interprets the line just completed.
func (b *sseBody) endLine() {
	line := b.line
	b.line = b.line[:0]
	if b.lines++; b.lines == 1 {
		line = bytes.TrimPrefix(line, bom)
	}
	line = bytes.TrimLeft(line, " \t")
	if len(bytes.TrimSpace(line)) == 0 {
		b.dispatch()
		return
	}
	if line[0] == ':' {
		return // a comment
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch {
	case string(field) == "data":
		if b.hasData && b.whole() {
			b.dispatch()
		}
		if b.hasData {
			b.data = append(b.data, '\n')
		}
		b.data = append(b.data, value...)
		b.hasData = true
	case bytes.HasPrefix(line, []byte("{")) && isErrorEvent(bytes.TrimSpace(line)):
		b.dispatch()
		b.data, b.hasData = append(b.data, bytes.TrimSpace(line)...), true
		b.dispatch()
	}
	// event, id, retry and unknown fields change nothing here.
}

// dispatch ends the current event: [DONE] and error events are recorded,
// and every event but an error goes to go-openai as one line.
func (b *sseBody) dispatch() {
	data, has := b.data, b.hasData
	b.data, b.hasData = b.data[:0], false
	b.gen++
	payload := bytes.TrimSpace(data)
	if !has || len(payload) == 0 || b.err != nil {
		return
	}
	b.c.sawData = true
	switch {
	case bytes.Equal(payload, donePayload):
		b.c.done = true
	case isErrorEvent(payload):
		if b.c.errEvent == nil {
			b.c.errEvent = bytes.Clone(payload)
		}
		b.err = errErrorEvent
		return
	}
	// A joined event's newlines are JSON whitespace: go-openai reads lines.
	b.out = append(b.out, "data: "...)
	if bytes.HasPrefix(payload, []byte(`{"error":`)) {
		// Not an error event (its "error" is null): go-openai would take
		// it for one by its first key alone, so that key is spaced off.
		b.out = append(b.out, "{ "...)
		payload = payload[1:]
	}
	start := len(b.out)
	b.out = append(b.out, payload...)
	for i, c := range b.out[start:] {
		if c == '\n' {
			b.out[start+i] = ' '
		}
	}
	b.out = append(b.out, '\n')
}

// end handles the end of the body. A last line without its line end is
// taken when it is whole on its own (go-openai would drop it: `data:
// [DONE]` at the very end is common), and an event without its blank line
// is dispatched when its data is whole; anything else was cut off and is
// dropped, so the stream ends as a disconnect, not as an unparseable chunk.
func (b *sseBody) end() {
	if line := bytes.TrimSpace(b.line); len(line) > 0 {
		if v, ok := bytes.CutPrefix(line, []byte("data:")); !ok || wholeValue(v) {
			b.line = line
			b.endLine()
		}
		b.line = b.line[:0]
	}
	if b.hasData && !b.whole() {
		b.data, b.hasData = b.data[:0], false
		b.gen++
	}
	b.dispatch()
}

// whole reports whether the current event's data is already complete.
func (b *sseBody) whole() bool {
	if b.wholeGen != b.gen+1 || b.wholeLen != len(b.data) {
		b.wholeGen, b.wholeLen, b.wholeIs = b.gen+1, len(b.data), wholeValue(b.data)
	}
	return b.wholeIs
}

// wholeValue reports whether v is [DONE] or a whole JSON value.
func wholeValue(v []byte) bool {
	v = bytes.TrimSpace(v)
	return bytes.Equal(v, donePayload) || json.Valid(v)
}

// isErrorEvent reports whether payload is an object with a top-level
// "error" that is an object or a non-empty message (OpenAI's {"error":{…}},
// Ollama's {"error":"…"}, OpenRouter's chunk with an error beside its
// choices). Only short payloads are checked.
func isErrorEvent(payload []byte) bool {
	if len(payload) > maxErrorEvent || !bytes.Contains(payload, []byte(`"error"`)) {
		return false
	}
	var ev struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(payload, &ev) != nil || len(ev.Error) == 0 {
		return false
	}
	// An object, or a message (Ollama's string form); a null, false, 0 or
	// "" beside a chunk's choices says there is no error.
	var msg string
	return ev.Error[0] == '{' || (json.Unmarshal(ev.Error, &msg) == nil && strings.TrimSpace(msg) != "")
}
