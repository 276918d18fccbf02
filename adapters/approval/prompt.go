package approval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/termtext"
	"github.com/escapement/escapement/internal/textcut"
)

// argsShown bounds the arguments a question shows (a write_file call's
// content may be long; the activity line and the --json event have them).
const argsShown = 2000

// Prompt asks a person at a terminal about the calls that wait for
// approval, one at a time, oldest first (docs/live.md, "Approvals"): Show
// follows the run's events and puts the question on Err when a call comes
// first in line; Answer reads the person's line — y (approve), n [note]
// (deny; the model reads the note) or a (approve, and every call of that
// tool for the rest of the session) — as the protocol's decision, which
// the host hands to the driver (protocol.Decide). The run's other output
// keeps flowing meanwhile. A nil *Prompt asks nothing. Show runs on the
// driver's goroutine, Answer on the host's: the waits are behind a mutex.
type Prompt struct {
	// Err gets the questions; Redact removes secrets from them (nil:
	// nothing).
	Err    io.Writer
	Redact func(string) string

	mu    sync.Mutex
	waits []protocol.Event // approval_requested, in the order asked
}

// NewPrompt is the prompt of a run whose stdin is a person at a terminal
// (on), writing its questions to errw; nil — asking nothing — otherwise.
func NewPrompt(on bool, errw io.Writer, redact func(string) string) *Prompt {
	if !on {
		return nil
	}
	return &Prompt{Err: errw, Redact: redact}
}

// Take takes line as the answer to the first waiting call, if it is one
// (Answer), and hands the decision to d (protocol.Decide); say gets why a
// line was no answer or a decision was refused. It reports whether the
// line was taken: if not, the host handles it as it would otherwise.
func (p *Prompt) Take(ctx context.Context, line string, d protocol.Decider, say func(format string, args ...any)) bool {
	in, ok, err := p.Answer(line)
	if !ok {
		return false
	}
	if err == nil {
		err = protocol.Decide(ctx, d, in)
	}
	if err != nil {
		say("%v", err)
	}
	return true
}

// ErrAnswer is wrapped by Answer's refusal of a line that is no answer.
var ErrAnswer = errors.New("a call waits for your decision")

// Show follows one event of the run: a call that starts to wait is queued
// (and asked about when it comes first), one whose wait ended leaves the
// queue (and the next is asked about).
func (p *Prompt) Show(ev protocol.Event) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Type {
	case protocol.TypeApprovalRequested:
		p.waits = append(p.waits, ev)
		if len(p.waits) == 1 {
			p.ask()
		}
	case protocol.TypeApprovalResolved:
		for i, w := range p.waits {
			if w.Agent == ev.Agent && w.CallID == ev.CallID {
				p.waits = append(p.waits[:i], p.waits[i+1:]...)
				if i == 0 && len(p.waits) > 0 {
					p.ask()
				}
				break
			}
		}
	}
}

// ask puts the question about the first waiting call on Err.
func (p *Prompt) ask() {
	w := p.waits[0]
	more := ""
	if n := len(p.waits) - 1; n > 0 {
		more = fmt.Sprintf(" (%d more wait)", n)
	}
	q := fmt.Sprintf("approve? %s wants to call %s%s\n  arguments: %s\n  y = yes · n [note] = no (the model reads the note) · a = yes to every %s call this session: ",
		w.Agent, w.Tool, more, textcut.Clip(w.Arguments, argsShown), w.Tool)
	if p.Redact != nil {
		q = p.Redact(q)
	}
	io.WriteString(p.Err, termtext.Text(q))
}

// Answer reads line as the answer to the first waiting call. ok is false
// when no call waits or the line is a chat command (it starts with /):
// the host handles the line as it would otherwise. A line that is no
// answer is refused (ErrAnswer, saying what would be). in is the
// decision as a protocol input line would say it, naming the call's agent
// and, for an approval, its arguments' digest.
func (p *Prompt) Answer(line string) (in protocol.Input, ok bool, err error) {
	text := strings.TrimSpace(line)
	if p == nil || strings.HasPrefix(text, "/") {
		return protocol.Input{}, false, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.waits) == 0 {
		return protocol.Input{}, false, nil
	}
	w := p.waits[0]
	in = protocol.Input{Kind: protocol.InputApprove, Agent: w.Agent, CallID: w.CallID, Digest: w.Digest}
	word, note, _ := strings.Cut(text, " ")
	switch strings.ToLower(word) {
	case "y", "yes":
	case "a", "always":
		in.For = "tool"
	case "n", "no":
		in.Kind, in.Note = protocol.InputDeny, strings.TrimSpace(note)
	default:
		return protocol.Input{}, true, fmt.Errorf("%w (%s's call of %s): answer y, n [note] or a; /cancel cancels the turn", ErrAnswer, w.Agent, w.Tool)
	}
	return in, true, nil
}

// Waiting says how many calls wait for an answer.
func (p *Prompt) Waiting() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waits)
}
