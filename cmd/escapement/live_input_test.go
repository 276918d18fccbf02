package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
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
		if l := <-in.lines; l.text != "one" {
			t.Fatalf("line %+v", l)
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
			got = append(got, l.text)
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
			got = append(got, l.text)
		}
		if strings.Join(got, "|") != "x|y" || in.err != nil {
			t.Errorf("lines %q, err %v", got, in.err)
		}
		closeWithin(t, in, 5*time.Second)
	})
	t.Run("line too long", func(t *testing.T) {
		in, err := startInput(strings.NewReader("before\r\n" + strings.Repeat("x", 2<<20) + "\nafter"))
		if err != nil {
			t.Fatal(err)
		}
		var got []inputLine
		for l := range in.lines {
			got = append(got, l)
		}
		want := []inputLine{{text: "before", n: 1}, {n: 2, size: 2 << 20}, {text: "after", n: 3}}
		if !slices.Equal(got, want) || in.err != nil {
			t.Errorf("lines %+v, err %v\nwant %+v", got, in.err, want)
		}
		closeWithin(t, in, 5*time.Second)
	})
}

// TestLineInputLengths: lines of any length up to MaxInputLine arrive
// whole, whatever the reader's buffer; one byte more is refused, and so is
// a line far longer, and a last line without its newline; the line
// numbers count every line.
func TestLineInputLengths(t *testing.T) {
	var src strings.Builder
	var want []inputLine
	for i, n := range []int{0, 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, MaxInputLine - 1, MaxInputLine, MaxInputLine + 1, 3 * MaxInputLine} {
		line := strings.Repeat(string(rune('a'+i)), n)
		src.WriteString(line + "\n")
		if n > MaxInputLine {
			want = append(want, inputLine{n: i + 1, size: n})
		} else {
			want = append(want, inputLine{n: i + 1, text: line})
		}
	}
	src.WriteString(strings.Repeat("z", MaxInputLine+5)) // no newline
	want = append(want, inputLine{n: len(want) + 1, size: MaxInputLine + 5})
	in, err := startInput(strings.NewReader(src.String()))
	if err != nil {
		t.Fatal(err)
	}
	var got []inputLine
	for l := range in.lines {
		got = append(got, l)
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].n != want[i].n || got[i].size != want[i].size || got[i].text != want[i].text {
			t.Errorf("line %d: n %d, size %d, %d bytes of text; want n %d, size %d, %d bytes", i+1, got[i].n, got[i].size, len(got[i].text), want[i].n, want[i].size, len(want[i].text))
		}
	}
	closeWithin(t, in, 5*time.Second)
}

// failingReader returns its text, then err.
type failingReader struct {
	text string
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.text == "" {
		return 0, f.err
	}
	n := copy(p, f.text)
	f.text = f.text[n:]
	return n, nil
}

// TestLineInputReadError: a read that fails ends the input with the
// error (chat then exits 1: the input was not read to its end).
func TestLineInputReadError(t *testing.T) {
	in, err := startInput(&failingReader{text: "one\n", err: errors.New("input/output error")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for l := range in.lines {
		got = append(got, l.text)
	}
	if strings.Join(got, "|") != "one" || in.err == nil || !strings.Contains(in.err.Error(), "stdin: input/output error") {
		t.Errorf("lines %q, err %v", got, in.err)
	}
	closeWithin(t, in, 5*time.Second)
}
