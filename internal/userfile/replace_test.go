package userfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReplacementKeepsWhatWasThere: a new file is created 0600; a file
// that holds other data is kept as PATH.~1~ (then ~2~) before it is
// replaced; one that holds the same data is left alone; a discarded
// replacement changes nothing; a directory or a FIFO is refused at once.
func TestReplacementKeepsWhatWasThere(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "answer.txt")
	commit := func(data string) string {
		t.Helper()
		r, err := CreateReplacement(path)
		if err != nil {
			t.Fatal(err)
		}
		kept, err := r.Commit([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		return kept
	}
	if kept := commit("one"); kept != "" {
		t.Errorf("a new file kept %q", kept)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("new file: %v %v", st.Mode(), err)
	}
	if kept := commit("one"); kept != "" {
		t.Errorf("the same data kept %q", kept)
	}
	if kept := commit("two"); kept != path+".~1~" {
		t.Errorf("kept %q", kept)
	}
	if kept := commit("three"); kept != path+".~2~" {
		t.Errorf("kept %q", kept)
	}
	for name, want := range map[string]string{path: "three", path + ".~1~": "one", path + ".~2~": "two"} {
		if b, err := os.ReadFile(name); err != nil || string(b) != want {
			t.Errorf("%s holds %q %v, want %q", name, b, err, want)
		}
	}
	r, err := CreateReplacement(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Discard()
	if b, _ := os.ReadFile(path); string(b) != "three" {
		t.Errorf("a discarded replacement changed the file: %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("%d files left, want 3 (no temporary file)", len(entries))
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{dir, fifo, filepath.Join(dir, "missing", "a.txt")} {
		if _, err := CreateReplacement(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
