// Package userfile reads the files a user names on the command line —
// scenario files, traces, session files — without trusting what they are.
// os.ReadFile would hang forever opening a FIFO nobody writes to, and read
// /dev/zero until memory runs out. Read opens the file non-blocking (so the
// open of a FIFO returns at once), refuses anything but a regular file (a
// FIFO, a device, a socket, a directory), and reads through a size limit,
// so a file that is, or grows, too large is refused instead of read whole.
// Every error names the file.
package userfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error for a path that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file past the limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the contents of the regular file at path, or an error naming
// path when it cannot be opened, is not a regular file, or holds more than
// limit bytes.
func Read(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadFrom(f, path, limit)
}

// Open opens path for reading, non-blocking, and returns it only when it is
// a regular file (symlinks are followed, as a user naming a file expects).
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err // *fs.PathError: names the file
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode()))
	}
	return f, nil
}

// ReadFrom reads f (opened by Open) through limit; path names it in errors.
func ReadFrom(f *os.File, path string, limit int64) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, tooLarge(path, st.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > limit { // it grew while we read
		return nil, tooLarge(path, int64(len(data)), limit)
	}
	return data, nil
}

func tooLarge(path string, size, limit int64) error {
	return fmt.Errorf("%s: %w: more than %d bytes (%d or more), the limit is %d", path, ErrTooLarge, limit, size, limit)
}

// kind says what a non-regular file is, for the error.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "mode " + m.String()
}
