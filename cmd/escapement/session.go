package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/escapement/escapement/kernel"
)

// The session file is the root agent's transcript as JSON Lines, written
// through as it happens — the header when the session opens, then each
// record with one write(2) as soon as it exists — and fsynced at the end
// of every turn and on exit:
//
//	{"type":"session","format":1,"model":"…","created":"…"}
//	{"type":"message","message":{"role":"user","content":"…"}}
//	…
//	{"type":"turn_end","turn":1,"outcome":"completed"}
//
// A turn counts once its turn_end line is written. A process killed in the
// middle of a turn leaves every record written so far (a kill cannot tear
// a record: each is one write; a power loss may), so the file always opens
// for --resume (session_load.go). Messages keep the kernel's flags
// (partial, marker, …), so a resumed kernel knows what the model was told.
// UI text is never written here.

const sessionFormat = 1

type sessionRecord struct {
	Type    string          `json:"type"`
	Format  int             `json:"format,omitempty"`
	Model   string          `json:"model,omitempty"`
	Created string          `json:"created,omitempty"`
	Message *kernel.Message `json:"message,omitempty"`
	Turn    uint64          `json:"turn,omitempty"`
	Outcome kernel.Outcome  `json:"outcome,omitzero"`
	Reason  kernel.Reason   `json:"reason,omitzero"`
}

// sessionWriter appends records. The kernel's goroutine (through the
// driver's observer) writes; a hard exit syncs it from the goroutine that
// reads signals, and a command that stops waiting for a stuck tree closes
// it from its own: mu orders them, and nothing is written after close.
type sessionWriter struct {
	path   string
	redact func(string) string

	mu     sync.Mutex
	f      *os.File
	w      io.Writer                 // f, or a test's wrapper of it
	syncer interface{ Sync() error } // f, or the wrapper when it syncs
	// logSync, when set, makes the write-ahead log durable before a record
	// is written (wal.Writer.Sync): after a power cut the session file can
	// lag its log, never hold what the log lost (docs/durable.md). It runs
	// where write does, on the kernel's goroutine.
	logSync func() error
	err     error // the first error; nothing is written after it
	closed  bool
}

// createSession creates a new session file at path (and its directory) and
// writes its header at once, so even a process killed before its first
// record leaves a file --resume accepts. An existing empty file is taken
// over (a session quit before the header was written, a file made by
// touch); checkNewSession has refused anything else.
func createSession(path, model string, redact func(string) string, wrap func(io.Writer) io.Writer) (*sessionWriter, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	s := newSessionWriter(path, f, redact, wrap)
	if st, err := f.Stat(); err != nil || st.Size() != 0 {
		f.Close()
		if err == nil {
			err = errors.New("the file is no longer empty")
		}
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	s.write(sessionRecord{Type: "session", Format: sessionFormat, Model: model, Created: time.Now().UTC().Format(time.RFC3339)})
	s.sync()
	return s, s.err
}

// newSession locks a new session file at path (making its directory, 0700
// as a state directory should be) and creates it. The lock is held until
// the command has returned (runWith); a session on a device (/dev/null)
// needs none.
func (a *app) newSession(path, model string, redact func(string) string) (*sessionWriter, error) {
	if keepsLog(path) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("session %s: %w", path, err)
		}
		lock, err := lockSession(path)
		if err != nil {
			return nil, err
		}
		a.session = lock
	}
	return createSession(path, model, redact, a.wrapSession)
}

// sessionFile is the real file of the session the flags name (--resume's,
// else --session's; resolveSession), "" when none is named.
func sessionFile(f *liveFlags) (string, error) {
	path, flag := f.session, "--session"
	if f.resume != "" {
		path, flag = f.resume, "--resume"
	}
	if path == "" {
		return "", nil
	}
	real, err := resolveSession(path)
	if err != nil {
		return "", usageErr("%s: %v", flag, err)
	}
	return real, nil
}

