package lineread

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
func closeWithin(t *testing.T, in *Reader, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { // owned: waited for below, or the test fails and exits
		defer close(done)
		in.Close()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Reader.close still waiting for its reader after %v", d)
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
		in, err := Start(r)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // let the reader block
		closeWithin(t, in, 5*time.Second)
	})
	t.Run("blocked in send", func(t *testing.T) {
		r, w := pipe(t)
		in, err := Start(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString("one\ntwo\n"); err != nil {
			t.Fatal(err)
		}
		if l := <-in.Lines; l.Text != "one" {
			t.Fatalf("line %+v", l)
		}
		closeWithin(t, in, 5*time.Second)
	})
	t.Run("lines then end of input", func(t *testing.T) {
		r, w := pipe(t)
		in, err := Start(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString("one\ntwo"); err != nil {
			t.Fatal(err)
		}
		w.Close()
		var got []string
		for l := range in.Lines {
			got = append(got, l.Text)
		}
		if strings.Join(got, "|") != "one|two" || in.Err() != nil {
			t.Errorf("lines %q, err %v", got, in.Err())
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
		in, err := Start(f)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for l := range in.Lines {
			got = append(got, l.Text)
		}
		if strings.Join(got, "|") != "x|y" || in.Err() != nil {
			t.Errorf("lines %q, err %v", got, in.Err())
		}
		closeWithin(t, in, 5*time.Second)
	})
	t.Run("line too long", func(t *testing.T) {
		in, err := Start(strings.NewReader("before\r\n" + strings.Repeat("x", 2<<20) + "\nafter"))
		if err != nil {
			t.Fatal(err)
		}
		var got []Line
		for l := range in.Lines {
			got = append(got, l)
		}
		want := []Line{{Text: "before", N: 1}, {N: 2, Size: 2 << 20}, {Text: "after", N: 3}}
		if !slices.Equal(got, want) || in.Err() != nil {
			t.Errorf("lines %+v, err %v\nwant %+v", got, in.Err(), want)
		}
		closeWithin(t, in, 5*time.Second)
	})
}

// TestLineInputLengths: lines of any length up to MaxLine arrive
// whole, whatever the reader's buffer; one byte more is refused, and so is
// a line far longer, and a last line without its newline; the line
// numbers count every line.
func TestLineInputLengths(t *testing.T) {
	var src strings.Builder
	var want []Line
	for i, n := range []int{0, 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, MaxLine - 1, MaxLine, MaxLine + 1, 3 * MaxLine} {
		line := strings.Repeat(string(rune('a'+i)), n)
		src.WriteString(line + "\n")
		if n > MaxLine {
			want = append(want, Line{N: i + 1, Size: n})
		} else {
			want = append(want, Line{N: i + 1, Text: line})
		}
	}
	src.WriteString(strings.Repeat("z", MaxLine+5)) // no newline
	want = append(want, Line{N: len(want) + 1, Size: MaxLine + 5})
	in, err := Start(strings.NewReader(src.String()))
	if err != nil {
		t.Fatal(err)
	}
	var got []Line
	for l := range in.Lines {
		got = append(got, l)
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].N != want[i].N || got[i].Size != want[i].Size || got[i].Text != want[i].Text {
			t.Errorf("line %d: n %d, size %d, %d bytes of text; want n %d, size %d, %d bytes", i+1, got[i].N, got[i].Size, len(got[i].Text), want[i].N, want[i].Size, len(want[i].Text))
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
	in, err := Start(&failingReader{text: "one\n", err: errors.New("input/output error")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for l := range in.Lines {
		got = append(got, l.Text)
	}
	if strings.Join(got, "|") != "one" || in.Err() == nil || !strings.Contains(in.Err().Error(), "stdin: input/output error") {
		t.Errorf("lines %q, err %v", got, in.Err())
	}
	closeWithin(t, in, 5*time.Second)
}
