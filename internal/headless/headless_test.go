package headless

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/escapement/escapement/kernel"
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

// TestTurns: the root's turn_started and turn_ended records move Turns; a
// sub-agent's and other records do not; Running and GiveUp stand for a
// crashed run's turn.
func TestTurns(t *testing.T) {
	var s Turns
	emit := func(l kernel.Lifecycle) []kernel.Effect { return []kernel.Effect{{Kind: kernel.EffEmit, Life: l}} }
	if s.Update(emit(kernel.Lifecycle{Kind: kernel.LifeTurnStarted, Agent: 1, Turn: 1})) {
		t.Error("a sub-agent's turn moved the root's")
	}
	if !s.Update(emit(kernel.Lifecycle{Kind: kernel.LifeTurnStarted, Agent: kernel.Root, Turn: 3})) {
		t.Error("the root's turn start was not seen")
	}
	if busy, turn, ended, _ := s.Get(); !busy || turn != 3 || ended != 0 {
		t.Errorf("after the start: %v %d %d", busy, turn, ended)
	}
	s.Update(emit(kernel.Lifecycle{Kind: kernel.LifeTurnEnded, Agent: kernel.Root, Turn: 3, Outcome: kernel.OutcomeCompleted}))
	if busy, _, ended, last := s.Get(); busy || ended != 1 || last.Outcome != kernel.OutcomeCompleted {
		t.Errorf("after the end: %v %d %+v", busy, ended, last)
	}
	s.Running(4)
	s.GiveUp()
	if busy, turn, ended, _ := s.Get(); busy || turn != 4 || ended != 2 {
		t.Errorf("a crashed turn given up: %v %d %d", busy, turn, ended)
	}
}
