package userfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// startsWith reports whether the file at path starts with prefix.
func startsWith(path, prefix string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, len(prefix))
	_, err = io.ReadFull(f, b)
	return err == nil && string(b) == prefix
}

// Output is an output file the user named (a trace), opened before
// anything is written and emptied by the first write, so a run that fails
// before it writes leaves an older file as it was.
type Output struct {
	path      string
	f         *os.File
	created   bool
	committed bool
}

// OpenOutput opens path for writing without changing it. Non-blocking, so
// a FIFO without a reader is an error rather than a hang. An existing
// regular file is only ever replaced when it starts with prefix (an older
// output of the same kind, which kind names: "an escapement trace"):
// anything else (a session file named by mistake, notes) is the user's
// data and refused.
func OpenOutput(path, kind, prefix string) (*Output, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, fmt.Errorf("%s is a directory; name a file", path)
	} else if err == nil && st.Mode().IsRegular() && st.Size() > 0 && !startsWith(path, prefix) {
		return nil, fmt.Errorf("%s exists and is not %s; name a new file (or remove it)", path, kind)
	}
	o := &Output{path: path}
	// 0600: a trace holds what the session holds (docs/durable.md).
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NONBLOCK, 0o600)
	if err == nil {
		o.f, o.created = f, true
		return o, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if o.f, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err != nil {
		return nil, err
	}
	return o, nil
}

// Write empties an existing regular file before the first write (the
// trace replaces it), then writes.
func (o *Output) Write(p []byte) (int, error) {
	if !o.committed {
		o.committed = true
		if st, err := o.f.Stat(); err != nil {
			return 0, err
		} else if st.Mode().IsRegular() && !o.created {
			if err := o.f.Truncate(0); err != nil {
				return 0, err
			}
		}
	}
	return o.f.Write(p)
}

// Close syncs and closes the file.
func (o *Output) Close() error {
	err := o.f.Sync()
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		err = nil // a FIFO, a device
	}
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Discard closes the file and removes it if OpenOutput created it.
func (o *Output) Discard() {
	o.f.Close()
	if o.created {
		os.Remove(o.path)
	}
}

// WriteNew writes data as dir/name+ext, or name-2+ext, name-3+ext, … when
// that exists, and returns the path written: an earlier file (a finding of
// an earlier run) is never overwritten.
func WriteNew(dir, name, ext string, data []byte) (string, error) {
	for n := 1; ; n++ {
		p := filepath.Join(dir, name+ext)
		if n > 1 {
			p = filepath.Join(dir, fmt.Sprintf("%s-%d%s", name, n, ext))
		}
		fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = fh.Write(data)
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", fmt.Errorf("write %s: %w", p, err)
		}
		return p, nil
	}
}
