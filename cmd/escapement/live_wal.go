package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/wal"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// A live run whose session is a file keeps a write-ahead log beside it,
// FILE.wal (adapters/wal, docs/durable.md): every event the kernel is fed,
// written before anything it caused happens. A run that ends cleanly —
// the driver stopped, the session file closed without error — marks the
// log ended and removes it: the session file then holds everything. A log
// found beside the file by --resume is the record of a process that died
// (kill -9, a crash, a power cut, a second Ctrl-C): the resume rebuilds
// the tree from it, brings the session file up to where the log ends, and
// continues the unfinished turn (recoverRun).

// walSuffix names a session's write-ahead log: FILE.wal.
const walSuffix = ".wal"

// sessionOffsetOption is the log header's record of the session file's
// length when the log began: the records after it are the ones the logged
// run wrote, and a recovery compares them with what the log replays.
const sessionOffsetOption = "session_offset"

// buildName names this binary in trace and log headers.
func buildName() string { return "escapement " + runtime.Version() }

// redactingFile is the log's file seen through the redactor (each record
// is one write, so a secret is never split across two).
type redactingFile struct {
	redactingWriter
	f *os.File
}

func (r redactingFile) Sync() error { return r.f.Sync() }

func (lr *liveRun) walWrap() wal.Wrap {
	return func(f *os.File) wal.File { return redactingFile{redactingWriter{w: f, redact: lr.redact}, f} }
}

// keepsLog reports whether a session at path gets a write-ahead log: a
// regular file (or one about to be created), not /dev/null.
func keepsLog(sessionPath string) bool {
	st, err := os.Stat(sessionPath)
	return err != nil || st.Mode().IsRegular()
}

