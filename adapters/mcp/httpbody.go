package mcp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/escapement/escapement/internal/textcut"
)

// An HTTP server's answers get the bounds and stand-ins a stdio server's
// stdout gets (stdoutFilter, frames.go): the SDK reads a JSON body whole,
// however large, and ends the session on a message it cannot decode. Each
// 2xx body is read through answerBody (application/json) or eventBody
// (text/event-stream) before the SDK sees it.

// wrapAnswer puts resp's body behind the reader for its content type. id
// is the JSON text of the id of the request it answers ("" for a
// notification's answer and for the GET stream); noise reports an event
// that was dropped.
func wrapAnswer(resp *http.Response, id string, t *tap, noise func(string)) {
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch media {
	case "application/json":
		if id != "" {
			resp.Body = &answerBody{src: resp.Body, id: id, tap: t}
		}
	case "text/event-stream":
		resp.Body = newEventBody(resp.Body, id, t, noise)
	}
}

// answerBody is a JSON answer to request id, read whole (as the SDK reads
// it anyway) but no further than maxMessageBytes: a larger one, or one that
// does not decode, is replaced by the stand-in error answer saying why.
type answerBody struct {
	src io.ReadCloser
	id  string
	tap *tap
	r   io.Reader // what is read; nil until the first Read
}

func (b *answerBody) Read(p []byte) (int, error) {
	if b.r == nil {
		b.r = b.load()
	}
	return b.r.Read(p)
}

func (b *answerBody) Close() error { return b.src.Close() }

// load reads the answer and decides what the SDK gets.
func (b *answerBody) load() io.Reader {
	data, err := io.ReadAll(io.LimitReader(b.src, maxMessageBytes+1))
	switch {
	case err != nil:
		return io.MultiReader(bytes.NewReader(data), errReader{err})
	case len(data) > maxMessageBytes:
		return bytes.NewReader(b.tap.standIn(b.id, whyTooLarge))
	}
	msg := bytes.TrimSpace(data)
	if len(msg) == 0 || msg[0] == '[' {
		return bytes.NewReader(data) // nothing, or a batch: the SDK's to judge
	}
	if derr := decodes(msg); derr != nil {
		return bytes.NewReader(b.tap.standIn(b.id, derr.Error()))
	}
	return bytes.NewReader(data)
}

// errReader fails every Read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// eventBody passes a stream of server-sent events on event by event, each
// read whole first (at most maxMessageBytes of it). An event whose data is
// a message that does not decode is replaced by the stand-in error answer
// to the request its id names, or dropped (and reported) when it names
// none: the SDK would end the session on it. An event over
// maxMessageBytes is replaced the same way as soon as it passes the bound,
// and the rest of it is dropped; on a POST's stream, an event that names
// no request stands for the answer to the POST's own (id).
//
// Lines end with LF or CRLF (a lone CR does not end one here).
type eventBody struct {
	src   io.ReadCloser
	r     *bufio.Reader
	id    string
	tap   *tap
	noise func(string)

	out []byte // ready for the SDK
	err error  // the source's end, returned once out is read

	event     []byte  // the event's lines so far
	fields    []byte  // its lines other than data (id:, event:, retry:)
	scan      topScan // over its data
	dataLines int
	lineStart bool // the next chunk starts a line
	inData    bool // the line being read is a data line
	dropping  bool // the event passed the bound: the rest of it is dropped
}

func newEventBody(src io.ReadCloser, id string, t *tap, noise func(string)) *eventBody {
	return &eventBody{src: src, r: bufio.NewReaderSize(src, 64<<10), id: id, tap: t, noise: noise, lineStart: true}
}

func (b *eventBody) Close() error { return b.src.Close() }

func (b *eventBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.readChunk()
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// readChunk reads up to the next line end (or a buffer's worth of a long
// line) and acts on it.
func (b *eventBody) readChunk() {
	chunk, err := b.r.ReadSlice('\n')
	more := errors.Is(err, bufio.ErrBufferFull)
	if err != nil && !more {
		// The source ended (or failed): what is left of an event that
		// was not finished goes on as it came, for the SDK to judge.
		if !b.dropping {
			b.out = append(b.event, chunk...)
		}
		b.err = err
		return
	}
	if b.lineStart && !more && len(bytes.TrimRight(chunk, "\r\n")) == 0 {
		b.endEvent(chunk)
		return
	}
	if b.lineStart {
		value, isData := bytes.CutPrefix(chunk, []byte("data:"))
		b.inData = isData
		if isData {
			value = bytes.TrimPrefix(value, []byte(" "))
			if b.dataLines > 0 {
				b.scan.feed([]byte{'\n'})
			}
			b.dataLines++
			chunk = chunk[:len(chunk)-len(value)]
			b.take(chunk, false)
			chunk = value
		}
	}
	b.take(chunk, b.inData)
	b.lineStart = !more
}

// take adds a piece of the event's current line (data: its value).
func (b *eventBody) take(piece []byte, data bool) {
	if data {
		b.scan.feed(bytes.TrimRight(piece, "\r\n"))
	} else if !b.dropping && !b.inData {
		b.fields = append(b.fields, piece...)
	}
	if b.dropping {
		return
	}
	b.event = append(b.event, piece...)
	if len(b.event) > maxMessageBytes {
		b.overflow()
	}
}

// overflow replaces the event that passed the bound.
func (b *eventBody) overflow() {
	b.dropping, b.event = true, nil
	id, ok := b.scan.response()
	if !ok && !b.scan.seen["method"] {
		id = b.id
	}
	if id == "" {
		b.report(fmt.Sprintf("a server-sent event of more than %d MiB was dropped", maxMessageBytes>>20))
		return
	}
	b.out = b.replacement(b.tap.standIn(id, whyTooLarge))
}

// endEvent acts on a whole event at its blank line.
func (b *eventBody) endEvent(blank []byte) {
	defer b.reset()
	if b.dropping {
		return
	}
	event := append(b.event, blank...)
	data, name := eventData(b.event)
	if data == nil || (name != "" && name != "message") {
		b.out = event
		return
	}
	msg := bytes.TrimSpace(data)
	if len(msg) == 0 || msg[0] == '[' {
		b.out = event
		return
	}
	derr := decodes(msg)
	if derr == nil {
		b.out = event
		return
	}
	if id, ok := b.scan.response(); ok {
		b.out = b.replacement(b.tap.standIn(id, derr.Error()))
		return
	}
	b.report("a server-sent event that is no JSON-RPC message was dropped: " + textcut.Clip(string(msg), noiseKeep))
}

// replacement is an event with the dropped one's other fields and msg as
// its data.
func (b *eventBody) replacement(msg []byte) []byte {
	out := append([]byte(nil), b.fields...)
	out = append(out, "data: "...)
	out = append(out, msg...)
	return append(out, "\n\n"...)
}

func (b *eventBody) report(what string) {
	if b.noise != nil {
		b.noise(what)
	}
}

// reset starts the next event. The last one's bytes may be what out
// holds: they are left to it.
func (b *eventBody) reset() {
	b.event, b.fields, b.scan, b.dataLines, b.dropping = nil, b.fields[:0], topScan{}, 0, false
}

// eventData is an event's data (its data lines' values joined by
// newlines; nil when it has none) and its name.
func eventData(event []byte) (data []byte, name string) {
	for line := range bytes.Lines(event) {
		line = bytes.TrimRight(line, "\r\n")
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data != nil {
				data = append(data, '\n')
			} else {
				data = []byte{}
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		} else if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			name = string(bytes.TrimSpace(v))
		}
	}
	return data, name
}
