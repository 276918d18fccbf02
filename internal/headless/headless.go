// Package headless holds what a command-line host of live runs does at
// its edges for scripts (docs/cli.md, "Headless habits"): a standard
// output that notices when its reader has gone (`escapement run … | head`)
// so the run can be shut down cleanly instead of dying mid-turn, the
// prompt read from stdin (`echo hi | escapement run`), a run's final
// answer written to a file (`-o FILE`), and the root's turns followed for
// the command that waits for them.
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
	"github.com/escapement/escapement/kernel"
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

// Turns follows the root's turns through the steps of a live run: the
// driver's observer updates it on the kernel's goroutine (Update), and the
// command's goroutine reads it when notified (Get), so the kernel's
// goroutine never waits for the command's.
type Turns struct {
	mu    sync.Mutex
	busy  bool
	turn  uint64
	ended uint64 // root turns ended so far
	last  kernel.Lifecycle
}

// Get says whether a root turn runs, its number, how many have ended and
// the last one's turn_ended record.
func (s *Turns) Get() (busy bool, turn, ended uint64, last kernel.Lifecycle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy, s.turn, s.ended, s.last
}

// Update follows the root's turns through a step's effects; changed says
// one started or ended.
func (s *Turns) Update(effects []kernel.Effect) (changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range effects {
		e := &effects[i]
		if e.Kind != kernel.EffEmit || e.Life.Agent != kernel.Root {
			continue
		}
		switch e.Life.Kind {
		case kernel.LifeTurnStarted:
			s.busy, s.turn = true, e.Life.Turn
			changed = true
		case kernel.LifeTurnEnded:
			s.busy, s.last = false, e.Life
			s.ended++
			changed = true
		}
	}
	return changed
}

// Running says turn runs before any step has said so: a crashed run's,
// which the session continues once the driver runs.
func (s *Turns) Running(turn uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy, s.turn = true, turn
}

// GiveUp stops waiting for the running turn: it counts as ended (a crashed
// run's turn whose prompt could not be submitted again).
func (s *Turns) GiveUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy = false
	s.ended++
}
