package userfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadRefusesWhatIsNotARegularFile: a FIFO nobody writes to is refused
// at once (os.ReadFile blocks in open forever), /dev/zero is refused before
// a byte is read (os.ReadFile reads it until memory runs out), and so is a
// directory; each error names the file.
func TestReadRefusesWhatIsNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "s.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, tc := range []struct{ path, kind string }{
		{fifo, "a FIFO"},
		{"/dev/zero", "a character device"},
		{dir, "a directory"},
	} {
		if _, err := os.Stat(tc.path); err != nil {
			continue
		}
		_, err := Read(tc.path, 1<<20)
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.kind) {
			t.Errorf("%s: %v; want ErrNotRegular naming the file and %q", tc.path, err, tc.kind)
		}
	}
}

// TestReadLimit: a file of exactly the limit is read; one byte more is
// refused, naming the file and the limit.
func TestReadLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(path, []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := Read(path, 5); err != nil || string(data) != "12345" {
		t.Fatalf("at the limit: %q, %v", data, err)
	}
	_, err := Read(path, 4)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "the limit is 4") {
		t.Fatalf("past the limit: %v", err)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing"), 5); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestReadLimitWhileReading: the limit holds while reading, not only at
// the stat: a regular file whose size says 0 (procfs) but that holds more
// than the limit is refused (a file that grows after the check is the
// same case).
func TestReadLimitWhileReading(t *testing.T) {
	const path = "/proc/self/status"
	st, err := os.Stat(path)
	if err != nil || !st.Mode().IsRegular() || st.Size() != 0 {
		t.Skip("needs procfs")
	}
	if _, err := Read(path, 4); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), path) {
		t.Fatalf("%s past the limit: %v", path, err)
	}
	if data, err := Read(path, 1<<20); err != nil || len(data) == 0 {
		t.Fatalf("%s within the limit: %d bytes, %v", path, len(data), err)
	}
}
