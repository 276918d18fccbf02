package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/kernel"
)

// MaxBytes bounds a session file Load reads (the whole history is sent
// with every request: a session near this size is long past any model's
// context).
const MaxBytes = 256 << 20

// Loaded is what a session file holds.
type Loaded struct {
	// History is the root's messages of the complete turns.
	History []kernel.Message
	// Turns counts the turn_end records.
	Turns int
	// Last is the highest turn number recorded: the kernel continues after
	// it (kernel.Config.Turns).
	Last uint64
	// Grants are the session grants the complete turns made, in the
	// order they were made (kernel.Config.Grants).
	Grants []kernel.Grant
	// Pending are the messages after the last turn_end: a turn the process
	// ended in the middle of. Torn is a torn last line (a write cut short:
	// only a power loss or a full disk can tear one).
	Pending []kernel.Message
	Torn    bool
	// PendingCompaction: a compaction record follows the last turn_end
	// (the unfinished turn compacted before it ended).
	PendingCompaction bool
	// Usage sums the usage the turn_end records carry: the session's
	// total so far (Requests counts the requests, Unreported those that
	// reported none; turns recorded before usage was kept add nothing).
	Usage kernel.Usage
	// keep is the byte length of the file up to the last turn_end (or the
	// header), data the bytes read.
	keep int64
	data []byte
}

// Unfinished reports whether the file holds more than its complete turns:
// resuming must cut that off (after keeping the original, see
// setAsideUnfinished), or the next turn would absorb it.
func (ls *Loaded) Unfinished() bool { return len(ls.Pending) > 0 || ls.PendingCompaction || ls.Torn }

// Load reads a session file. Every error names file:line. A last line
// without its newline is a complete record when it parses (a record is
// one JSON object: no proper prefix of one parses), and torn otherwise.
func Load(path string) (*Loaded, error) {
	data, err := userfile.Read(path, MaxBytes)
	if err != nil {
		return nil, err
	}
	r := &reader{path: path, ls: &Loaded{data: data}}
	for ln := range fileLines(data) {
		if err := r.line(ln); err != nil {
			return nil, err
		}
		if r.ls.Torn {
			break
		}
	}
	if !r.headerOK {
		return nil, fmt.Errorf("%s:1: not an escapement session file (empty)", path)
	}
	ls := r.ls
	ls.Pending, ls.PendingCompaction = r.pendMsgs, r.compacted
	ls.Last = max(ls.Last, uint64(ls.Turns))
	if err := r.validate(); err != nil {
		return nil, err
	}
	return ls, nil
}

// fileLine is one line of a session file: its number (from 1), its text
// without the newline, the file's offset after it, and whether it ended
// with a newline.
type fileLine struct {
	n      int
	text   []byte
	end    int64
	closed bool
}

// fileLines yields the lines of data that hold more than blanks.
func fileLines(data []byte) func(yield func(fileLine) bool) {
	return func(yield func(fileLine) bool) {
		var offset int64
		rest := data
		for n := 1; len(rest) > 0; n++ {
			line, after, closed := bytes.Cut(rest, []byte{'\n'})
			offset += int64(len(rest) - len(after))
			rest = after
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if !yield(fileLine{n: n, text: line, end: offset, closed: closed}) {
				return
			}
		}
	}
}

// reader is Load's state while it reads the records in order.
type reader struct {
	path     string
	ls       *Loaded
	headerOK bool
	// pending is the root's history since the last turn_end: its messages
	// after that turn's history, or, once a compaction record came
	// (compacted), the whole history from that record on; pendMsgs the
	// message records among them.
	pending   []kernel.Message
	pendLines []int
	pendMsgs  []kernel.Message
	compacted bool
	grants    []kernel.Grant // of the turn not ended yet
	lines     []int          // the line of each message of ls.History, for errors
	lastLine  int
}

// line takes one record; a record that does not parse on the last line
// (without its newline) marks the file torn.
func (r *reader) line(ln fileLine) error {
	r.lastLine = ln.n
	var rec Record
	if err := json.Unmarshal(ln.text, &rec); err != nil {
		switch {
		case !ln.closed && r.headerOK:
			r.ls.Torn = true // the last write was cut short
			return nil
		case !r.headerOK:
			return fmt.Errorf("%s:%d: not an escapement session file (no session header): %v", r.path, ln.n, err)
		}
		return fmt.Errorf("%s:%d: not a session record: %v", r.path, ln.n, err)
	}
	if !r.headerOK && rec.Type != "session" {
		return fmt.Errorf("%s:%d: not an escapement session file (the first record is %q, not the session header)", r.path, ln.n, rec.Type)
	}
	return r.record(ln, rec)
}

