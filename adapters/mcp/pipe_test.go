package mcp

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// TestPipeReaderDrain: once drained, a read of a stdio server's stdout
// returns what the pipe holds however long the client took before asking
// (its own decoding does not count), the pipe's end as io.EOF, and fails
// with errPipeHeld when the pipe stays open with nothing in it for the
// grace (a process that escaped the server's tree holds it).
func TestPipeReaderDrain(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pr := &pipeReader{f: r}
	if _, err := w.WriteString("answer\n"); err != nil {
		t.Fatal(err)
	}
	pr.drain(200 * time.Millisecond)
	time.Sleep(400 * time.Millisecond) // the client decodes something long
	buf := make([]byte, 64)
	if n, err := pr.Read(buf); err != nil || string(buf[:n]) != "answer\n" {
		t.Fatalf("read after the grace: %q, %v", buf[:n], err)
	}
	pr.drain(50 * time.Millisecond) // w is still open: the pipe is held
	if n, err := pr.Read(buf); !errors.Is(err, errPipeHeld) {
		t.Fatalf("read of a held pipe: %q, %v", buf[:n], err)
	}
	w.Close()
	if _, err := pr.Read(buf); err != io.EOF {
		t.Fatalf("read at the pipe's end: %v", err)
	}
}
