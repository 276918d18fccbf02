package session

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
//	{"type":"grant","grant":{"tool":"shell"}}
//	{"type":"turn_end","turn":1,"outcome":"completed","usage":{…}}
//	{"type":"compaction","turn":2,"replaced":6,"history":[…]}
//
// A turn counts once its turn_end line is written. A process killed in the
// middle of a turn leaves every record written so far (a kill cannot tear
// a record: each is one write; a power loss may), so the file always opens
// for Resume (load.go). Messages keep the kernel's flags (partial, marker,
// …), so a resumed kernel knows what the model was told. UI text is never
// written here. A grant record is a session grant an approval made
// ("approve for this session", kernel.Grant): a resumed session starts
// with the grants of its complete turns (docs/durable.md, "Approvals
// across a crash").
//
// A compaction of the root's history (docs/semantics.md, "Compaction")
// leaves the messages it replaced where they are — kept for audit — and
// adds a compaction record holding the history that replaced them (the
// system prompt, the summary, the kept tail): a resume reads the history
// from the last compaction on (load.go). A turn_end carries the turn's
// usage (docs/semantics.md, "Usage"), when it made a request; an
// assistant message and a compaction record, the usage of the request
// that produced them, when the server reported it.

// Format is the session file format this package writes and reads (the
// header's "format"); docs/durable.md versions it.
const Format = 1

// Record is one line of a session file: the header ("session"), a root
// message ("message"), a session grant ("grant"), the end of a root turn
// ("turn_end") or a compaction of the root's history ("compaction").
type Record struct {
	Type    string          `json:"type"`
	Format  int             `json:"format,omitempty"`
	Model   string          `json:"model,omitempty"`
	Created string          `json:"created,omitempty"`
	Message *kernel.Message `json:"message,omitempty"`
	Grant   *kernel.Grant   `json:"grant,omitempty"`
	Turn    uint64          `json:"turn,omitempty"`
	Outcome kernel.Outcome  `json:"outcome,omitzero"`
	Reason  kernel.Reason   `json:"reason,omitzero"`
	// Usage is a turn_end's: the turn's total (nil: it made no request);
	// an assistant message's or a compaction's: what the request whose end
	// appended it reported (nil: none).
	Usage *kernel.Usage `json:"usage,omitempty"`
	// Replaced and History are a compaction's: how many messages the
	// summary replaced (they are in the file above) and the root's
	// history after it.
	Replaced int              `json:"replaced,omitempty"`
	History  []kernel.Message `json:"history,omitempty"`
}

// fileWriter appends records. The kernel's goroutine (through the
// driver's observer) writes; a hard exit syncs it from the goroutine that
// reads signals, and a host that stops waiting for a stuck tree closes it
// from its own: mu orders them, and nothing is written after close.
type fileWriter struct {
	path   string
	redact func(string) string

	mu     sync.Mutex
	f      *os.File
	w      io.Writer                 // f, or a wrapper of it (Config.WrapFile)
	syncer interface{ Sync() error } // f, or the wrapper when it syncs
	// logSync, when set, makes the write-ahead log durable before a record
	// is written (wal.Writer.Sync): after a power cut the session file can
	// lag its log, never hold what the log lost (docs/durable.md). It runs
	// where write does, on the kernel's goroutine.
	logSync func() error
	err     error // the first error; nothing is written after it
	closed  bool
}

