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
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxLineBytes bounds one line of a stdio server's stdout, the largest
// message the client reads: the SDK's own bound, so a result can be large
// but not unbounded (the model gets at most Options.OutputLimit of it).
const maxLineBytes = sdk.DefaultMaxLineLength

// noiseKeep bounds how much of a skipped stdout line is reported.
const noiseKeep = 200

// errLineTooLong ends a stdio session whose server wrote a line longer than
// maxLineBytes: no message can be that large, and reading on would buffer
// without bound.
var errLineTooLong = fmt.Errorf("the server wrote a line of more than %d MiB to its stdout (a message too large to read)", maxLineBytes>>20)

// stdoutFilter passes a stdio server's stdout to the SDK one line at a
// time, keeping only the lines that are JSON-RPC messages. The MCP stdio
// transport forbids anything else on stdout, but servers print banners and
// log lines there ("Server running on stdio", a logger's JSON lines); the
// SDK's decoder would fail the whole connection on the first one. Like the
// TypeScript SDK, the client skips such a line; each is reported (noise),
// cut to noiseKeep bytes, so a misconfigured server is visible in the
// debug log. A line is read whole before it is passed on (at most
// maxLineBytes: beyond that Read fails with errLineTooLong).
type stdoutFilter struct {
	src   io.ReadCloser
	r     *bufio.Reader
	noise func(string)

	line    []byte // the line being read, reused
	pending []byte // the rest of an accepted line not yet returned
	err     error
}

func newStdoutFilter(src io.ReadCloser, noise func(string)) *stdoutFilter {
	return &stdoutFilter{src: src, r: bufio.NewReaderSize(src, 64<<10), noise: noise}
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
	if cap(f.line) > 1<<20 {
		f.line = nil // do not keep a huge message's buffer for the session's life
	}
	f.line = f.line[:0]
	for {
		chunk, err := f.r.ReadSlice('\n')
		if len(f.line)+len(chunk) > maxLineBytes {
			f.err = errLineTooLong
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
	switch {
	case len(msg) == 0:
	case isMessage(msg):
		f.pending = append(msg, '\n') // the line's own bytes: its newline (or space) is overwritten
	case f.noise != nil:
		f.noise(textcut.Clip(string(msg), noiseKeep))
	}
}

// isMessage reports whether line is a JSON-RPC message or a batch of them.
func isMessage(line []byte) bool {
	if line[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(line, &batch) != nil || len(batch) == 0 {
			return false
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return false
			}
		}
		return true
	}
	_, err := jsonrpc.DecodeMessage(line)
	return err == nil
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
