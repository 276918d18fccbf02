package headless

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestPrompt: the argument, else stdin when "-" or when nothing else can
// be meant; protocol input leaves the prompt to the input.
func TestPrompt(t *testing.T) {
	for _, tc := range []struct {
		args              []string
		resume, json, tty bool
		stdin, want, err  string
	}{
		{args: []string{"hi"}, stdin: "ignored", want: "hi"},
		{stdin: "from stdin\n", want: "from stdin"},
		{args: []string{"-"}, stdin: "dash\r\n", want: "dash"},
		{args: []string{"-"}, tty: true, stdin: "typed", want: "typed"},
		{tty: true, err: "run needs a PROMPT"},
		{stdin: " \n", err: "stdin was empty"},
		{resume: true, stdin: "not read", want: ""},
		{args: []string{"-"}, resume: true, stdin: "", err: "stdin was empty"},
		{args: []string{" "}, err: "the prompt is empty"},
		{json: true, stdin: `{"message":"x"}`, want: ""},
		{json: true, args: []string{"go"}, want: "go"},
		{json: true, args: []string{"-"}, err: "drop the -"},
	} {
		got, err := Prompt(tc.args, tc.resume, tc.json, strings.NewReader(tc.stdin), tc.tty)
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) || tc.err == "" && (err != nil || got != tc.want) {
			t.Errorf("%+v: %q %v", tc, got, err)
		}
	}
	if _, err := Prompt(nil, false, false, strings.NewReader(strings.Repeat("x", 8<<20+1)), false); err == nil || !strings.Contains(err.Error(), "8 MiB") {
		t.Errorf("a prompt over 8 MiB: %v", err)
	}
}

// TestWriterNoticesItsReaderGone: a write that finds the pipe's reader
// gone closes Gone, and later writes are dropped.
func TestWriterNoticesItsReaderGone(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	out := NewWriter(w)
	if _, err := out.Write([]byte("read\n")); err != nil || out.Closed() {
		t.Fatal(err)
	}
	r.Close()
	if _, err := out.Write([]byte("lost\n")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to a pipe without reader: %v", err)
	}
	select {
	case <-out.Gone():
	default:
		t.Fatal("Gone is not closed")
	}
	if n, err := out.Write([]byte("dropped")); n != 7 || err != nil || !out.Closed() {
		t.Errorf("a write after: %d %v", n, err)
	}
}
