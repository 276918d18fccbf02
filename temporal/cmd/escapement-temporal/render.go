package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/escapement/escapement/internal/termtext"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// renderer prints lifecycle records as the escapement CLI does: the
// root's answer on stdout, tool and delegation activity on stderr, the
// reason a turn did not complete on stderr (control characters a server
// or a tool sent escaped); with --json, every record as a JSON line on
// stdout. Only the follower's goroutine calls show.
type renderer struct {
	out, errw io.Writer
	json      bool
	tty       bool // stdout is a terminal: the answer's control characters are escaped
	redact    func(string) string
	midLine   bool // the root's answer printed so far did not end with a newline
}

// say prints one notice on stderr, redacted, its control characters
// escaped (its arguments may be a server's or a tool's text).
func (r *renderer) say(format string, args ...any) {
	io.WriteString(r.errw, termtext.Text(r.redact("escapement: "+fmt.Sprintf(format, args...)))+"\n")
}

func (r *renderer) show(l *kernel.Lifecycle, paths map[kernel.AgentID]string, args map[kernel.OpID]string) {
	if r.json {
		if b, err := json.Marshal(l); err == nil {
			io.WriteString(r.out, r.redact(string(b))+"\n")
		}
		r.turnEnd(l)
		return
	}
	path := func(id kernel.AgentID) string {
		if p, ok := paths[id]; ok {
			return p
		}
		return "?"
	}
	activity := func(format string, a ...any) {
		io.WriteString(r.errw, termtext.Line(r.redact(strings.TrimSuffix(fmt.Sprintf(format, a...), "\n")))+"\n")
	}
	switch l.Kind {
	case kernel.LifeToolStarted:
		activity("[%s] %s %s\n", path(l.Agent), l.Name, clip(args[l.Op], 160))
	case kernel.LifeDelta:
		if l.Agent == kernel.Root && l.Text != "" {
			text := r.redact(l.Text)
			if r.tty {
				text = termtext.Text(text)
			}
			io.WriteString(r.out, text)
			r.midLine = !strings.HasSuffix(l.Text, "\n")
		}
	case kernel.LifeRequestWaiting:
		activity("[%s] waits for a request slot (--max-parallel-requests)\n", path(l.Agent))
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
		activity("[%s] recovered after a lost worker: %s\n", path(l.Agent), l.Text)
	case kernel.LifeTurnEnded:
		if l.Agent == kernel.Root && r.midLine {
			fmt.Fprintln(r.out)
		}
		r.turnEnd(l)
	}
}

// turnEnd prints, on stderr, the line for a root turn that did not
// complete and why (kernel.UIText, the reason, the kernel's detail).
func (r *renderer) turnEnd(l *kernel.Lifecycle) {
	if l.Kind != kernel.LifeTurnEnded || l.Agent != kernel.Root {
		return
	}
	r.midLine = false
	ui := kernel.UIText(l.Outcome, l.Reason)
	if ui == "" {
		return
	}
	line := ui
	if l.Reason != kernel.ReasonNone && l.Reason != kernel.ReasonUserCancel && l.Reason != kernel.ReasonShutdown {
		line += " (" + l.Reason.String() + ")"
	}
	if l.Detail != "" {
		line += "\n  " + strings.ReplaceAll(termtext.Text(r.redact(l.Detail)), "\n", "\n  ")
	}
	io.WriteString(r.errw, r.redact(line)+"\n")
}

// clip puts s on one line and cuts it to at most n bytes, at a rune
// boundary, marking the cut.
func clip(s string, n int) string {
	return textcut.Clip(strings.ReplaceAll(s, "\n", " "), n)
}
