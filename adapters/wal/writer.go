package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// File is where a Writer writes: an *os.File, or a wrapper (one that
// redacts a secret, a test's fake disk). Each record is one Write call.
type File interface {
	io.Writer
	Sync() error
}

// Writer appends records to a log. Its methods run on the live driver's
// kernel goroutine (Record is the driver's Config.WriteAhead); it is not
// safe for concurrent use.
type Writer struct {
	f   File
	enc *encoder
	// name is the log's path, for errors ("" for a log without one).
	name string
	// idempotent names the tools whose start needs no fsync: a recovery
	// runs them again.
	idempotent map[string]bool
	err        error
	records    int
	syncs      int
	// dirty: a record was written since the last fsync.
	dirty  bool
	closed bool
}

// Create creates a new log at path — never over an existing file — and
// writes its header through wrap (nil: to the file itself), fsynced with
// the directory, so the log exists before the first event is recorded.
// The kernel configuration in hdr (trace.HeaderOf) is what a rebuild will
// use; hdr.Source is set to "live" when empty. The caller closes the file
// after Writer.Close.
func Create(path string, hdr trace.Header, wrap Wrap) (*Writer, *os.File, error) {
	f, err := CreateFile(path)
	if err != nil {
		return nil, nil, err
	}
	w, err := NewWriter(wrap.apply(f), hdr)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("write-ahead log %s: %w", path, bare(err))
	}
	w.name = path
	return w, f, nil
}

// NewWriter writes hdr to f as one write and fsyncs it.
func NewWriter(f File, hdr trace.Header) (*Writer, error) {
	if hdr.Source == "" {
		hdr.Source = "live"
	}
	enc, err := newEncoder(hdr)
	if err != nil {
		return nil, fmt.Errorf("write header: %w", err)
	}
	w := &Writer{f: f, enc: enc, idempotent: setOf(hdr.Idempotent)}
	if _, err := f.Write(enc.line.B); err != nil {
		return nil, fmt.Errorf("write header: %w", err)
	}
	if err := w.sync(); err != nil {
		return nil, err
	}
	return w, nil
}

// appendWriter continues a log whose first steps step lines f already
// holds (Reopen).
func appendWriter(f File, steps int, idempotent []string) *Writer {
	return &Writer{f: f, enc: continueEncoder(steps), idempotent: setOf(idempotent)}
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Record writes one step — its event and the effects it caused — as one
// line with one write (a delta record for a plain streamed chunk, delta.go),
// and fsyncs when the step needs it (the package doc says when). It is the
// live driver's Config.WriteAhead: the driver executes the effects only
// after Record returned nil. After the first failure every call returns
// that error.
func (w *Writer) Record(s ports.Step) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		w.err = w.fail("record after close", nil)
		return w.err
	}
	line, err := w.enc.step(s)
	if err == nil {
		_, err = w.f.Write(line)
	}
	if err != nil {
		w.err = w.fail(fmt.Sprintf("step %d", w.records+1), err)
		return w.err
	}
	w.records++
	w.dirty = true
	if w.needsSync(s) {
		return w.sync()
	}
	return nil
}

// needsSync is the fsync policy (see the package doc).
func (w *Writer) needsSync(s ports.Step) bool {
	switch s.Event.Kind {
	case kernel.EvSubmit, kernel.EvInterject, kernel.EvCancel, kernel.EvShutdown, kernel.EvRecover, kernel.EvCompact, kernel.EvDecision:
		return true
	}
	for i := range s.Effects {
		e := &s.Effects[i]
		switch {
		case e.Kind == kernel.EffStartLLM:
			return true
		case e.Kind == kernel.EffStartTool && !w.idempotent[e.Call.Name]:
			return true
		case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded && e.Life.Agent == kernel.Root:
			return true
		}
	}
	return false
}

func (w *Writer) sync() error {
	if err := w.f.Sync(); err != nil {
		w.err = w.fail(fmt.Sprintf("fsync after step %d", w.records), err)
		return w.err
	}
	w.syncs++
	w.dirty = false
	return nil
}

// Sync makes every record written so far durable (fsync), unless none was
// written since the last fsync. A host calls it before it writes anything
// derived from the records — a transcript — so that after a power cut
// that file can lag the log but never run ahead of it (docs/durable.md).
// It runs on the kernel goroutine, as Record does; after a failure it
// returns the writer's error.
func (w *Writer) Sync() error {
	if w.err != nil {
		return w.err
	}
	if !w.dirty {
		return nil
	}
	return w.sync()
}

// Close writes the end line — the mark of a run that ended cleanly, which
// Reopen refuses to recover — and fsyncs. at is the kernel's last event
// time. It does not close the file.
func (w *Writer) Close(at time.Duration) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return nil
	}
	w.closed = true
	_, err := w.enc.tw.Close(at)
	if err == nil {
		_, err = w.f.Write(w.enc.line.B)
	}
	if err != nil {
		w.err = w.fail("end line", err)
		return w.err
	}
	return w.sync()
}

// fail is the error for what failed (err may be nil), naming the log. An
// *fs.PathError's own path is left out: it is the log's.
func (w *Writer) fail(what string, err error) error {
	name := "write-ahead log"
	if w.name != "" {
		name += " " + w.name
	}
	if err == nil {
		return fmt.Errorf("%s: %s", name, what)
	}
	return fmt.Errorf("%s: %s: %w", name, what, bare(err))
}

// bare is err without the *fs.PathError around it, whose path and
// operation an error naming the log would repeat.
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && pe == err {
		return pe.Err
	}
	return err
}

// Records is how many steps this writer recorded; Syncs how many fsyncs it
// made (the header's included).
func (w *Writer) Records() int { return w.records }

// Syncs is how many times the writer fsynced.
func (w *Writer) Syncs() int { return w.syncs }

// syncDir fsyncs the directory holding path, so a file just created there
// survives a power cut.
func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory: %w", err)
	}
	return nil
}
