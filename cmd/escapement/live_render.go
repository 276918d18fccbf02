package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/otel"
	"github.com/escapement/escapement/adapters/wal"
	"github.com/escapement/escapement/internal/termtext"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
	"golang.org/x/term"
)

// liveRun is one live session: the driver and everything it writes.
type liveRun struct {
	a         *app
	out       io.Writer
	errw      io.Writer
	redact    func(string) string // the API key out of everything printed or written
	secret    string              // the API key, for answerText's hold-back
	driver    *live.Driver
	box       toolBox
	session   *sessionWriter
	wal       *wal.Writer // the write-ahead log (live_wal.go); nil without one
	walF      *os.File
	walPath   string
	trace     *trace.Writer
	traceF    *os.File
	json      bool
	grace     time.Duration
	whileBusy string
	state     turnState
	notify    chan struct{}
	intr      *interrupts
	otel      *otel.Exporter // the span export (live_otel.go); nil without one

	// Kernel goroutine only.
	written     int    // root messages already in the session file
	midLine     bool   // the root's answer text printed so far did not end with a newline
	heldBack    string // the end of the answer text not printed yet (answerText)
	outTTY      int8   // stdout is a terminal: 1, not: -1, not asked yet: 0
	sessionLost bool   // the session file failed and the user was told
	traceLost   bool   // the trace file failed and the user was told
}

// lockedWriter serialises writes from the kernel's goroutine (answers,
// activity) and the command's (prompts, notices).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// turnState is the root's turn as the observer last saw it; the command's
// goroutine reads it when notified (coalesced, so the kernel's goroutine
// never blocks on the command's).
type turnState struct {
	mu    sync.Mutex
	busy  bool
	turn  uint64
	ended uint64 // turns ended so far
	last  kernel.Lifecycle
}

func (s *turnState) get() (busy bool, turn, ended uint64, last kernel.Lifecycle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy, s.turn, s.ended, s.last
}

// say prints one notice on stderr, redacted, its control characters
// escaped (its arguments may be a server's or a tool's text: showText).
func (lr *liveRun) say(format string, args ...any) {
	io.WriteString(lr.errw, termtext.Text(lr.redact("escapement: "+fmt.Sprintf(format, args...)))+"\n")
}

// observe runs on the kernel's goroutine after every Step: it writes the
// trace (flushed: the file holds every step so far), appends the root's new
// messages to the session, shows the step, and updates the turn state.
func (lr *liveRun) observe(s live.Step) {
	lr.otelObserve(s)
	if lr.trace != nil {
		lr.trace.Step(s.Kernel, s.Event, s.Target, s.Before, s.Effects)
		if err := lr.trace.Flush(); err != nil && !lr.traceLost {
			lr.traceLost = true
			lr.say("--trace: %v; the trace is incomplete from here", err)
		}
	}
	if lr.a.logger != nil {
		lr.a.logger.Debug("step", "event", termtext.Line(lr.redact(s.Event.Describe())), "effects", len(s.Effects))
	}
	lr.persist(s)
	for i := range s.Effects {
		lr.show(s.Kernel, &s.Effects[i])
	}
	changed := false
	for i := range s.Effects {
		e := &s.Effects[i]
		if e.Kind != kernel.EffEmit || e.Life.Agent != kernel.Root {
			continue
		}
		switch e.Life.Kind {
		case kernel.LifeTurnStarted:
			lr.state.mu.Lock()
			lr.state.busy, lr.state.turn = true, e.Life.Turn
			lr.state.mu.Unlock()
			changed = true
		case kernel.LifeTurnEnded:
			lr.state.mu.Lock()
			lr.state.busy = false
			lr.state.ended++
			lr.state.last = e.Life
			lr.state.mu.Unlock()
			changed = true
		}
	}
	if changed {
		select {
		case lr.notify <- struct{}{}:
		default: // a notification is already pending
		}
	}
}

