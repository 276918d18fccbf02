package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCreateRefusesAFileNoLongerEmpty: a file that gained content between
// the check that it is new and its creation (another process wrote it) is
// refused with the reason, and what it holds is kept byte for byte.
func TestCreateRefusesAFileNoLongerEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	const held = "someone else's line\n"
	if err := os.WriteFile(path, []byte(held), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := createFile(path, "m", func(s string) string { return s }, nil)
	if err == nil || !strings.Contains(err.Error(), "session "+path+": the file is no longer empty") {
		t.Fatalf("createFile over a non-empty file: %v, %v; want it refused as no longer empty", w, err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != held {
		t.Fatalf("the file now holds %q (%v), want %q kept", b, err, held)
	}
}
