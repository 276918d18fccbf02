package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/escapement/escapement/internal/textcut"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// noiseKeep bounds how much of a skipped stdout line is reported.
const noiseKeep = 200

// errLineTooLong ends a stdio session whose server wrote a line longer than
// maxMessageBytes that is not a response to a request (no id in its first
// maxMessageBytes): no message can be that large, reading on would buffer
// without bound, and no call can be told.
var errLineTooLong = fmt.Errorf("the server wrote a line of more than %d MiB to its stdout (a message too large to read)", maxMessageBytes>>20)

// stdoutFilter passes a stdio server's stdout to the SDK one line at a
// time, keeping only the lines that are JSON-RPC messages. The MCP stdio
// transport forbids anything else on stdout, but servers print banners and
// log lines there ("Server running on stdio", a logger's JSON lines); the
// SDK's decoder would fail the whole connection on the first one. Like the
// TypeScript SDK, the client skips such a line; each is reported (noise),
// cut to noiseKeep bytes, so a misconfigured server is visible in the
// debug log. A line is read whole before it is passed on.
//
// A response that cannot be read is answered in its place (frames.go): a
// line that is a response to a request but does not decode (nested deeper
// than the decoder takes) becomes an error answer to that request saying
// why; so does one longer than maxMessageBytes whose id is in its first
// maxMessageBytes, and the rest of that line is dropped. A longer line
// without one fails Read with errLineTooLong.
type stdoutFilter struct {
	src   io.ReadCloser
	r     *bufio.Reader
	tap   *tap
	noise func(string)

	line     []byte // the line being read, reused
	pending  []byte // the rest of an accepted line not yet returned
	skipping bool   // the rest of an oversized line is to be dropped
	err      error
}

func newStdoutFilter(src io.ReadCloser, t *tap, noise func(string)) *stdoutFilter {
	return &stdoutFilter{src: src, r: bufio.NewReaderSize(src, 64<<10), tap: t, noise: noise}
}

func (f *stdoutFilter) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.next()
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

func (f *stdoutFilter) Close() error { return f.src.Close() }

// next reads one line: a message becomes pending, anything else is
// reported and dropped; a read error is kept for Read to return once the
// pending bytes are gone.
func (f *stdoutFilter) next() {
	if f.skipping {
		f.skipLine()
		return
	}
	if cap(f.line) > 1<<20 {
		f.line = nil // do not keep a huge message's buffer for the session's life
	}
	f.line = f.line[:0]
	for {
		chunk, err := f.r.ReadSlice('\n')
		if len(f.line)+len(chunk) > maxMessageBytes {
			f.oversized(chunk, err)
			return
		}
		f.line = append(f.line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			f.err = err
		}
		break
	}
	msg := bytes.TrimSpace(f.line)
	if len(msg) == 0 {
		return
	}
	err := decodes(msg)
	if err == nil {
		f.pending = append(msg, '\n') // the line's own bytes: its newline (or space) is overwritten
		return
	}
	if id, ok := responseID(msg); ok {
		f.pending = append(f.tap.standIn(id, err.Error()), '\n')
		return
	}
	if f.noise != nil {
		f.noise(textcut.Clip(string(msg), noiseKeep))
	}
}

// oversized handles a line that grew past maxMessageBytes with chunk (read
// with err): a response whose id is in what was read is answered in its
// place and the rest of the line dropped; anything else ends the session.
func (f *stdoutFilter) oversized(chunk []byte, err error) {
	var scan topScan
	scan.feed(f.line)
	scan.feed(chunk)
	f.line = nil
	id, ok := scan.response()
	if !ok {
		f.err = errLineTooLong
		return
	}
	f.pending = append(f.tap.standIn(id, whyTooLarge), '\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		f.skipping = true
	case err != nil:
		f.err = err
	}
}

// skipLine drops the rest of an oversized line, however long.
func (f *stdoutFilter) skipLine() {
	for {
		_, err := f.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			f.err = err
		}
		f.skipping = false
		return
	}
}

// decodes says why line is not a JSON-RPC message or a batch of them (nil
// when it is one).
func decodes(line []byte) error {
	if line[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(line, &batch); err != nil {
			return err
		}
		if len(batch) == 0 {
			return errors.New("an empty batch")
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return err
			}
		}
		return nil
	}
	_, err := jsonrpc.DecodeMessage(line)
	return err
}

// errPipeHeld ends the reading of a stdio server's stdout that stays open
// after the server's process and everything it started are gone.
var errPipeHeld = errors.New("the server's stdout stayed open after its process ended")

// pipeReader reads a stdio server's stdout pipe. Once the server's process
// has ended (drain), what it wrote is in the pipe already: a read that
// waits longer than the drain's grace for a byte fails (errPipeHeld), so a
// process that escaped the server's tree and still holds the pipe cannot
// keep the session from ending. Only waiting on the pipe counts; the time
// the client takes to decode what it read does not.
type pipeReader struct {
	f     *os.File
	grace atomic.Int64 // a time.Duration; 0 until drain
}

func (r *pipeReader) Read(p []byte) (int, error) {
	if g := time.Duration(r.grace.Load()); g > 0 {
		_ = r.f.SetReadDeadline(time.Now().Add(g))
	}
	n, err := r.f.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = errPipeHeld
	}
	return n, err
}

func (r *pipeReader) Close() error { return r.f.Close() }

// drain bounds every read from now on, and one already waiting, by grace.
func (r *pipeReader) drain(grace time.Duration) {
	r.grace.Store(int64(grace))
	_ = r.f.SetReadDeadline(time.Now().Add(grace))
}