// persist appends the root's new messages as they appear and, at the end
// of a root turn, the turn_end record (then syncs). When a turn ends and
// the next starts in the same Step (inputs queued while an interrupted tree
// settled), the previous turn's messages end at its marker: the new turn's
// user messages follow it (TestPersistQueuedTurn).
func (lr *liveRun) persist(s live.Step) {
	hist := s.Kernel.Agent(kernel.Root).History()
	var ended *kernel.Lifecycle
	restarted := false
	for i := range s.Effects {
		e := &s.Effects[i]
		if e.Kind != kernel.EffEmit || e.Life.Agent != kernel.Root {
			continue
		}
		switch {
		case e.Life.Kind == kernel.LifeTurnEnded:
			ended = &e.Life
		case e.Life.Kind == kernel.LifeTurnStarted && ended != nil:
			restarted = true
		}
	}
	if ended != nil {
		cut := len(hist)
		if restarted {
			// The marker was appended when the abort began (often Steps
			// earlier, and already written); everything after it belongs to
			// the new turn.
			for j := len(hist) - 1; j >= 0; j-- {
				if hist[j].Marker {
					cut = max(j+1, lr.written)
					break
				}
			}
		}
		for ; lr.written < cut; lr.written++ {
			lr.session.message(hist[lr.written])
		}
		lr.session.turnEnd(*ended)
	}
	for ; lr.written < len(hist); lr.written++ {
		lr.session.message(hist[lr.written])
	}
	if err := lr.session.failed(); err != nil && !lr.sessionLost {
		// Said once: the writer keeps its first error and writes nothing
		// more; the run ends with it (exit 1).
		lr.sessionLost = true
		lr.say("%v\nescapement: nothing more is written to the session file; this session goes on without a transcript (resuming the file continues from its last complete turn)", err)
	}
}

// show prints one effect for the human (or, with --json, each lifecycle
// event for scripts). UI text goes to stderr only, never to a transcript.
// Everything passes the redactor: a server's message or a tool's output
// could hold the API key. Everything shown on a terminal has its control
// characters escaped (internal/termtext): tool and agent names, arguments,
// errors and answers come from the model, the servers and the tools, and
// an ESC or a CR in them would act on the terminal — clear it, retitle it,
// or overwrite an activity line with another. --json lines are exact JSON
// (which escapes what a terminal acts on below U+0020 anyway).
func (lr *liveRun) show(k *kernel.Kernel, e *kernel.Effect) {
	if e.Kind == kernel.EffError {
		if lr.a.logger != nil {
			lr.a.logger.Warn("kernel refused an input", "detail", termtext.Line(lr.redact(e.Detail)))
		}
		return
	}
	if lr.json {
		if e.Kind == kernel.EffEmit {
			if b, err := json.Marshal(e.Life); err == nil {
				io.WriteString(lr.out, lr.redact(string(b))+"\n")
			}
			lr.showTurnEnd(e)
		}
		return
	}
	path := func(id kernel.AgentID) string {
		if id < 0 || int(id) >= k.NumAgents() {
			return "?"
		}
		return k.Agent(id).Path()
	}
	activity := func(format string, args ...any) {
		line := strings.TrimSuffix(fmt.Sprintf(format, args...), "\n")
		io.WriteString(lr.errw, termtext.Line(lr.redact(line))+"\n")
	}
	switch e.Kind {
	case kernel.EffStartTool:
		activity("[%s] %s %s\n", path(e.Agent), e.Call.Name, clip(e.Call.Arguments, 160))
		return
	case kernel.EffEmit:
	default:
		return
	}
	l := &e.Life
	switch l.Kind {
	case kernel.LifeDelta:
		if l.Agent == kernel.Root {
			lr.answerText(l.Text, false)
			lr.midLine = !strings.HasSuffix(l.Text, "\n")
		}
	case kernel.LifeRetry:
		activity("[%s] retry %d in %v: %s\n", path(l.Agent), l.N, l.Delay.Round(time.Millisecond), clip(l.Text, 160))
	case kernel.LifeDelegated:
		activity("[%s] delegate → %s: %s\n", path(l.Agent), path(l.Child), clip(l.Text, 160))
	case kernel.LifeCallFinished:
		switch l.Status {
		case kernel.CallChild:
			activity("[%s] ← %s: %s\n", path(l.Agent), path(l.Child), l.Outcome)
		case kernel.CallOK:
			activity("[%s] ← %s ok\n", path(l.Agent), l.Name)
		default:
			activity("[%s] ← %s %s (%s)\n", path(l.Agent), l.Name, l.Status, l.Reason)
		}
	case kernel.LifeCallDropped:
		activity("[%s] dropped half-streamed call %s\n", path(l.Agent), l.Name)
	case kernel.LifeTimedOut:
		activity("[%s] %s\n", path(l.Agent), l.Reason)
	case kernel.LifeRecovered:
		activity("[%s] recovered after a crash: %s\n", path(l.Agent), l.Text)
	case kernel.LifeTurnEnded:
		if l.Agent == kernel.Root {
			lr.answerText("", true)
			if lr.midLine {
				fmt.Fprintln(lr.out)
			}
		}
		lr.showTurnEnd(e)
	}
}

