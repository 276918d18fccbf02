package wal

import (
	"errors"
	"fmt"
	"os"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/kernel"
)

// ErrClean is returned by Resume for a log whose run ended cleanly (it has
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

// Resumed is a recovery ready to run: a driver on the rebuilt kernel whose
// records go on in the same log.
type Resumed struct {
	// Driver runs the rebuilt tree; its Run steps kernel.Recover first.
	Driver *live.Driver
	// Writer appends to the log (the driver's WriteAhead); the host closes
	// it with the kernel's last time when the run ends cleanly.
	Writer *Writer
	// File is the log's file; the host closes it after Writer.Close.
	File *os.File
	// Log is what was read: Log.Torn > 0 when a torn last record was cut
	// off the file (its effects never ran).
	Log *Log
}

// Resume recovers the run whose log is at path: it reads the log, rebuilds
// the kernel (checking every step against its record) and resumes it
// (Log.Resume). A log that ended cleanly is ErrClean.
func Resume(path string, cfg live.Config, wrap Wrap) (*Resumed, error) {
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
	return l.Resume(k, cfg, wrap)
}

// Resume goes on with the run of the log l (read from the file l.Name),
// whose rebuilt kernel is k: it cuts a torn last record off the file (its
// write never completed, so nothing it caused happened), opens the file
// for appending, and returns a driver on k whose WriteAhead is the log's
// Writer. Running the driver steps kernel.Recover — resolving every op the
// crashed process had in flight — at the last logged time, and goes on
// from there. cfg.Kernel is ignored (the header's configuration is k's)
// and cfg.WriteAhead must be nil. A log that ended cleanly is ErrClean.
func (l *Log) Resume(k *kernel.Kernel, cfg live.Config, wrap Wrap) (*Resumed, error) {
	if cfg.WriteAhead != nil {
		return nil, errors.New("wal: Resume: cfg.WriteAhead is set; the log's writer is the hook")
	}
	if l.Clean {
		return nil, fmt.Errorf("%s: %w", l.Name, ErrClean)
	}
	f, err := os.OpenFile(l.Name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("open write-ahead log: %w", err)
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
			return nil, fmt.Errorf("write-ahead log %s: cut the torn last record: %w", l.Name, err)
		}
	}
	w := appendWriter(wrap.apply(f), l.Steps(), l.Header.Idempotent)
	w.name = l.Name
	cfg.WriteAhead = w.Record
	d, err := live.Resume(cfg, k)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Resumed{Driver: d, Writer: w, File: f, Log: l}, nil
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
