//go:build unix

package lineread

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

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
	if err == nil && max(fi.fd, fi.wakeFd) >= unix.FD_SETSIZE {
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
		var set unix.FdSet
		set.Set(fi.fd)
		set.Set(fi.wakeFd)
		if _, err := unix.Select(max(fi.fd, fi.wakeFd)+1, &set, nil, nil, nil); err != nil {
			if err == unix.EINTR {
				continue
			}
			return 0, fmt.Errorf("select: %w", err)
		}
		if set.IsSet(fi.wakeFd) {
			return 0, errStopped
		}
		n, err := unix.Read(fi.fd, p)
		switch {
		case err == unix.EINTR || err == unix.EAGAIN:
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
