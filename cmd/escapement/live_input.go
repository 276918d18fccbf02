package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"
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

// fileInput reads a file (the process's stdin) so that a blocked read can be
// interrupted: it waits in select(2) on the file and on a wake-up pipe, and
// reads only once the file is readable. Making the file non-blocking
// instead would change flags it shares with the shell that started us.
type fileInput struct {
	f      *os.File // kept reachable: its finalizer would close fd
	fd     int
	wakeR  *os.File
	wakeW  *os.File
	wakeFd int
}

// fdBits is the number of descriptors per word of a syscall.FdSet.
const fdBits = 8 * int(unsafe.Sizeof(syscall.FdSet{}.Bits[0]))

func newFileInput(f *os.File) (*fileInput, error) {
	fi := &fileInput{f: f, fd: -1}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	if err := rc.Control(func(fd uintptr) { fi.fd = int(fd) }); err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	if fi.wakeR, fi.wakeW, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("stdin: wake-up pipe: %w", err)
	}
	rc, err = fi.wakeR.SyscallConn()
	if err == nil {
		err = rc.Control(func(fd uintptr) { fi.wakeFd = int(fd) })
	}
	if err == nil && max(fi.fd, fi.wakeFd) >= len(syscall.FdSet{}.Bits)*fdBits {
		err = fmt.Errorf("descriptors %d and %d: beyond select's limit", fi.fd, fi.wakeFd)
	}
	if err != nil {
		fi.wakeR.Close()
		fi.wakeW.Close()
		return nil, fmt.Errorf("stdin: %w", err)
	}
	return fi, nil
}

func (fi *fileInput) Read(p []byte) (int, error) {
	for {
		var set syscall.FdSet
		set.Bits[fi.fd/fdBits] |= 1 << (fi.fd % fdBits)
		set.Bits[fi.wakeFd/fdBits] |= 1 << (fi.wakeFd % fdBits)
		if _, err := syscall.Select(max(fi.fd, fi.wakeFd)+1, &set, nil, nil, nil); err != nil {
			if err == syscall.EINTR {
				continue
			}
			return 0, fmt.Errorf("select: %w", err)
		}
		if set.Bits[fi.wakeFd/fdBits]&(1<<(fi.wakeFd%fdBits)) != 0 {
			return 0, errInputStopped
		}
		n, err := syscall.Read(fi.fd, p)
		switch {
		case err == syscall.EINTR || err == syscall.EAGAIN:
			continue // a signal, or a non-blocking file with nothing after all
		case err != nil:
			return 0, fmt.Errorf("read: %w", err)
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// interrupt makes the wake-up pipe readable (at end of file) for good: a
// select in progress returns, and every later Read stops at once.
func (fi *fileInput) interrupt() { fi.wakeW.Close() }

// close releases the wake-up pipe once no Read can run any more.
func (fi *fileInput) close() { fi.wakeR.Close() }
