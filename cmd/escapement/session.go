package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/escapement/escapement/kernel"
)

// The session file is the root agent's transcript as JSON Lines, appended
// as it happens and fsynced at the end of every turn:
//
//	{"type":"session","format":1,"model":"…","created":"…"}
//	{"type":"message","message":{"role":"user","content":"…"}}
//	…
//	{"type":"turn_end","turn":1,"outcome":"completed"}
//
// A turn counts once its turn_end line is written: resuming keeps the
// messages up to the last turn_end and cuts off the rest (the turn that was
// in flight when the process died), so a crash loses at most that turn.
// Messages keep the kernel's flags (partial, marker, …), so a resumed
// kernel knows what the model was told. UI text is never written here.

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

// sessionWriter appends records; only the kernel's goroutine (through the
// driver's observer) uses it.
type sessionWriter struct {
	path string
	f    *os.File
	w    *bufio.Writer
	err  error
}

// openSession opens path for appending, creating it (and its directory)
// when needed; a new or empty file gets a header.
func openSession(path, model string) (*sessionWriter, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", path, err)
	}
	s := &sessionWriter{path: path, f: f, w: bufio.NewWriter(f)}
	if st, err := f.Stat(); err == nil && st.Size() == 0 {
		s.write(sessionRecord{Type: "session", Format: sessionFormat, Model: model, Created: time.Now().UTC().Format(time.RFC3339)})
	}
	return s, s.err
}

func (s *sessionWriter) write(r sessionRecord) {
	if s.err != nil {
		return
	}
	b, err := json.Marshal(r)
	if err == nil {
		b = append(b, '\n')
		_, err = s.w.Write(b)
	}
	if err != nil {
		s.err = fmt.Errorf("session %s: %w", s.path, err)
	}
}

func (s *sessionWriter) message(m kernel.Message) {
	s.write(sessionRecord{Type: "message", Message: &m})
}

// turnEnd records a finished turn and makes everything so far durable.
func (s *sessionWriter) turnEnd(l kernel.Lifecycle) {
	s.write(sessionRecord{Type: "turn_end", Turn: l.Turn, Outcome: l.Outcome, Reason: l.Reason})
	s.sync()
}

func (s *sessionWriter) sync() {
	if s.err != nil {
		return
	}
	if err := s.w.Flush(); err != nil {
		s.err = fmt.Errorf("session %s: %w", s.path, err)
		return
	}
	if err := s.f.Sync(); err != nil {
		s.err = fmt.Errorf("session %s: %w", s.path, err)
	}
}

// close flushes (without a turn_end: an unfinished turn stays unfinished)
// and reports the first error.
func (s *sessionWriter) close() error {
	if s.err == nil {
		if err := s.w.Flush(); err != nil {
			s.err = fmt.Errorf("session %s: %w", s.path, err)
		}
	}
	if err := s.f.Close(); err != nil && s.err == nil {
		s.err = fmt.Errorf("session %s: %w", s.path, err)
	}
	return s.err
}

// loadedSession is what resuming found.
type loadedSession struct {
	history   []kernel.Message
	turns     int
	discarded int   // messages of an unfinished turn, cut off
	torn      bool  // the file ended inside a line (a write cut short)
	keep      int64 // byte length of the file up to the last turn_end
}

// loadSession reads a session file for --resume. Errors name file:line.
func loadSession(path string) (*loadedSession, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	ls := &loadedSession{}
	var (
		pending   []kernel.Message
		lines     []int // line of each committed message, for errors
		pendLines []int
		offset    int64
		headerOK  bool
	)
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			// A torn last write: part of the unfinished turn, cut off.
			ls.torn = true
			break
		}
		line := data[:i]
		data = data[i+1:]
		offset += int64(i + 1)
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var r sessionRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s:%d: not a session record: %v", path, n, err)
		}
		switch r.Type {
		case "session":
			if r.Format != sessionFormat {
				return nil, fmt.Errorf("%s:%d: session format %d, this build reads %d", path, n, r.Format, sessionFormat)
			}
			headerOK = true
		case "message":
			if r.Message == nil {
				return nil, fmt.Errorf("%s:%d: message record without a message", path, n)
			}
			pending = append(pending, *r.Message)
			pendLines = append(pendLines, n)
		case "turn_end":
			ls.history = append(ls.history, pending...)
			lines = append(lines, pendLines...)
			pending, pendLines = nil, nil
			ls.turns++
			ls.keep = offset
		default:
			return nil, fmt.Errorf("%s:%d: unknown record type %q", path, n, r.Type)
		}
	}
	if !headerOK {
		return nil, fmt.Errorf("%s:1: not an escapement session file (no session header)", path)
	}
	ls.discarded = len(pending)
	if err := kernel.ValidateTranscript(ls.history, false); err != nil {
		var te *kernel.TranscriptError
		if errors.As(err, &te) && te.Index < len(lines) {
			return nil, fmt.Errorf("%s:%d: %s", path, lines[te.Index], te.Detail)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ls, nil
}

// truncateSession cuts the unfinished turn off the file before appending,
// so it cannot resurface inside a later turn.
func truncateSession(path string, keep int64) error {
	if err := os.Truncate(path, keep); err != nil {
		return fmt.Errorf("session %s: drop the unfinished turn: %w", path, err)
	}
	return nil
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
