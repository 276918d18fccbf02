package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// closeWithin runs in.close and fails the test if it does not return in time
// (the reader goroutine stayed blocked: close would have no owner to join).
func closeWithin(t *testing.T, in *lineInput, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { // owned: waited for below, or the test fails and exits
		defer close(done)
		in.close()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("lineInput.close still waiting for its reader after %v", d)
	}
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// TestLineInputOwned: chat's stdin reader is joined when chat returns, even
// while it is blocked reading a pipe nobody writes to, or blocked handing
// over a line nobody takes.
func TestLineInputOwned(t *testing.T) {
	t.Run("blocked in read", func(t *testing.T) {
		r, _ := pipe(t)
		in, err := startInput(r)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // let the reader block
		closeWithin(t, in, 5*time.Second)
	})
	t.Run("blocked in send", func(t *testing.T) {
		r, w := pipe(t)
		in, err := startInput(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString("one\ntwo\n"); err != nil {
			t.Fatal(err)
		}
		if l := <-in.lines; l != "one" {
			t.Fatalf("line %q", l)
		}
		closeWithin(t, in, 5*time.Second)
	})
	t.Run("lines then end of input", func(t *testing.T) {
		r, w := pipe(t)
		in, err := startInput(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString("one\ntwo"); err != nil {
			t.Fatal(err)
		}
		w.Close()
		var got []string
		for l := range in.lines {
			got = append(got, l)
		}
		if strings.Join(got, "|") != "one|two" || in.err != nil {
			t.Errorf("lines %q, err %v", got, in.err)
		}
		closeWithin(t, in, 5*time.Second)
	})
	t.Run("regular file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "in")
		if err := os.WriteFile(path, []byte("x\ny\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		in, err := startInput(f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for l := range in.lines {
			got = append(got, l)
		}
		if strings.Join(got, "|") != "x|y" || in.err != nil {
			t.Errorf("lines %q, err %v", got, in.err)
		}
		closeWithin(t, in, 5*time.Second)
	})
	t.Run("line too long", func(t *testing.T) {
		in, err := startInput(strings.NewReader(strings.Repeat("x", 2<<20) + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		for range in.lines {
		}
		if in.err == nil || !strings.Contains(in.err.Error(), "too long") {
			t.Errorf("err %v, want token too long", in.err)
		}
		closeWithin(t, in, 5*time.Second)
	})
}
