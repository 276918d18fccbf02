// Package headless holds what a command-line host of live runs does at
// its edges for scripts (docs/cli.md, "Headless habits"): a standard
// output that notices when its reader has gone (`escapement run … | head`)
// so the run can be shut down cleanly instead of dying mid-turn, the
// prompt read from stdin (`echo hi | escapement run`), and a run's final
// answer written to a file (`-o FILE`).
package headless

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/lineread"
	"github.com/escapement/escapement/internal/userfile"
)

// Writer serialises writes from several goroutines (a run's answers and
// activity from the kernel's, prompts and notices from the command's).
// Once a write finds the reader gone (EPIPE), it drops every later write
// and closes Gone: the host shuts the run down. Writing to a pipe whose
// reader has gone kills a Go program unless it catches SIGPIPE; the host
// does (os/signal.Notify), so the write fails with EPIPE instead.
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	gone   chan struct{}
	broken bool
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w, gone: make(chan struct{})} }

func (l *Writer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken {
		return len(p), nil
	}
	n, err := l.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		l.broken = true
		close(l.gone)
	}
	return n, err
}

// Gone is closed once a write has found the reader gone.
func (l *Writer) Gone() <-chan struct{} { return l.gone }

// Closed says the reader has gone.
func (l *Writer) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.broken
}

// Prompt is the prompt of a one-turn run: its argument, or stdin read
// whole (lineread.ReadPrompt) when the argument is "-", or when there is
// none, no session is being resumed, and stdin is not a terminal. With
// protocol input (jsonInput) stdin holds input lines instead, and the
// prompt is the argument or "" (the input's first message starts the
// turn).
func Prompt(args []string, resume, jsonInput bool, stdin io.Reader, stdinTerminal bool) (string, error) {
	dash := len(args) == 1 && args[0] == "-"
	switch {
	case jsonInput && dash:
		return "", errors.New("run - reads the prompt from stdin, which --input-format json gives to protocol input lines; drop the -")
	case jsonInput:
		return strings.Join(args, ""), nil
	case dash || len(args) == 0 && !resume && !stdinTerminal:
		return fromStdin(stdin)
	case len(args) == 1 && strings.TrimSpace(args[0]) == "":
		return "", errors.New("the prompt is empty")
	case len(args) == 0 && !resume:
		return "", errors.New("run needs a PROMPT, a prompt on stdin (or -), or --resume FILE to continue a turn a crashed run left")
	}
	return strings.Join(args, ""), nil
}

// fromStdin reads the prompt from stdin, which must hold one.
func fromStdin(stdin io.Reader) (string, error) {
	text, err := lineread.ReadPrompt(stdin)
	if err == nil && strings.TrimSpace(text) == "" {
		err = errors.New("run needs a PROMPT: none was given and stdin was empty")
	}
	return text, err
}

// WriteFinal puts the final answer of the run view saw in the file r
// prepared (-o), redacted, when the run's last root turn completed; else
// it leaves the file as it was. note says what a person should know: that
// nothing was written, or where a file that was there went.
func WriteFinal(r *userfile.Replacement, redact func(string) string, view *protocol.View) (note string, err error) {
	last, ok := view.LastTurn()
	if !ok || last.Outcome != "completed" {
		r.Discard()
		return "not written: no turn completed", nil
	}
	kept, err := r.Commit([]byte(strings.TrimRight(redact(last.Text), "\n") + "\n"))
	if kept != "" {
		note = fmt.Sprintf("the file that was there is kept as %s", kept)
	}
	return note, err
}
