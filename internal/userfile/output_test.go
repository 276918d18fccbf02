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

// TestWriteNewKeepsEarlierFiles: a second and a third file of one name get
// -2 and -3, and the first keeps what it held.
func TestWriteNewKeepsEarlierFiles(t *testing.T) {
	dir := t.TempDir()
	var got []string
	for _, data := range []string{"one", "two", "three"} {
		p, err := WriteNew(dir, "finding", ".yaml", []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, filepath.Base(p))
	}
	if strings.Join(got, " ") != "finding.yaml finding-2.yaml finding-3.yaml" {
		t.Fatalf("wrote %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "finding.yaml")); string(b) != "one" {
		t.Fatalf("the first file holds %q", b)
	}
	if _, err := WriteNew(filepath.Join(dir, "missing"), "x", ".yaml", nil); err == nil {
		t.Fatal("a missing directory was accepted")
	}
}
