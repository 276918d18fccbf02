// Package lineread reads a program's input line by line on a goroutine
// that can be stopped while it is blocked in a read — of a terminal, a
// pipe, a file — without touching the file's flags, and bounds what one
// line may hold: a longer line is read to its end and handed over refused,
// and the lines after it are read as usual. escapement chat reads its
// stdin with it (docs/live.md, "escapement chat").
package lineread

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxLine bounds one line (1 MiB, as --max-message-bytes bounds what the
// model sends back by default). A longer line is read to its end but not
// kept: it arrives refused (Line.Size), and the lines after it are read as
// usual.
const MaxLine = 1 << 20

// Line is one line of input, without its line end.
type Line struct {
	Text string
	N    int // its number, from 1
	// Size is the length of a line over MaxLine, which is refused (Text
	// is then empty); 0 for a line that is kept.
	Size int
}

// Reader is a goroutine that reads lines and hands them over on Lines,
// closed at the end of input. Its owner calls Close before it returns:
// Close stops the goroutine even while it is blocked in a read of a
// terminal or a pipe, and waits for it.
type Reader struct {
	Lines     chan Line
	err       error // why the input ended early (not EOF); read once Lines is closed
	stop      chan struct{}
	ended     chan struct{}
	interrupt func() // unblocks a read in progress
	release   func() // frees what the reader used, once it has ended
}

// Start starts reading r. A file (stdin) is read through select(2), so
// Close can stop a read in progress.
func Start(r io.Reader) (*Reader, error) {
	in := &Reader{
		Lines: make(chan Line), stop: make(chan struct{}), ended: make(chan struct{}),
		interrupt: func() {}, release: func() {},
	}
	src := r
	if f, ok := r.(*os.File); ok {
		fi, err := newFileInput(f)
		if err != nil {
			return nil, err
		}
		src, in.interrupt, in.release = fi, fi.interrupt, fi.close
	}
	// Any other reader (tests pass a strings.Reader) must not block forever:
	// Close waits for the goroutine.
	go in.read(src) // owned: Close waits for it
	return in, nil
}

// read hands over each line — ended by LF, CRLF or the end of input — of
// any length: one over MaxLine is read to its end and handed over
// refused, without its text.
func (in *Reader) read(src io.Reader) {
	defer close(in.ended)
	defer close(in.Lines)
	br := bufio.NewReaderSize(src, 64<<10)
	var line []byte
	n, size := 0, 0
	for {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		if size <= MaxLine+len("\r\n") {
			line = append(line, chunk...)
		} else {
			line = line[:0]
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if size > 0 {
			n++
			l := Line{N: n}
			text := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
			if len(text) > MaxLine || size > MaxLine+len("\r\n") {
				l.Size = size - lineEnd(chunk)
			} else {
				l.Text = text
			}
			select {
			case in.Lines <- l:
			case <-in.stop:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, errStopped) {
				in.err = fmt.Errorf("stdin: %w", err)
			}
			return
		}
		line, size = line[:0], 0
		if cap(line) > 1<<20 {
			line = nil // do not keep a long line's buffer for chat's life
		}
	}
}

// lineEnd is how many bytes of the line's last chunk end it (LF or CRLF).
func lineEnd(chunk []byte) int {
	switch {
	case bytes.HasSuffix(chunk, []byte("\r\n")):
		return 2
	case bytes.HasSuffix(chunk, []byte("\n")):
		return 1
	}
	return 0
}

// Err is why the input ended early (a read error, not the end of input);
// read it once Lines is closed.
func (in *Reader) Err() error { return in.err }

// Close stops the reader, interrupting a read in progress, and waits for it.
func (in *Reader) Close() {
	close(in.stop)
	in.interrupt()
	<-in.ended
	in.release()
}

var errStopped = errors.New("input stopped")

// MaxPrompt bounds a prompt read whole from stdin (ReadPrompt): 8 MiB.
const MaxPrompt = 8 << 20

// ReadPrompt reads r (run's stdin) to its end as one prompt, its trailing
// line ends dropped; an input over MaxPrompt is refused, saying so.
func ReadPrompt(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxPrompt+1))
	if err != nil {
		return "", fmt.Errorf("stdin: %w", err)
	}
	if len(b) > MaxPrompt {
		return "", fmt.Errorf("stdin holds more than the %d MiB a prompt may hold", MaxPrompt>>20)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
