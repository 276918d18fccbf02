package session

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/escapement/escapement/adapters/wal"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// A session whose file is a regular file keeps a write-ahead log beside
// it, FILE.wal (adapters/wal, docs/durable.md): every event the kernel is
// fed, written before anything it caused happens. A run that ends cleanly —
// the driver stopped, the session file closed without error — marks the
// log ended and removes it: the session file then holds everything. A log
// found beside the file by Resume is the record of a process that died
// (kill -9, a crash, a power cut): the resume rebuilds the tree from it,
// brings the session file up to where the log ends, and continues the
// unfinished turn (recover.go).

// LogSuffix names a session's write-ahead log: FILE.wal.
const LogSuffix = ".wal"

// OffsetOption names the log header's option (trace.Header.Options) that
// records the session file's length when the log began: the records after it are the ones the logged run
// wrote, and a recovery compares them with what the log replays.
const OffsetOption = "session_offset"

// buildName names this build in trace and log headers.
func buildName() string { return "escapement " + runtime.Version() }

// redactingWriter passes every write through redact. Its writers write
// whole records (a trace line per step, a log record), so a secret is
// never split across two writes.
type redactingWriter struct {
	w      io.Writer
	redact func(string) string
}

func (r redactingWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, r.redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// redacting wraps w in redact, unless there is none.
func redacting(w io.Writer, redact func(string) string) io.Writer {
	if redact == nil {
		return w
	}
	return redactingWriter{w: w, redact: redact}
}

// redactingFile is the log's file seen through the redactor (each record
// is one write, so a secret is never split across two).
type redactingFile struct {
	io.Writer
	syncer interface{ Sync() error } // the file, or Config.WrapLog's wrapper
}

func (r redactingFile) Sync() error { return r.syncer.Sync() }

// logWrap is how the log's records reach its file: through Config.WrapLog
// and the redactor.
func (s *Session) logWrap() wal.Wrap {
	return func(f *os.File) wal.File {
		var w io.Writer = f
		var syncer interface{ Sync() error } = f
		if s.opts.WrapLog != nil {
			w = s.opts.WrapLog(f)
			if sy, ok := w.(interface{ Sync() error }); ok {
				syncer = sy
			}
		}
		return redactingFile{redacting(w, s.opts.Redact), syncer}
	}
}

// keepsLog reports whether a session at path gets a write-ahead log and a
// lock: a regular file (or one about to be created), not /dev/null.
func keepsLog(sessionPath string) bool {
	st, err := os.Stat(sessionPath)
	return err != nil || st.Mode().IsRegular()
}

// crashedLog returns the write-ahead log beside the session at path when a
// process died while writing it; nil when there is none, or when the run it
// recorded ended cleanly (that log is removed: the session file holds
// everything it did).
//
// A log without a header line — its creation cut by a power cut: nothing
// was recorded in it — is set aside (headless says what became of it), and
// the session resumes alone.
func crashedLog(sessionPath string) (l *wal.Log, headless string, err error) {
	path := sessionPath + LogSuffix
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	l, err = wal.Read(path)
	if errors.Is(err, wal.ErrNoHeader) {
		what, err := setAsideHeadless(path, time.Now())
		if err != nil {
			return nil, "", err
		}
		return nil, fmt.Sprintf("%s has no header line (its creation was cut): %s", path, what), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w\n(%s is the write-ahead log of %s; move it away to resume from the session file alone, without the turn it recorded)", err, path, sessionPath)
	}
	if l.Clean {
		if err := os.Remove(path); err != nil {
			return nil, "", err
		}
		return nil, "", nil
	}
	return l, "", nil
}

// startLog creates the write-ahead log of a run that starts from its session
// file (a new session, or one resumed cleanly). A log left at that name by
// a session that is gone (its file deleted and the name reused) is kept
// aside as FILE.wal.stale-<time>, never overwritten.
func (s *Session) startLog(kcfg kernel.Config) error {
	if !keepsLog(s.path) {
		return nil
	}
	path := s.path + LogSuffix
	if _, err := os.Lstat(path); err == nil {
		aside := path + ".stale-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(path, aside); err != nil {
			return err
		}
		s.notice("%s was left by an earlier session of that name; kept as %s", path, aside)
	}
	offset, err := s.file.size()
	if err != nil {
		return err
	}
	hdr := trace.HeaderOf(kcfg)
	hdr.Source, hdr.Name, hdr.Build = "live", s.path, buildName()
	hdr.Options = map[string]string{OffsetOption: strconv.FormatInt(offset, 10)}
	s.log, s.logF, err = wal.Create(path, hdr, s.logWrap())
	s.logPath = path
	if err == nil {
		s.file.logSync = s.log.Sync
	}
	return err
}

// closeLog ends the log when the run ended cleanly: the end line, then the
// file is removed (the session file holds everything). Otherwise the log
// stays for the next Resume, which recovers from it.
func (s *Session) closeLog(clean bool) error {
	if s.log == nil {
		return nil
	}
	var err error
	if clean {
		err = s.log.Close(s.driver.Kernel().Now())
	}
	if cerr := s.logF.Close(); err == nil {
		err = cerr
	}
	if err != nil || !clean {
		return err
	}
	if err := os.Remove(s.logPath); err != nil {
		return err
	}
	syncDir(filepath.Dir(s.logPath))
	return nil
}
