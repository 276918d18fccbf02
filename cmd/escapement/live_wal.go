package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
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
	syncer interface{ Sync() error } // the file, or a test's wrapper
}

func (r redactingFile) Sync() error { return r.syncer.Sync() }

func (lr *liveRun) walWrap() wal.Wrap {
	return func(f *os.File) wal.File {
		var w io.Writer = f
		var syncer interface{ Sync() error } = f
		if lr.a.wrapLog != nil {
			w = lr.a.wrapLog(f)
			if sy, ok := w.(interface{ Sync() error }); ok {
				syncer = sy
			}
		}
		return redactingFile{redactingWriter{w: w, redact: lr.redact}, syncer}
	}
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
//
// A log without a header line — its creation cut by a power cut: nothing
// was recorded in it — is set aside (headless says what became of it), and
// the session resumes alone.
func crashedLog(sessionPath string) (l *wal.Log, headless string, err error) {
	path := sessionPath + walSuffix
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

// stopped explains a driver that stopped because its write-ahead log
// failed (a full disk, an I/O error): the run could not record what it did
// next, so it did nothing more; what was recorded is kept, and a resume
// goes on from it once the cause is gone. Other errors pass unchanged.
func (lr *liveRun) stopped(runErr error) error {
	if !errors.Is(runErr, live.ErrWriteAhead) {
		return runErr
	}
	session := lr.session.path
	return fmt.Errorf("%w\nthe run stopped: it could not record what it would do next. %s and its log %s keep everything before that; once there is room, `escapement chat --resume %s` (or run --resume) continues", runErr, session, lr.walPath, session)
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
func (lr *liveRun) recoverRun(l *wal.Log, sessionPath string, traceOut *outputFile, model live.Model, tools live.Tools) error {
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
	l.Redact = lr.redact // the log's lines were written through it
	k, err := l.Rebuild(func(s live.Step) {
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

	root := k.Agent(kernel.Root)
	missing, resubmit, err := lr.reconcile(sessionPath, l, data, offset, mem.Bytes(), root.State() == fsm.Idle)
	if err != nil {
		return err
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
	if len(missing) > 0 {
		// The log first: the crashed process may have died before its
		// last records reached the disk.
		s.logSync = func() error { return syncLog(l.Name) }
		s.writeRaw(missing)
		s.sync()
		if err := s.failed(); err != nil {
			return err
		}
	}
	res, err := l.Resume(k, live.Config{Model: model, Tools: tools, Observer: lr.observe}, lr.walWrap())
	if err != nil {
		return err
	}
	lr.driver, lr.wal, lr.walF, lr.walPath = res.Driver, res.Writer, res.File, l.Name
	s.logSync = res.Writer.Sync
	if resubmit != "" {
		lr.scheduleResubmit(resubmit, root.Turn()+1)
		lr.say("%s: the last run's turn %d is started again from its prompt (%d events replayed)", sessionPath, root.Turn()+1, l.Steps())
		return nil
	}
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