// answerText prints the root's streamed answer on stdout, redacted. A key
// the model repeats arrives in pieces, each too short to be recognised, so
// the end of the text that could be part of a run of the key (the longest
// suffix that is a substring of it) is held back, unredacted, until a
// chunk shows where the run ends, or the turn ends (final). Whatever run
// touches the cut lies wholly in the part held back, so redacting the two
// parts apart misses nothing.
//
// On a terminal the text's control characters other than newline and tab
// are escaped (termtext.Text), and a last character cut in two by the hold
// back waits with it, so its bytes are not escaped as broken UTF-8.
func (lr *liveRun) answerText(text string, final bool) {
	text = lr.heldBack + text
	lr.heldBack = ""
	if !final && len(lr.secret) >= 4 {
		for k := min(len(lr.secret), len(text)); k > 0; k-- {
			if strings.Contains(lr.secret, text[len(text)-k:]) {
				text, lr.heldBack = text[:len(text)-k], text[len(text)-k:]
				break
			}
		}
	}
	tty := lr.stdoutTerminal()
	if tty && !final {
		for j := 1; j <= min(utf8.UTFMax, len(text)); j++ {
			if last := len(text) - j; utf8.RuneStart(text[last]) {
				if !utf8.FullRuneInString(text[last:]) {
					text, lr.heldBack = text[:last], text[last:]+lr.heldBack
				}
				break
			}
		}
	}
	if text == "" {
		return
	}
	text = lr.redact(text)
	if tty {
		text = termtext.Text(text)
	}
	io.WriteString(lr.out, text)
}

// stdoutTerminal reports whether stdout is a terminal (asked once; the
// kernel's goroutine only).
func (lr *liveRun) stdoutTerminal() bool {
	if lr.outTTY == 0 {
		lr.outTTY = -1
		if f, ok := lr.a.out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			lr.outTTY = 1
		}
	}
	return lr.outTTY > 0
}

// showTurnEnd prints, on stderr, the UI line for a root turn that did not
// complete and why: the reason, and the kernel's detail (a failed request's
// HTTP status and server message, the cap that was hit).
func (lr *liveRun) showTurnEnd(e *kernel.Effect) {
	l := &e.Life
	if l.Kind != kernel.LifeTurnEnded || l.Agent != kernel.Root {
		return
	}
	lr.midLine = false
	ui := kernel.UIText(l.Outcome, l.Reason)
	if ui == "" {
		return
	}
	line := ui
	if l.Reason != kernel.ReasonNone && l.Reason != kernel.ReasonUserCancel && l.Reason != kernel.ReasonShutdown {
		line += " (" + l.Reason.String() + ")"
	}
	if l.Detail != "" {
		line += "\n  " + strings.ReplaceAll(termtext.Text(lr.redact(l.Detail)), "\n", "\n  ")
	}
	io.WriteString(lr.errw, lr.redact(line)+"\n")
}

// clip puts s on one line and cuts it to at most n bytes, at a rune
// boundary, marking the cut.
func clip(s string, n int) string {
	return textcut.Clip(strings.ReplaceAll(s, "\n", " "), n)
}
