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
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/internal/termtext"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/kernel"
	"golang.org/x/term"
)

// liveRun is one live command's run: the session (adapters/session: the
// driver, the session file, its log, the trace) and what the command shows
// of it.
type liveRun struct {
	a         *app
	out       io.Writer
	errw      io.Writer
	red       *redact.Redactor    // the API key and the MCP configurations' secrets
	redact    func(string) string // red.Redact: out of everything printed or written
	secret    string              // the API key, for answerText's hold-back
	sess      *session.Session
	driver    *live.Driver
	box       toolBox
	traceOut  *userfile.Output // --trace; nil without
	json      bool
	grace     time.Duration
	whileBusy string
	state     turnState
	notify    chan struct{}
	intr      *interrupts

	// Kernel goroutine only.
	midLine  bool   // the root's answer text printed so far did not end with a newline
	heldBack string // the end of the answer text not printed yet (answerText)
	outTTY   int8   // stdout is a terminal: 1, not: -1, not asked yet: 0
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

// observe runs on the kernel's goroutine after every Step, once the
// session has recorded it: it logs the step, shows it, and updates the turn
// state.
func (lr *liveRun) observe(s ports.Step) {
	if lr.a.logger != nil {
		lr.a.logger.Debug("step", "event", termtext.Line(lr.redact(s.Event.Describe())), "effects", len(s.Effects))
	}
	for i := range s.Effects {
		lr.show(s.Kernel, &s.Effects[i])
	}
	if lr.state.update(s.Effects) {
		select {
		case lr.notify <- struct{}{}:
		default: // a notification is already pending
		}
	}
}

// update follows the root's turns through effects; changed says one started
// or ended.
func (st *turnState) update(effects []kernel.Effect) (changed bool) {
	for i := range effects {
		e := &effects[i]
		if e.Kind != kernel.EffEmit || e.Life.Agent != kernel.Root {
			continue
		}
		switch e.Life.Kind {
		case kernel.LifeTurnStarted:
			st.mu.Lock()
			st.busy, st.turn = true, e.Life.Turn
			st.mu.Unlock()
			changed = true
		case kernel.LifeTurnEnded:
			st.mu.Lock()
			st.busy = false
			st.ended++
			st.last = e.Life
			st.mu.Unlock()
			changed = true
		}
	}
	return changed
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
	switch {
	case e.Kind == kernel.EffError:
		if lr.a.logger != nil {
			lr.a.logger.Warn("kernel refused an input", "detail", termtext.Line(lr.redact(e.Detail)))
		}
	case lr.json:
		lr.showJSON(e)
	case e.Kind == kernel.EffStartTool:
		lr.activity("[%s] %s %s", agentPath(k, e.Agent), e.Call.Name, clip(e.Call.Arguments, 160))
	case e.Kind == kernel.EffEmit:
		lr.showLife(k, e)
	}
}

// showJSON prints a lifecycle event as a JSON line (--json).
func (lr *liveRun) showJSON(e *kernel.Effect) {
	if e.Kind != kernel.EffEmit {
		return
	}
	if b, err := json.Marshal(e.Life); err == nil {
		io.WriteString(lr.out, lr.redact(string(b))+"\n")
	}
	lr.showTurnEnd(e)
}

// showLife shows a lifecycle event: the root's answer on stdout, the
// tree's activity and a turn's end on stderr.
func (lr *liveRun) showLife(k *kernel.Kernel, e *kernel.Effect) {
	l := &e.Life
	switch {
	case l.Kind == kernel.LifeDelta && l.Agent == kernel.Root:
		lr.answerText(l.Text, false)
		lr.midLine = !strings.HasSuffix(l.Text, "\n")
	case l.Kind == kernel.LifeTurnEnded:
		if l.Agent == kernel.Root {
			lr.answerText("", true)
			if lr.midLine {
				fmt.Fprintln(lr.out)
			}
		}
		lr.showTurnEnd(e)
	default:
		if line := activityLine(k, l); line != "" {
			lr.activity("%s", line)
		}
	}
}

// activityLine is the stderr line for a lifecycle event of the tree's
// activity ("" for one that is not shown).
func activityLine(k *kernel.Kernel, l *kernel.Lifecycle) string {
	at := "[" + agentPath(k, l.Agent) + "] "
	switch l.Kind {
	case kernel.LifeRetry:
		return at + fmt.Sprintf("retry %d in %v: %s", l.N, l.Delay.Round(time.Millisecond), clip(l.Text, 160))
	case kernel.LifeRequestWaiting:
		return at + "waits for a request slot (--max-parallel-requests)"
	case kernel.LifeDelegated:
		return at + fmt.Sprintf("delegate → %s: %s", agentPath(k, l.Child), clip(l.Text, 160))
	case kernel.LifeCallFinished:
		return at + callFinished(k, l)
	case kernel.LifeCallDropped:
		return at + "dropped half-streamed call " + l.Name
	case kernel.LifeTimedOut:
		return at + l.Reason.String()
	case kernel.LifeRecovered:
		return at + "recovered after a crash: " + l.Text
	}
	return ""
}

// callFinished says how a call ended.
func callFinished(k *kernel.Kernel, l *kernel.Lifecycle) string {
	switch l.Status {
	case kernel.CallChild:
		return fmt.Sprintf("← %s: %s", agentPath(k, l.Child), l.Outcome)
	case kernel.CallOK:
		return fmt.Sprintf("← %s ok", l.Name)
	}
	return fmt.Sprintf("← %s %s (%s)", l.Name, l.Status, l.Reason)
}

// agentPath names an agent of k ("?" for an id it does not hold).
func agentPath(k *kernel.Kernel, id kernel.AgentID) string {
	if id < 0 || int(id) >= k.NumAgents() {
		return "?"
	}
	return k.Agent(id).Path()
}

// activity prints one line of the tree's activity on stderr, redacted, its
// control characters escaped.
func (lr *liveRun) activity(format string, args ...any) {
	io.WriteString(lr.errw, termtext.Line(lr.redact(fmt.Sprintf(format, args...)))+"\n")
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
