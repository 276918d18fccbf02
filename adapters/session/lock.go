package session

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// One process at a time uses a session: two runs resuming one crashed
// session would both continue its turn (the model billed twice, the answer
// and its turn_end written twice), and two chats appending to one file
// interleave their records until it no longer resumes. So a session holds
// an advisory lock for its whole life (docs/durable.md):
// flock(2) on FILE.lock beside the session file, which also covers its
// write-ahead log FILE.wal and the backups made beside it. The holder
// writes its pid into the lock file, so a second run is refused with a
// message naming it. The lock belongs to the open file, and the file is
// opened close-on-exec, so the operating system releases it when the
// process dies however it dies (kill -9 included), and no tool's child
// process can inherit it and keep it past its parent. A process that ends
// normally removes the lock file before it lets go of the lock.

// LockSuffix names a session's lock file: FILE.lock.
const LockSuffix = ".lock"

// Lock is a held lock on a session.
type Lock struct {
	path string
	f    *os.File
}

// ErrBusy is wrapped by the refusal of a session another process holds
// (a *BusyError).
var ErrBusy = errors.New("session in use")

// BusyError names the process that holds a session.
type BusyError struct {
	// Session is the session file.
	Session string
	// PID is the holder's process id; 0 when not known (it has not
	// written it yet).
	PID int
}

func (e *BusyError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "process " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("%s is in use by %s (an escapement run or chat; its lock is %s): two runs on one session would interleave its records; wait for it to end", e.Session, who, e.Session+LockSuffix)
}

func (e *BusyError) Unwrap() error { return ErrBusy }

// TakeLock takes the lock on the session at sessionPath (the real file:
// Resolve), or says which process holds it (a *BusyError). The session's
// directory must exist. Create and Resume take it themselves.
func TakeLock(sessionPath string) (*Lock, error) {
	path := sessionPath + LockSuffix
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", sessionPath, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			pid := holderPID(f)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, &BusyError{Session: sessionPath, PID: pid}
			}
			return nil, fmt.Errorf("lock %s: %w", sessionPath, err)
		}
		// The holder before us removes the file before it unlocks: if we
		// opened it before that, we now hold a lock on a name that is gone,
		// and a third process may hold the new file. Only the file at path
		// counts.
		if samePath(f, path) {
			l := &Lock{path: path, f: f}
			if err := l.writePID(); err != nil {
				l.Release()
				return nil, fmt.Errorf("lock %s: %w", sessionPath, err)
			}
			return l, nil
		}
		f.Close()
	}
}

// samePath reports whether f is still the file at path.
func samePath(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

func (l *Lock) writePID() error {
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err := l.f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// holderPID reads the pid the holder of f's lock wrote, waiting briefly
// for a holder that has just taken it; 0 when there is none.
func holderPID(f *os.File) int {
	for range 20 {
		b := make([]byte, 32)
		n, err := f.ReadAt(b, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0
		}
		if s, ok := strings.CutSuffix(string(b[:n]), "\n"); ok {
			pid, _ := strconv.Atoi(s)
			return pid
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0
}

// Release removes the lock file and then lets go of the lock (the order
// TakeLock's check relies on). Safe on nil and more than once.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	os.Remove(l.path)
	l.f.Close()
	l.f = nil
}

// Resolve is the file a session path names: the path with every
// symlink resolved, so a session reached through a symlink is resumed,
// cut and backed up in the real file, and its lock and log are found beside
// the real file whatever name reaches it. A path that does not exist yet
// (a new session) has its directory resolved; a symlink to nothing is
// refused (the file it would create is not where its log would be looked
// for). A path that is not a regular file (/dev/null) stays as it is.
func Resolve(path string) (string, error) {
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.Mode().IsRegular():
		return path, nil
	case err == nil:
		return filepath.EvalSymlinks(path)
	case !errors.Is(err, fs.ErrNotExist):
		return "", err
	}
	if lst, lerr := os.Lstat(path); lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(path)
		return "", fmt.Errorf("%s is a symlink to %s, which does not exist; name the file itself", path, target)
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return path, nil // a directory still to be made
	}
	return filepath.Join(dir, filepath.Base(path)), nil
}
