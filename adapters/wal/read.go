package wal

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// ErrNoHeader is wrapped by Read's error for a log without a whole header
// line: empty, or cut while its header was written. Nothing was recorded
// in it (the header is fsynced before the first record is written).
var ErrNoHeader = errors.New("not a write-ahead log: no header line")

// Log is a write-ahead log read back: its header and its step lines.
type Log struct {
	// Name names the log in errors (its path).
	Name   string
	Header trace.Header
	// steps holds each step line without its newline; lines[i] is on file
	// line i+2.
	steps [][]byte
	// Clean is true when an end line closes the log: the run ended
	// cleanly and there is nothing to recover.
	Clean bool
	// Torn is the length of a torn last line that was dropped (0: none):
	// the bytes of a record whose write the crash cut short. Its effects
	// never ran — the driver acts only after the write returned.
	Torn int
	// Size is the length of the log's whole lines: where appending goes
	// on (the torn bytes, if any, start there).
	Size int64
	// Redact, when set, is what the log's lines were written through (a
	// host's redactor of secrets). A replayed step that differs from its
	// logged line is then compared redacted: the log holds the redacted
	// form of what a secret reached (docs/durable.md).
	Redact func(string) string
}

// Steps is how many step records the log holds.
func (l *Log) Steps() int { return len(l.steps) }

// MaxLogBytes bounds the log Read accepts (the whole log is read into
// memory to be replayed).
const MaxLogBytes = 2 << 30

// Read reads the log at path (see Parse). It refuses anything but a regular
// file (a FIFO would block the open, a device never end).
func Read(path string) (*Log, error) {
	data, err := userfile.Read(path, MaxLogBytes)
	if err != nil {
		return nil, fmt.Errorf("read write-ahead log: %w", err)
	}
	return Parse(path, data)
}

// Parse splits a log into its header and step lines. A last line without
// its newline is torn — the crash cut its write — and is dropped (Torn
// says how many bytes); any other line that is not a header, step or end
// line, or a line after the end line, is an error naming name:line.
func Parse(name string, data []byte) (*Log, error) {
	l := &Log{Name: name}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		l.Torn = len(data) - (i + 1)
		data = data[:i+1]
	}
	l.Size = int64(len(data))
	if len(data) == 0 {
		return nil, fmt.Errorf("%s: %w (empty, or its first write was cut)", name, ErrNoHeader)
	}
	first, rest, _ := bytes.Cut(data, []byte("\n"))
	hdr, err := trace.ReadHeader(first)
	if err != nil {
		return nil, fmt.Errorf("%s:1: %w", name, err)
	}
	l.Header = hdr
	l.steps = make([][]byte, 0, bytes.Count(rest, []byte("\n")))
	for line := 2; len(rest) > 0; line++ {
		var ln []byte
		ln, rest, _ = bytes.Cut(rest, []byte("\n"))
		if l.Clean {
			return nil, fmt.Errorf("%s:%d: a record after the end line", name, line)
		}
		switch {
		case bytes.HasPrefix(ln, []byte(`{"type":"step",`)), isDelta(ln):
			l.steps = append(l.steps, ln)
		case bytes.HasPrefix(ln, []byte(`{"type":"end",`)):
			l.Clean = true
		case bytes.HasPrefix(ln, []byte(`{"type":"note",`)):
			// An annotation: no event.
		default:
			return nil, fmt.Errorf("%s:%d: not a header, step, delta, note or end record: %.80q", name, line, ln)
		}
	}
	return l, nil
}

// MismatchError says that a rebuilt kernel did not reproduce a logged step:
// the log was not written by this kernel (another build, a different
// configuration) or was changed.
type MismatchError struct {
	Name string
	// Step is the step number, Line its line in the file.
	Step, Line     int
	Logged, Replay string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s:%d: step %d: the rebuilt kernel's step differs from the log's (another build or a changed file?)\n  logged: %s\n  replay: %s",
		e.Name, e.Line, e.Step, e.Logged, e.Replay)
}

// Rebuild feeds the logged events, in order, to a fresh kernel configured
// by the header, and checks that every step reproduces its logged line byte
// for byte: the same target, states, effects and lifecycle records. It
// returns the kernel as the crashed process left it (its Now is the last
// event's time). A mismatch is a *MismatchError naming the step.
//
// observe, when not nil, sees every replayed step as the driver's Observer
// saw it (after its effects, with the same kernel and effects valid only
// during the call), so a host can bring what it derives from the steps — a
// transcript, a trace — up to where the log ends.
func (l *Log) Rebuild(observe func(ports.Step)) (*kernel.Kernel, error) {
	k, err := kernel.New(l.Header.Config())
	if err != nil {
		return nil, fmt.Errorf("%s:1: header: %w", l.Name, err)
	}
	enc := continueEncoder(0)
	for i, ln := range l.steps {
		lineNo := i + 2
		ev, err := l.event(ln, enc)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", l.Name, lineNo, err)
		}
		if ev.At < k.Now() {
			return nil, fmt.Errorf("%s:%d: step %d: time goes backwards (%v after %v)", l.Name, lineNo, i+1, ev.At, k.Now())
		}
		replay, err := step(k, enc, ev, observe)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: step %d: %w", l.Name, lineNo, i+1, err)
		}
		if got := bytes.TrimSuffix(replay, []byte("\n")); !l.same(ln, got) {
			return nil, &MismatchError{Name: l.Name, Step: i + 1, Line: lineNo, Logged: string(ln), Replay: string(got)}
		}
	}
	return k, nil
}

// event decodes the event of a step line or delta record.
func (l *Log) event(ln []byte, enc *encoder) (kernel.Event, error) {
	if !isDelta(ln) {
		return trace.StepEvent(ln)
	}
	return deltaEvent(ln, enc.next)
}

// same reports whether a replayed line reproduces the logged one: byte for
// byte, or once redacted as the logged one was.
func (l *Log) same(logged, replayed []byte) bool {
	if bytes.Equal(logged, replayed) {
		return true
	}
	return l.Redact != nil && l.Redact(string(replayed)) == string(logged)
}

// LastAt is the time of the last logged event: where a resumed clock goes
// on.
func (l *Log) LastAt() (time.Duration, error) {
	if len(l.steps) == 0 {
		return 0, nil
	}
	ln := l.steps[len(l.steps)-1]
	if isDelta(ln) {
		ev, err := deltaEvent(ln, func(kernel.OpID) uint32 { return 0 })
		return ev.At, err
	}
	ev, err := trace.StepEvent(ln)
	return ev.At, err
}

// step feeds ev to k and encodes the step as the log would, turning a
// kernel panic (a log that drives it somewhere no live run could) into an
// error.
func step(k *kernel.Kernel, enc *encoder, ev kernel.Event, observe func(ports.Step)) (line []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the kernel refused the event: %v", v)
		}
	}()
	target := k.Target(ev)
	before := k.AgentState(target)
	effects := k.Step(ev)
	s := ports.Step{Kernel: k, Event: ev, Target: target, Before: before, Effects: effects}
	if line, err = enc.step(s); err != nil {
		return nil, err
	}
	if observe != nil {
		observe(s)
	}
	return line, nil
}
