package main

import (
	"fmt"
	"io"
	"time"

	"github.com/escapement/escapement/adapters/console"
	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/internal/termtext"
	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/kernel"
)

// liveRun is one live command's run: the session (adapters/session: the
// driver, the session file, its log, the trace) and what the command shows
// of it.
type liveRun struct {
	a         *app
	out       *headless.Writer // stdout: notices its reader going away (`run … | head`)
	errw      *headless.Writer
	red       *redact.Redactor    // the API key and the MCP configurations' secrets
	redact    func(string) string // red.Redact: out of everything printed or written
	secret    string              // the API key
	sess      *session.Session
	driver    *live.Driver
	box       toolBox
	traceOut  *userfile.Output // --trace; nil without
	grace     time.Duration
	whileBusy string
	state     headless.Turns // the root's turns, as the observer saw them
	notify    chan struct{}
	intr      *interrupts
	flags     *liveFlags

	run    protocol.Run          // what the started event says
	enc    *protocol.Encoder     // --json; nil without
	con    *console.Console      // stderr (and, without --json, stdout) for a person
	final  *userfile.Replacement // -o; nil without
	view   *protocol.View        // the kernel's goroutine's while the driver runs
	events []protocol.Event      // the kernel's goroutine's
}

// say prints one notice on stderr, redacted, its control characters
// escaped (its arguments may be a server's or a tool's text: showText).
func (lr *liveRun) say(format string, args ...any) {
	io.WriteString(lr.errw, termtext.Text(lr.redact("escapement: "+fmt.Sprintf(format, args...)))+"\n")
}

// observe runs on the kernel's goroutine after every Step, once the
// session has recorded it: it logs the step, shows its events (the
// protocol's view of its lifecycle records: adapters/protocol), and
// updates the turn state.
func (lr *liveRun) observe(s ports.Step) {
	if log := lr.a.logger; log != nil {
		log.Debug("step", "event", termtext.Line(lr.redact(s.Event.Describe())), "effects", len(s.Effects))
		for i := range s.Effects {
			if e := &s.Effects[i]; e.Kind == kernel.EffError {
				log.Warn("kernel refused an input", "detail", termtext.Line(lr.redact(e.Detail)))
			}
		}
	}
	lr.events = lr.view.Step(s, lr.events[:0])
	for _, ev := range lr.events {
		lr.emit(ev)
	}
	if lr.state.Update(s.Effects) {
		select {
		case lr.notify <- struct{}{}:
		default: // a notification is already pending
		}
	}
}

// emit shows one event: with --json, as a protocol line on stdout (and a
// root turn that did not complete says why on stderr too); else to the
// person (adapters/console). Everything passes the redactor: a server's
// message or a tool's output could hold the API key.
func (lr *liveRun) emit(ev protocol.Event) {
	if lr.enc != nil {
		_ = lr.enc.Encode(ev) // a closed stdout shuts the run down (interrupts)
	}
	lr.con.Show(ev)
}