// crashedLog returns the write-ahead log beside the session at path when a
// process died while writing it; nil when there is none, or when the run it
// recorded ended cleanly (that log is removed: the session file holds
// everything it did).
func crashedLog(sessionPath string) (*wal.Log, error) {
	path := sessionPath + walSuffix
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	l, err := wal.Read(path)
	if err != nil {
		return nil, fmt.Errorf("%w\n(%s is the write-ahead log of %s; move it away to resume from the session file alone, without the turn it recorded)", err, path, sessionPath)
	}
	if l.Clean {
		if err := os.Remove(path); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return l, nil
}

// startLog creates the write-ahead log of a run that starts from its session
// file (a new session, or one resumed cleanly). A log left at that name by
// a session that is gone (its file deleted and the name reused) is kept
// aside as FILE.wal.stale-<time>, never overwritten.
func (lr *liveRun) startLog(sessionPath string, kcfg kernel.Config) error {
	if !keepsLog(sessionPath) {
		return nil
	}
	path := sessionPath + walSuffix
	if _, err := os.Lstat(path); err == nil {
		aside := path + ".stale-" + time.Now().UTC().Format("20060102T150405Z")
		if err := os.Rename(path, aside); err != nil {
			return err
		}
		lr.say("%s was left by an earlier session of that name; kept as %s", path, aside)
	}
	offset, err := lr.session.size()
	if err != nil {
		return err
	}
	hdr := trace.HeaderOf(kcfg)
	hdr.Source, hdr.Name, hdr.Build = "live", sessionPath, buildName()
	hdr.Options = map[string]string{sessionOffsetOption: strconv.FormatInt(offset, 10)}
	lr.wal, lr.walF, err = wal.Create(path, hdr, lr.walWrap())
	lr.walPath = path
	return err
}

// closeLog ends the log when the run ended cleanly: the end line, then the
// file is removed (the session file holds everything). Otherwise the log
// stays for the next --resume, which recovers from it.
func (lr *liveRun) closeLog(clean bool) error {
	if lr.wal == nil {
		return nil
	}
	var err error
	if clean {
		err = lr.wal.Close(lr.driver.Kernel().Now())
	}
	if cerr := lr.walF.Close(); err == nil {
		err = cerr
	}
	if err != nil || !clean {
		return err
	}
	if err := os.Remove(lr.walPath); err != nil {
		return err
	}
	syncDir(filepath.Dir(lr.walPath))
	return nil
}

// nopSyncer is the catch-up's in-memory session: nothing to sync.
type nopSyncer struct{}

func (nopSyncer) Sync() error { return nil }

// recoverRun sets lr up to continue the run the crashed process logged in
// l. The log is replayed into a fresh kernel (every step checked against
// its record) while the session records the run would have written are
// derived from the replayed steps, exactly as the live observer writes
// them; the session file must hold a prefix of them after the offset the
// log recorded (it is written after the log, so it can only lag), and the
// rest is appended. A trace, if asked for, gets the log's header and every
// replayed step, so it replays from its own header. Then the driver runs
// on the rebuilt kernel: its first step is kernel.Recover.
func (lr *liveRun) recoverRun(l *wal.Log, sessionPath string, traceOut *outputFile, model live.Model) error {
	offset, err := strconv.ParseInt(l.Header.Options[sessionOffsetOption], 10, 64)
	if err != nil || offset < 0 {
		return fmt.Errorf("%s:1: the header does not say where the session file stood when the log began", l.Name)
	}
	data, err := userfile.Read(sessionPath, maxSessionBytes)
	if err != nil {
		return err
	}
	if int64(len(data)) < offset || !isSessionData(data) {
		return fmt.Errorf("%s is not the session file its write-ahead log %s was written beside (it is shorter than when the log began, or not a session); move %s away to resume from the session file alone", sessionPath, l.Name, l.Name)
	}

	var mem bytes.Buffer
	lr.session = &sessionWriter{path: sessionPath, w: &mem, syncer: nopSyncer{}, redact: lr.redact}
	if len(l.Header.History) > 0 {
		// As for any resumed session: the seeded history is in the file.
		k0, err := kernel.New(l.Header.Config())
		if err != nil {
			return fmt.Errorf("%s:1: %w", l.Name, err)
		}
		lr.written = len(k0.Agent(kernel.Root).History())
	}
	var traced bytes.Buffer
	var tw *trace.Writer
	if traceOut != nil {
		hdr := l.Header
		hdr.Name, hdr.Build = sessionPath, buildName()
		tw = trace.NewWriter(redactingWriter{w: &traced, redact: lr.redact}, hdr)
	}
	k, err := l.Rebuild(func(s live.Step) {
		lr.otelReplay(s)
		lr.persist(s)
		if tw != nil {
			tw.Step(s.Kernel, s.Event, s.Target, s.Before, s.Effects)
			tw.Flush()
		}
	})
	if err != nil {
		return err
	}
	if err := lr.session.failed(); err != nil {
		return err
	}

	want, tail := mem.Bytes(), data[offset:]
	if !bytes.HasPrefix(want, tail) {
		whole := tail[:bytes.LastIndexByte(tail, '\n')+1]
		if len(whole) == len(tail) || !bytes.HasPrefix(want, whole) {
			n := 0
			for n < len(want) && n < len(tail) && want[n] == tail[n] {
				n++
			}
			return fmt.Errorf("%s and its write-ahead log %s disagree from byte %d of the session file on; move %s away to resume from the session file alone (the unfinished turn is then set aside)", sessionPath, l.Name, offset+int64(n), l.Name)
		}
		// A torn last record (only a power cut tears one): cut it off,
		// keeping the original bytes aside as a plain resume does.
		backup, err := setAsideUnfinished(sessionPath, &loadedSession{data: data, keep: offset + int64(len(whole))}, time.Now())
		if err != nil {
			return err
		}
		lr.say("%s: dropped a torn last line; the original file is kept as %s", sessionPath, backup)
		tail = whole
	}
	if traceOut != nil {
		if err := traceOut.commit(); err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		if _, err := traceOut.f.Write(traced.Bytes()); err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		lr.traceF = traceOut.f
		lr.trace = trace.ContinueWriter(redactingWriter{w: traceOut.f, redact: lr.redact}, l.Steps())
	}
	s, err := appendSession(sessionPath, lr.redact, lr.a.wrapSession)
	if err != nil {
		return err
	}
	lr.session = s
	if missing := want[len(tail):]; len(missing) > 0 {
		s.writeRaw(missing)
		s.sync()
		if err := s.failed(); err != nil {
			return err
		}
	}
	res, err := l.Resume(k, live.Config{Model: model, Tools: lr.box, Observer: lr.observe}, lr.walWrap())
	if err != nil {
		return err
	}
	lr.driver, lr.wal, lr.walF, lr.walPath = res.Driver, res.Writer, res.File, l.Name
	root := k.Agent(kernel.Root)
	if root.State() != fsm.Idle {
		lr.state.busy, lr.state.turn = true, root.Turn()
		lr.say("%s: the last run stopped in the middle of turn %d; continuing it from %s (%d events replayed)", sessionPath, root.Turn(), l.Name, l.Steps())
	} else {
		lr.say("%s: the last run stopped between turns; its log %s is replayed (%d events) and nothing was lost", sessionPath, l.Name, l.Steps())
	}
	return nil
}

// isSessionData reports whether data starts with a session header line.
func isSessionData(data []byte) bool {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	return bytes.HasPrefix(line, []byte(`{"type":"session"`))
}
