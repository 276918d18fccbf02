package userfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputReplacesOnlyItsKind: an existing file of another kind is
// refused; one of its kind is left as it was until the first write, which
// replaces it; a file OpenOutput created is removed by Discard.
func TestOutputReplacesOnlyItsKind(t *testing.T) {
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, []byte("mine"), 0o600)
	if _, err := OpenOutput(notes, "a trace", "{trace"); err == nil || !strings.Contains(err.Error(), "is not a trace") {
		t.Fatalf("a file of another kind: %v, want a refusal", err)
	}
	old := filepath.Join(dir, "old.jsonl")
	os.WriteFile(old, []byte("{trace old, long"), 0o600)
	o, err := OpenOutput(old, "a trace", "{trace")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(old); string(b) != "{trace old, long" {
		t.Fatalf("changed before the first write: %q", b)
	}
	o.Write([]byte("{trace new"))
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(old); string(b) != "{trace new" {
		t.Fatalf("after the first write: %q, want the new output alone", b)
	}
	created := filepath.Join(dir, "new.jsonl")
	if o, err = OpenOutput(created, "a trace", "{trace"); err != nil {
		t.Fatal(err)
	}
	o.Discard()
	if _, err := os.Stat(created); !os.IsNotExist(err) {
		t.Errorf("a discarded new output is still there: %v", err)
	}
}