// record applies one parsed record.
func (r *reader) record(ln fileLine, rec Record) error {
	switch rec.Type {
	case "session":
		if r.headerOK {
			return fmt.Errorf("%s:%d: a second session header", r.path, ln.n)
		}
		if rec.Format != Format {
			return fmt.Errorf("%s:%d: session format %d, this build reads %d", r.path, ln.n, rec.Format, Format)
		}
		r.headerOK = true
		r.ls.keep = ln.end
	case "message":
		if rec.Message == nil {
			return fmt.Errorf("%s:%d: message record without a message", r.path, ln.n)
		}
		r.pending = append(r.pending, *rec.Message)
		r.pendLines = append(r.pendLines, ln.n)
		r.pendMsgs = append(r.pendMsgs, *rec.Message)
	case "compaction":
		// The history from here on is the compacted one; the messages it
		// replaced stay above, for audit.
		r.pending, r.pendLines, r.compacted = append([]kernel.Message(nil), rec.History...), nil, true
		for range rec.History {
			r.pendLines = append(r.pendLines, ln.n)
		}
	case "grant":
		if rec.Grant == nil || rec.Grant.Tool == "" {
			return fmt.Errorf("%s:%d: grant record without a tool", r.path, ln.n)
		}
		r.grants = append(r.grants, *rec.Grant)
	case "turn_end":
		r.turnEnd(ln, rec)
	default:
		return fmt.Errorf("%s:%d: unknown record type %q", r.path, ln.n, rec.Type)
	}
	return nil
}

// turnEnd takes a turn_end record: the history so far is complete.
func (r *reader) turnEnd(ln fileLine, rec Record) {
	r.ls.Grants = append(r.ls.Grants, r.grants...)
	r.grants = nil
	if r.compacted {
		r.ls.History, r.lines = nil, nil
	}
	r.ls.History = append(r.ls.History, r.pending...)
	r.lines = append(r.lines, r.pendLines...)
	r.pending, r.pendLines, r.pendMsgs, r.compacted = nil, nil, nil, false
	r.ls.Turns++
	r.ls.Last = max(r.ls.Last, rec.Turn)
	r.ls.keep = ln.end
	if u := rec.Usage; u != nil {
		t := &r.ls.Usage
		t.PromptTokens += u.PromptTokens
		t.CompletionTokens += u.CompletionTokens
		t.CachedTokens += u.CachedTokens
		t.ReasoningTokens += u.ReasoningTokens
		t.Requests += u.Requests
		t.Unreported += u.Unreported
	}
}

// validate checks the complete turns as a transcript the kernel can resume,
// naming the line of the message at fault.
func (r *reader) validate() error {
	err := kernel.ValidateTranscript(r.ls.History, false)
	if err == nil {
		return nil
	}
	var te *kernel.TranscriptError
	if !errors.As(err, &te) {
		return fmt.Errorf("%s: %w", r.path, err)
	}
	return fmt.Errorf("%s:%d: %s", r.path, r.faultLine(te.Index), te.Detail)
}

// faultLine is the line of the message at index i of the history; past its
// end (the history ends in calls without results) the line of the
// assistant message that made them.
func (r *reader) faultLine(i int) int {
	if i < len(r.lines) {
		return r.lines[i]
	}
	h := r.ls.History
	for j := len(h) - 1; j >= 0; j-- {
		if len(h[j].ToolCalls) > 0 {
			return r.lines[j]
		}
	}
	return r.lastLine
}

// setAsideUnfinished cuts the unfinished turn off the session file without
// ever changing the original bytes: the original file stays whole under
// FILE.torn-<UTC time> (a hard link, or a copy where links fail), and the
// complete turns are written to a new file that replaces FILE by rename.
// A crash at any point leaves FILE either as it was or as it is meant to
// be, and the original bytes under the backup name. It returns the
// backup's path.
func setAsideUnfinished(path string, ls *Loaded, now time.Time) (string, error) {
	backup, err := keepOriginal(path, ls.data, now)
	if err != nil {
		return "", fmt.Errorf("keep the original of %s: %w", path, err)
	}
	perm := fs.FileMode(0o600)
	if st, err := os.Stat(path); err == nil {
		perm = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".resume-*")
	if err != nil {
		return backup, fmt.Errorf("rewrite %s: %w", path, err)
	}
	_, err = tmp.Write(ls.data[:ls.keep])
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return backup, fmt.Errorf("rewrite %s: %w", path, err)
	}
	syncDir(filepath.Dir(path))
	return backup, nil
}

// keepOriginal makes FILE.torn-<time> hold data, the original bytes of
// path: a hard link to the same file when the file system allows one (no
// copy, and exactly the bytes on disk), else a new file written and synced.
func keepOriginal(path string, data []byte, now time.Time) (string, error) {
	base := path + ".torn-" + now.UTC().Format("20060102T150405Z")
	for i := 1; ; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		err := os.Link(path, name)
		if err == nil {
			syncDir(filepath.Dir(path))
			return name, nil
		}
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = io.Copy(f, bytes.NewReader(data))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
			return "", err
		}
		syncDir(filepath.Dir(path))
		return name, nil
	}
}

// syncDir makes a rename or link in dir durable (best effort: not every
// file system syncs directories).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
