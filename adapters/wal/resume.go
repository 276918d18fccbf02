package wal

import (
	"errors"
	"fmt"
	"os"

	"github.com/escapement/escapement/kernel"
)

// ErrClean is returned by Reopen for a log whose run ended cleanly (it has
// an end line): there is nothing in flight to recover, and the log must not
// be appended to.
var ErrClean = errors.New("the write-ahead log ended cleanly: nothing to recover")

// Wrap turns the log's file into what records are written through (a
// redacting writer, say); nil writes to the file itself.
type Wrap func(*os.File) File

func (w Wrap) apply(f *os.File) File {
	if w == nil {
		return f
	}
	return w(f)
}

// CreateFile creates a new log file at path, never over an existing file,
// and fsyncs its directory so the file survives a power cut; the caller
// writes the header with NewWriter (through a wrapper if it wants one).
func CreateFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create write-ahead log: %w", err)
	}
	if err := syncDir(path); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("create write-ahead log %s: %w", path, err)
	}
	return f, nil
}

// Reopened is a crashed run's log ready to go on: the kernel rebuilt from
// it, and the log open for appending. The host starts a driver on Kernel
// with Writer.Record as its write-ahead hook (adapters/live.Resume, whose
// Run steps kernel.Recover first); adapters/session does all of it.
type Reopened struct {
	// Kernel is the tree as the crashed process left it.
	Kernel *kernel.Kernel
	// Writer appends to the log (the driver's WriteAhead); the host closes
	// it with the kernel's last time when the run ends cleanly.
	Writer *Writer
	// File is the log's file; the host closes it after Writer.Close.
	File *os.File
	// Log is what was read: Log.Torn > 0 when a torn last record was cut
	// off the file (its effects never ran).
	Log *Log
}

// Reopen recovers the run whose log is at path: it reads the log, rebuilds
// the kernel (checking every step against its record) and opens the log
// for appending (Log.Reopen). A log that ended cleanly is ErrClean.
func Reopen(path string, wrap Wrap) (*Reopened, error) {
	l, err := Read(path)
	if err != nil {
		return nil, err
	}
	if l.Clean {
		return nil, fmt.Errorf("%s: %w", path, ErrClean)
	}
	k, err := l.Rebuild(nil)
	if err != nil {
		return nil, err
	}
	w, f, err := l.Reopen(wrap)
	if err != nil {
		return nil, err
	}
	return &Reopened{Kernel: k, Writer: w, File: f, Log: l}, nil
}

// Reopen goes on with the log l (read from the file l.Name): it cuts a torn
// last record off the file (its write never completed, so nothing it
// caused happened), opens the file for appending, and returns the Writer
// that continues the log after its last step, and the file (the caller
// closes it). The driver resumed on the rebuilt kernel records through
// Writer.Record: its first step is kernel.Recover, at the last logged
// time. A log that ended cleanly is ErrClean.
func (l *Log) Reopen(wrap Wrap) (*Writer, *os.File, error) {
	if l.Clean {
		return nil, nil, fmt.Errorf("%s: %w", l.Name, ErrClean)
	}
	f, err := os.OpenFile(l.Name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open write-ahead log: %w", err)
	}
	if l.Torn > 0 {
		// The torn bytes are a record whose write the crash cut: appending
		// after them would glue the next record to them.
		err := f.Truncate(l.Size)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("write-ahead log %s: cut the torn last record: %w", l.Name, err)
		}
	}
	w := appendWriter(wrap.apply(f), l.Steps(), l.Header.Idempotent)
	w.name = l.Name
	return w, f, nil
}

// Rebuilt reads and rebuilds the log at path without resuming it: the
// kernel as the crashed process left it, for inspection and tests.
func Rebuilt(path string) (*kernel.Kernel, *Log, error) {
	l, err := Read(path)
	if err != nil {
		return nil, nil, err
	}
	k, err := l.Rebuild(nil)
	return k, l, err
}
