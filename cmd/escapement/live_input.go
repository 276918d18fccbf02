package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MaxInputLine bounds one line of chat's input (1 MiB, as
// --max-message-bytes bounds what the model sends back by default). A
// longer line is read to its end but not kept: it reaches the REPL as
// refused (inputLine.size), and the lines after it are read as usual
// (docs/live.md, "escapement chat").
const MaxInputLine = 1 << 20

// inputLine is one line of chat's input, without its line end.
type inputLine struct {
	text string
	n    int // its number, from 1
	// size is the length of a line over MaxInputLine, which is refused
	// (text is then empty); 0 for a line that is kept.
	size int
}

// lineInput is chat's stdin: a goroutine that reads lines and hands them
// over on lines, closed at the end of input. Its owner is the REPL, which
// calls close before it returns: close stops the goroutine even while it is
// blocked in a read of a terminal or a pipe, and waits for it.
type lineInput struct {
	lines     chan inputLine
	err       error // why the input ended early (not EOF); read once lines is closed
	stop      chan struct{}
	ended     chan struct{}
	interrupt func() // unblocks a read in progress
	release   func() // frees what the reader used, once it has ended
}

func startInput(r io.Reader) (*lineInput, error) {
	in := &lineInput{
		lines: make(chan inputLine), stop: make(chan struct{}), ended: make(chan struct{}),
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
	// close waits for the goroutine.
	go in.read(src) // owned: close waits for it
	return in, nil
}

// read hands over each line — ended by LF, CRLF or the end of input — of
// any length: one over MaxInputLine is read to its end and handed over
// refused, without its text.
func (in *lineInput) read(src io.Reader) {
	defer close(in.ended)
	defer close(in.lines)
	br := bufio.NewReaderSize(src, 64<<10)
	var line []byte
	n, size := 0, 0
	for {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		if size <= MaxInputLine+len("\r\n") {
			line = append(line, chunk...)
		} else {
			line = line[:0]
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if size > 0 {
			n++
			l := inputLine{n: n}
			text := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
			if len(text) > MaxInputLine || size > MaxInputLine+len("\r\n") {
				l.size = size - lineEnd(chunk)
			} else {
				l.text = text
			}
			select {
			case in.lines <- l:
			case <-in.stop:
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, errInputStopped) {
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

// close stops the reader, interrupting a read in progress, and waits for it.
func (in *lineInput) close() {
	close(in.stop)
	in.interrupt()
	<-in.ended
	in.release()
}

var errInputStopped = errors.New("input stopped")