// createFile creates a new session file at path (and its directory) and
// writes its header at once, so even a process killed before its first
// record leaves a file Resume accepts. An existing empty file is taken over
// (a session quit before the header was written, a file made by touch);
// checkNew has refused anything else.
func createFile(path, model string, redact func(string) string, wrap func(io.Writer) io.Writer) (*fileWriter, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	s := newFileWriter(path, f, redact, wrap)
	if st, err := f.Stat(); err != nil || st.Size() != 0 {
		f.Close()
		if err == nil {
			err = errors.New("the file is no longer empty")
		}
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	s.write(Record{Type: "session", Format: Format, Model: model, Created: time.Now().UTC().Format(time.RFC3339)})
	s.sync()
	return s, s.err
}

// appendFile opens a resumed session for appending. A file whose last
// complete record lacks its newline (written by hand, or by another tool)
// gets one first, so the next record starts a line of its own. An empty
// file (no header: impossible for a file Load accepted) is refused.
func appendFile(path string, redact func(string) string, wrap func(io.Writer) io.Writer) (*fileWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	s := newFileWriter(path, f, redact, wrap)
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

func newFileWriter(path string, f *os.File, redact func(string) string, wrap func(io.Writer) io.Writer) *fileWriter {
	s := &fileWriter{path: path, f: f, w: f, syncer: f, redact: redact}
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
func (s *fileWriter) write(r Record) {
	b, err := json.Marshal(r)
	if err != nil {
		s.mu.Lock()
		s.fail(err)
		s.mu.Unlock()
		return
	}
	if s.redact != nil {
		b = []byte(s.redact(string(b)))
	}
	s.writeRaw(append(b, '\n'))
}

// writeRaw appends records already encoded and redacted (a recovery's
// catch-up) with a single write, the log made durable first (logSync).
func (s *fileWriter) writeRaw(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.closed {
		return
	}
	err := s.logFirst()
	if err == nil {
		_, err = s.w.Write(b)
	}
	s.fail(err)
}

// fail keeps err as the first error (mu held).
func (s *fileWriter) fail(err error) {
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("session %s: %w", s.path, err)
	}
}

// logFirst makes the log durable before a record derived from it is
// written (logSync).
func (s *fileWriter) logFirst() error {
	if s.logSync == nil {
		return nil
	}
	if err := s.logSync(); err != nil {
		return fmt.Errorf("not written: its write-ahead log could not be made durable first: %w", err)
	}
	return nil
}

// size is the session file's length now.
func (s *fileWriter) size() (int64, error) {
	st, err := s.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("session %s: %w", s.path, err)
	}
	return st.Size(), nil
}

// message records a root message; u is the usage the request whose end
// appended it reported (nil for any other message, or when it reported
// none).
func (s *fileWriter) message(m kernel.Message, u *kernel.Usage) {
	s.write(Record{Type: "message", Message: &m, Usage: u})
}

// compaction records a compaction of the root's history in turn: replaced
// messages (written above) gave way to history.
// u is the usage its summarising request reported.
func (s *fileWriter) compaction(turn uint64, replaced int, history []kernel.Message, u *kernel.Usage) {
	s.write(Record{Type: "compaction", Turn: turn, Replaced: replaced, History: history, Usage: u})
}

func (s *fileWriter) grant(g kernel.Grant) {
	s.write(Record{Type: "grant", Grant: &g})
}

// turnEnd records a finished turn and makes everything so far durable.
func (s *fileWriter) turnEnd(l kernel.Lifecycle) {
	s.write(Record{Type: "turn_end", Turn: l.Turn, Outcome: l.Outcome, Reason: l.Reason, Usage: l.Usage})
	s.sync()
}

// sync makes what was written durable (fsync).
func (s *fileWriter) sync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil || s.closed {
		return
	}
	if err := s.syncer.Sync(); err != nil && !unsyncable(err) {
		s.fail(err)
	}
}

// unsyncable reports an error that only says the file cannot be synced
// (/dev/null): EINVAL, ENOTSUP.
func unsyncable(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP)
}

// failed is the first error, if any.
func (s *fileWriter) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// close syncs (without a turn_end: an unfinished turn stays unfinished),
// closes, and reports the first error. Later writes are dropped.
func (s *fileWriter) close() error {
	s.sync()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.err
	}
	s.closed = true
	if s.f != nil {
		if err := s.f.Close(); err != nil {
			s.fail(err)
		}
	}
	return s.err
}

// isSessionFile reports whether path starts with a session header.
func isSessionFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	line, _ := bufio.NewReader(io.LimitReader(f, 64<<10)).ReadBytes('\n')
	var r Record
	return json.Unmarshal(line, &r) == nil && r.Type == "session"
}