// appendSession opens a resumed session for appending. A file whose last
// complete record lacks its newline (written by hand, or by another tool)
// gets one first, so the next record starts a line of its own. An empty
// file (no header: impossible for a file loadSession accepted) is refused.
func appendSession(path string, redact func(string) string, wrap func(io.Writer) io.Writer) (*sessionWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	s := newSessionWriter(path, f, redact, wrap)
	last, err := lastByte(path)
	if err == nil && last != '\n' {
		_, err = f.Write([]byte{'\n'})
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	return s, nil
}

func newSessionWriter(path string, f *os.File, redact func(string) string, wrap func(io.Writer) io.Writer) *sessionWriter {
	s := &sessionWriter{path: path, f: f, w: f, syncer: f, redact: redact}
	if wrap != nil {
		s.w = wrap(f)
		if sy, ok := s.w.(interface{ Sync() error }); ok {
			s.syncer = sy
		}
	}
	return s
}

// lastByte is the last byte of the file at path.
func lastByte(path string) (byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if st.Size() == 0 {
		return 0, errors.New("empty file")
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], st.Size()-1); err != nil && err != io.EOF {
		return 0, err
	}
	return b[0], nil
}

// write appends one record with a single write, so a process killed at
// any instant leaves whole records only.
func (s *sessionWriter) write(r sessionRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.closed {
		return
	}
	b, err := json.Marshal(r)
	if err == nil {
		err = s.logFirst()
	}
	if err == nil {
		if s.redact != nil {
			b = []byte(s.redact(string(b)))
		}
		_, err = s.w.Write(append(b, '\n'))
	}
	if err != nil {
		s.err = fmt.Errorf("session %s: %w", s.path, err)
	}
}

// logFirst makes the log durable before a record derived from it is
// written (logSync).
func (s *sessionWriter) logFirst() error {
	if s.logSync == nil {
		return nil
	}
	if err := s.logSync(); err != nil {
		return fmt.Errorf("not written: its write-ahead log could not be made durable first: %w", err)
	}
	return nil
}

// writeRaw appends records already encoded and redacted (a recovery's
// catch-up, recoverRun) with a single write.
func (s *sessionWriter) writeRaw(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.closed {
		return
	}
	err := s.logFirst()
	if err == nil {
		_, err = s.w.Write(b)
	}
	if err != nil {
		s.err = fmt.Errorf("session %s: %w", s.path, err)
	}
}

// size is the session file's length now.
func (s *sessionWriter) size() (int64, error) {
	st, err := s.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("session %s: %w", s.path, err)
	}
	return st.Size(), nil
}

func (s *sessionWriter) message(m kernel.Message) {
	s.write(sessionRecord{Type: "message", Message: &m})
}

// turnEnd records a finished turn and makes everything so far durable.
func (s *sessionWriter) turnEnd(l kernel.Lifecycle) {
	s.write(sessionRecord{Type: "turn_end", Turn: l.Turn, Outcome: l.Outcome, Reason: l.Reason})
	s.sync()
}

// sync makes what was written durable (fsync).
func (s *sessionWriter) sync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.closed {
		return
	}
	if err := s.syncer.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		// EINVAL, ENOTSUP: a file that cannot be synced (/dev/null).
		s.err = fmt.Errorf("session %s: %w", s.path, err)
	}
}

// failed is the first error, if any.
func (s *sessionWriter) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// close syncs (without a turn_end: an unfinished turn stays unfinished),
// closes, and reports the first error. Later writes are dropped.
func (s *sessionWriter) close() error {
	s.sync()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.err
	}
	s.closed = true
	if err := s.f.Close(); err != nil && s.err == nil {
		s.err = fmt.Errorf("session %s: %w", s.path, err)
	}
	return s.err
}

// defaultSessionPath is where a session goes without --session:
// $XDG_STATE_HOME/escapement/sessions (~/.local/state when unset).
func defaultSessionPath() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no --session given and no home directory for the default: %w", err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	name := time.Now().UTC().Format("20060102-150405") + "-" + strconv.Itoa(os.Getpid()) + ".jsonl"
	return filepath.Join(dir, "escapement", "sessions", name), nil
}
