package userfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// Replacement is an output file written whole at the end of a run (a
// run's last answer, `-o FILE`). It is prepared — a temporary file beside
// it, 0600 — before anything runs, so a path that cannot be written is
// refused at once, and put in place by Commit in one rename. A file
// already at the path is never lost: unless it holds exactly what is
// written, it is kept as PATH.~N~ (the first N free, as GNU cp
// --backup=numbered names them).
type Replacement struct {
	path string
	tmp  *os.File
}

// CreateReplacement prepares a Replacement of path: a new file, or one
// that replaces a file (or a symbolic link) there. A directory, or any
// other kind of file (a FIFO, a device), is refused.
func CreateReplacement(path string) (*Replacement, error) {
	if st, err := os.Lstat(path); err == nil && !st.Mode().IsRegular() && st.Mode()&fs.ModeSymlink == 0 {
		return nil, fmt.Errorf("%s is %s; name a regular file", path, kind(st.Mode()))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	return &Replacement{path: path, tmp: tmp}, nil
}

// Commit writes data and puts it at the path. kept names where the file
// that was there went ("" when there was none, or it held data already).
func (r *Replacement) Commit(data []byte) (kept string, err error) {
	defer os.Remove(r.tmp.Name()) // a no-op once renamed
	if _, err := r.tmp.Write(data); err != nil {
		r.tmp.Close()
		return "", fmt.Errorf("%s: %w", r.path, err)
	}
	if err := errors.Join(r.tmp.Sync(), r.tmp.Close()); err != nil {
		return "", fmt.Errorf("%s: %w", r.path, err)
	}
	if old, err := os.ReadFile(r.path); err == nil && bytes.Equal(old, data) {
		return "", nil
	}
	if _, err := os.Lstat(r.path); err == nil {
		if kept, err = keep(r.path); err != nil {
			return "", err
		}
	}
	if err := os.Rename(r.tmp.Name(), r.path); err != nil {
		return kept, fmt.Errorf("%s: %w", r.path, err)
	}
	return kept, nil
}

// Discard removes the temporary file; the path is left as it was.
func (r *Replacement) Discard() {
	r.tmp.Close()
	os.Remove(r.tmp.Name())
}

// keep gives the file at path a second name, PATH.~N~, the first N free,
// so the rename that replaces it loses nothing (a hard link where the
// file system allows it, so the path is never missing; else a rename).
func keep(path string) (string, error) {
	for n := 1; ; n++ {
		backup := path + ".~" + strconv.Itoa(n) + "~"
		err := os.Link(path, backup)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			return backup, nil
		}
		if _, serr := os.Lstat(backup); serr == nil {
			continue
		}
		if rerr := os.Rename(path, backup); rerr != nil {
			return "", fmt.Errorf("%s exists and could not be kept as %s: %w", path, backup, errors.Join(err, rerr))
		}
		return backup, nil
	}
}
