package tools

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// grepWithin runs grep and fails the test if the call is still blocked
// after a generous bound (which only stops a hang: it times nothing).
func grepWithin(t *testing.T, b *Box, args map[string]string) ports.ToolResult {
	t.Helper()
	done := make(chan ports.ToolResult, 1)
	go func() { done <- run(t, b, "grep", args) }()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("grep %v still blocked after 30s", args)
		return ports.ToolResult{}
	}
}

// TestGrepFileSwappedForFIFO: a file the walk saw as regular and that is a
// FIFO by the time grep opens it used to block grep's open forever (and
// with it the tool goroutine, which no cancel reaches). grep opens files
// like read_file: non-blocking, regular files only; the FIFO is skipped.
func TestGrepFileSwappedForFIFO(t *testing.T) {
	b, dir := newBox(t, false)
	for _, name := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("needle\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(dir, "a.txt")
	b.grepOpenHook = func(name string) {
		if name != "a.txt" {
			return
		}
		if err := os.Remove(fifo); err != nil {
			t.Error(err)
		}
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Error(err)
		}
	}
	done := make(chan ports.ToolResult, 1)
	go func() { done <- run(t, b, "grep", map[string]string{"pattern": "needle", "path": "."}) }()
	select {
	case r := <-done:
		if r.Status != kernel.ToolOK || r.Content != "b.txt:1: needle\n[1 unreadable file or directory skipped]\n" {
			t.Errorf("grep: %+v", r)
		}
	case <-time.After(30 * time.Second):
		// Release the blocked open before failing, so the goroutine ends:
		// a writer comes and goes, and the reader then sees the end.
		if w, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatal("grep blocked opening a file swapped for a FIFO")
	}
}

// TestGrepSkipsSpecialAndBinaryFiles: a FIFO in the walked tree, a binary
// file (a NUL byte) and a file of invalid UTF-8 that match are not shown;
// grep on a FIFO named directly is an error, not a hang.
func TestGrepSkipsSpecialAndBinaryFiles(t *testing.T) {
	b, dir := newBox(t, false)
	files := map[string]string{
		"text.txt":    "needle in text\n",
		"nul.bin":     "needle\x00\x01\x02 needle\n",
		"invalid.bin": "needle " + strings.Repeat("\xff\xfe", 100) + "\n",
		"latin1.txt":  "caf\xe9 needle, r\xe9sum\xe9 of a long enough text in Latin-1\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := grepWithin(t, b, map[string]string{"pattern": "needle", "path": "."})
	want := "latin1.txt:1: caf\xe9 needle, r\xe9sum\xe9 of a long enough text in Latin-1\ntext.txt:1: needle in text\n"
	if r.Status != kernel.ToolOK || r.Content != want {
		t.Errorf("grep: %q, want %q", r.Content, want)
	}
	if r := grepWithin(t, b, map[string]string{"pattern": "needle", "path": "pipe"}); r.Status != kernel.ToolError ||
		!strings.Contains(r.Content, "pipe is not a regular file or a directory") {
		t.Errorf("grep on a FIFO: %+v", r)
	}
}

// TestGrepOutputCapped: many long matching lines are capped at the output
// limit (1024 bytes here) with a note of what was cut.
func TestGrepOutputCapped(t *testing.T) {
	b, dir := newBox(t, false)
	var sb strings.Builder
	for i := range 150 {
		fmt.Fprintf(&sb, "needle %d %s\n", i, strings.Repeat("x", 100))
	}
	if err := os.WriteFile(filepath.Join(dir, "many.txt"), []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := grepWithin(t, b, map[string]string{"pattern": "needle", "path": "."})
	head, note, ok := strings.Cut(r.Content, "\n[truncated: ")
	if !ok || len(head) > 1024 || !strings.HasPrefix(head, "many.txt:1: needle 0 ") || !strings.HasSuffix(note, " more bytes]") {
		t.Errorf("grep output not capped at 1024 bytes: %d bytes, ends %q", len(r.Content), r.Content[max(0, len(r.Content)-60):])
	}
}

// TestGrepDirectorySwappedForFile: a directory the walk listed that is a
// file by the time the walk reads it cannot be walked; grep goes on and
// counts it as skipped.
func TestGrepDirectorySwappedForFile(t *testing.T) {
	b, dir := newBox(t, false)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("needle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	b.grepOpenHook = func(name string) {
		if name != "a.txt" {
			return
		}
		if err := os.Remove(sub); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(sub, []byte("needle\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
	r := grepWithin(t, b, map[string]string{"pattern": "needle", "path": "."})
	if want := "a.txt:1: needle\n[1 unreadable file or directory skipped]\n"; r.Status != kernel.ToolOK || r.Content != want {
		t.Errorf("grep: %q, want %q", r.Content, want)
	}
}
