package main

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

// maxSessionBytes bounds a session file --resume reads (the whole history
// is sent with every request: a session near this size is long past any
// model's context).
const maxSessionBytes = 256 << 20

// loadedSession is what resuming found.
type loadedSession struct {
	history []kernel.Message
	turns   int    // turn_end records
	last    uint64 // the highest turn number recorded: the kernel continues after it
	// The unfinished turn: messages after the last turn_end (the process
	// ended in the middle of a turn), and a torn last line (a write cut
	// short: only a power loss or a full disk can tear one).
	discarded int
	pending   []kernel.Message // those messages
	torn      bool
	// keep is the byte length of the file up to the last turn_end (or the
	// header), size the length read, data the bytes read.
	keep, size int64
	data       []byte
}

// unfinished reports whether the file holds more than its complete turns:
// resuming must cut that off (after keeping the original, see
// setAsideUnfinished), or the next turn would absorb it.
func (ls *loadedSession) unfinished() bool { return ls.discarded > 0 || ls.torn }

// loadSession reads a session file for --resume. Every error names
// file:line. A last line without its newline is a complete record when it
// parses (a record is one JSON object: no proper prefix of one parses), and
// torn otherwise.
func loadSession(path string) (*loadedSession, error) {
	data, err := userfile.Read(path, maxSessionBytes)
	if err != nil {
		return nil, err
	}
	ls := &loadedSession{size: int64(len(data)), data: data}
	var (
		pending   []kernel.Message
		lines     []int // line of each committed message, for errors
		pendLines []int
		offset    int64
		headerOK  bool
		lastLine  int
	)
	rest := data
	for n := 1; len(rest) > 0; n++ {
		line := rest
		i := bytes.IndexByte(rest, '\n')
		if i >= 0 {
			line, rest = rest[:i], rest[i+1:]
			offset += int64(i + 1)
		} else {
			rest = nil
			offset += int64(len(line))
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		lastLine = n
		var r sessionRecord
		if err := json.Unmarshal(line, &r); err != nil {
			if i < 0 && headerOK {
				ls.torn = true // the last write was cut short
				break
			}
			if !headerOK {
				return nil, fmt.Errorf("%s:%d: not an escapement session file (no session header): %v", path, n, err)
			}
			return nil, fmt.Errorf("%s:%d: not a session record: %v", path, n, err)
		}
		if !headerOK && r.Type != "session" {
			return nil, fmt.Errorf("%s:%d: not an escapement session file (the first record is %q, not the session header)", path, n, r.Type)
		}
		switch r.Type {
		case "session":
			if headerOK {
				return nil, fmt.Errorf("%s:%d: a second session header", path, n)
			}
			if r.Format != sessionFormat {
				return nil, fmt.Errorf("%s:%d: session format %d, this build reads %d", path, n, r.Format, sessionFormat)
			}
			headerOK = true
			ls.keep = offset
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
			ls.last = max(ls.last, r.Turn)
			ls.keep = offset
		default:
			return nil, fmt.Errorf("%s:%d: unknown record type %q", path, n, r.Type)
		}
	}
	if !headerOK {
		return nil, fmt.Errorf("%s:1: not an escapement session file (empty)", path)
	}
	ls.discarded, ls.pending = len(pending), pending
	ls.last = max(ls.last, uint64(ls.turns))
	if err := kernel.ValidateTranscript(ls.history, false); err != nil {
		var te *kernel.TranscriptError
		if !errors.As(err, &te) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		line := lastLine
		switch {
		case te.Index < len(lines):
			line = lines[te.Index]
		default:
			// The history ends in calls without results: name the
			// assistant message that made them.
			for j := len(ls.history) - 1; j >= 0; j-- {
				if len(ls.history[j].ToolCalls) > 0 {
					line = lines[j]
					break
				}
			}
		}
		return nil, fmt.Errorf("%s:%d: %s", path, line, te.Detail)
	}
	return ls, nil
}

// setAsideUnfinished cuts the unfinished turn off the session file without
// ever changing the original bytes: the original file stays whole under
// FILE.torn-<UTC time> (a hard link, or a copy where links fail), and the
// complete turns are written to a new file that replaces FILE by rename.
// A crash at any point leaves FILE either as it was or as it is meant to
// be, and the original bytes under the backup name. It returns the
// backup's path.
func setAsideUnfinished(path string, ls *loadedSession, now time.Time) (string, error) {
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
