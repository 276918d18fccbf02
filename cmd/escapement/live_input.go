package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
)

// lineInput is chat's stdin: a goroutine that reads lines and hands them
// over on lines, closed at the end of input. Its owner is the REPL, which
// calls close before it returns: close stops the goroutine even while it is
// blocked in a read of a terminal or a pipe, and waits for it.
type lineInput struct {
	lines     chan string
	err       error // why the input ended early (not EOF); read once lines is closed
	stop      chan struct{}
	ended     chan struct{}
	interrupt func() // unblocks a read in progress
	release   func() // frees what the reader used, once it has ended
}

func startInput(r io.Reader) (*lineInput, error) {
	in := &lineInput{
		lines: make(chan string), stop: make(chan struct{}), ended: make(chan struct{}),
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

func (in *lineInput) read(src io.Reader) {
	defer close(in.ended)
	defer close(in.lines)
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		select {
		case in.lines <- sc.Text():
		case <-in.stop:
			return
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, errInputStopped) {
		in.err = fmt.Errorf("stdin: %w", err)
	}
}

// close stops the reader, interrupting a read in progress, and waits for it.
func (in *lineInput) close() {
	close(in.stop)
	in.interrupt()
	<-in.ended
	in.release()
}

var errInputStopped = errors.New("input stopped")
