// Package console shows a live run to a person, from its protocol events
// (adapters/protocol): the root's answer streams to Out, the tree's
// activity — tool calls with their arguments, each call's end with a
// failed tool's reason or a shell's exit status, delegations with the
// child's profile, calls waiting for approval and their ends, compactions,
// retries, timeouts, MCP servers' progress — and a turn's end that did not
// complete go to Err, one line each (docs/live.md, "What run prints").
//
// Everything shown passes Redact. On a terminal every control character is
// escaped (internal/termtext): tool and agent names, arguments, errors and
// answers come from the model, the servers and the tools, and an ESC or a
// CR in them would act on the terminal. The escapement CLI shows `run` and
// `chat` this way; a program on adapters/agent can too.
package console

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/tools"
	"github.com/escapement/escapement/internal/termtext"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// Console shows events. Its fields are set before the first Show. One
// goroutine shows the agents' events (the driver's observer); an event of
// no agent's turn — mcp, error — may be shown from any goroutine, as it
// touches no state (its line is one write).
type Console struct {
	// Out gets the root's answer; Err the activity lines.
	Out, Err io.Writer
	// Redact removes secrets from everything shown (nil: nothing).
	Redact func(string) string
	// Secret is the API key: the end of the answer text that could start
	// it is held back until the next chunk shows it does not (answer).
	Secret string
	// Terminal says Out is a terminal: the answer's control characters
	// other than newline and tab are escaped.
	Terminal bool
	// FinalOnly shows only the root's final answer, once its turn has
	// completed, instead of streaming every message of the turn.
	FinalOnly bool
	// Quiet shows only why a root turn did not complete (--json: the rest
	// is in the events on stdout).
	Quiet bool

	midLine  bool   // the answer printed so far does not end with a newline
	heldBack string // the end of the answer not printed yet
}

// isRoot says the event is the root agent's (its path has no parent; an
// agent named by its id, "#7", is a sub-agent).
func isRoot(ev *protocol.Event) bool {
	return ev.Agent != "" && !strings.Contains(ev.Agent, "/") && !strings.HasPrefix(ev.Agent, "#")
}

// Show shows one event.
func (c *Console) Show(ev protocol.Event) {
	root := isRoot(&ev)
	switch {
	case ev.Type == protocol.TypeDelta && root && !c.FinalOnly && !c.Quiet:
		c.answer(ev.Text, false)
		c.midLine = !strings.HasSuffix(ev.Text, "\n")
	case ev.Type == protocol.TypeRequestStarted && root && c.midLine && !c.Quiet:
		// A new message of the root's turn starts on a line of its own.
		c.answer("\n", true)
		c.midLine = false
	case ev.Type == protocol.TypeTurnEnded && root:
		c.turnEnded(&ev)
	case c.Quiet && ev.Type != protocol.TypeResult:
	default:
		if line := activity(&ev); line != "" {
			c.line(line)
		}
	}
}

// turnEnded ends the answer's line and says why a turn did not complete.
func (c *Console) turnEnded(ev *protocol.Event) {
	c.answer("", true)
	if c.midLine {
		io.WriteString(c.Out, "\n")
	}
	c.midLine = false
	if c.FinalOnly && ev.Outcome == kernel.OutcomeCompleted.String() {
		c.answer(strings.TrimRight(ev.Text, "\n")+"\n", true)
	}
	outcome, _ := kernel.ParseOutcome(ev.Outcome)
	var reason kernel.Reason
	_ = reason.UnmarshalText([]byte(ev.Reason))
	ui := kernel.UIText(outcome, reason)
	if ui == "" {
		return
	}
	if reason != kernel.ReasonNone && reason != kernel.ReasonUserCancel && reason != kernel.ReasonShutdown {
		ui += " (" + ev.Reason + ")"
	}
	if ev.Detail != "" {
		ui += "\n  " + strings.ReplaceAll(termtext.Text(c.redact(ev.Detail)), "\n", "\n  ")
	}
	io.WriteString(c.Err, c.redact(ui)+"\n")
}

// Say prints a notice on Err, "escapement: " first, redacted and escaped.
func (c *Console) Say(format string, args ...any) {
	io.WriteString(c.Err, termtext.Text(c.redact("escapement: "+fmt.Sprintf(format, args...)))+"\n")
}

// line prints one activity line on Err.
func (c *Console) line(s string) {
	io.WriteString(c.Err, termtext.Line(c.redact(s))+"\n")
}

func (c *Console) redact(s string) string {
	if c.Redact == nil {
		return s
	}
	return c.Redact(s)
}

// activity is the Err line for an event of the tree's activity ("" for one
// that is not shown).
func activity(ev *protocol.Event) string {
	switch ev.Type {
	case protocol.TypeMCP:
		return mcpLine(ev)
	case protocol.TypeError:
		return "escapement: " + ev.Message
	case protocol.TypeResult:
		if ev.Session != "" && ev.Session != os.DevNull {
			return "escapement: continue this session with: " + ev.Resume + ` "…"`
		}
		return ""
	}
	if line := agentActivity(ev); line != "" {
		return "[" + ev.Agent + "] " + line
	}
	return ""
}

// agentActivity is what an agent did, for its line ("" for an event that
// is not shown).
func agentActivity(ev *protocol.Event) string {
	switch ev.Type {
	case protocol.TypeToolStarted:
		return ev.Tool + " " + clip(ev.Arguments, 160)
	case protocol.TypeRetry:
		return fmt.Sprintf("retry %d in %v: %s", ev.Attempt, time.Duration(ev.DelayMS)*time.Millisecond, clip(ev.Cause, 160))
	case protocol.TypeRequestWaiting:
		return waiting(ev)
	case protocol.TypeDelegated:
		return delegated(ev)
	case protocol.TypeApprovalRequested, protocol.TypeApprovalResolved:
		return approval(ev)
	case protocol.TypeCompactionStarted:
		return fmt.Sprintf("compacting its history (%s, about %d tokens)", ev.Why, ev.Estimate)
	case protocol.TypeCompacted:
		return fmt.Sprintf("compacted: %d messages summarised", ev.Summarised)
	case protocol.TypeCallFinished:
		return callFinished(ev)
	case protocol.TypeCallDropped:
		return "dropped half-streamed call " + ev.Tool
	case protocol.TypeTimedOut:
		return ev.Reason
	case protocol.TypeRecovered:
		return "recovered after a crash: " + ev.Text
	}
	return ""
}

// waiting says a request waits for a slot: the agent's, or its
// compaction's.
func waiting(ev *protocol.Event) string {
	if ev.Compaction {
		return "its compaction waits for a request slot (--max-parallel-requests)"
	}
	return "waits for a request slot (--max-parallel-requests)"
}

// delegated names the child spawned, with its profile.
func delegated(ev *protocol.Event) string {
	if ev.Profile != "" {
		return fmt.Sprintf("delegate → %s (profile %s): %s", ev.Child, ev.Profile, clip(ev.Task, 160))
	}
	return fmt.Sprintf("delegate → %s: %s", ev.Child, clip(ev.Task, 160))
}

// callFinished says how a call ended: a delegation's outcome, a shell's
// exit status, a failed tool's reason (the first line of what the model
// was told, without the "error: NAME:" it starts with).
func callFinished(ev *protocol.Event) string {
	switch ev.Status {
	case kernel.CallChild.String():
		return fmt.Sprintf("← %s: %s", ev.Child, ev.Outcome)
	case kernel.CallOK.String():
		if ev.Tool == "shell" {
			if exit := tools.ShellExit(ev.Result); exit != "" {
				return "← shell " + exit
			}
		}
		return "← " + ev.Tool + " ok"
	case kernel.CallError.String():
		first, _, _ := strings.Cut(ev.Result, "\n")
		first = strings.TrimPrefix(strings.TrimPrefix(first, "error: "), ev.Tool+": ")
		return fmt.Sprintf("← %s error: %s", ev.Tool, clip(first, 160))
	}
	if ev.Reason == "" {
		return fmt.Sprintf("← %s %s", ev.Tool, ev.Status)
	}
	return fmt.Sprintf("← %s %s (%s)", ev.Tool, ev.Status, ev.Reason)
}

// approval says a call waits for a person's decision, or how its wait
// ended.
func approval(ev *protocol.Event) string {
	if ev.Type == protocol.TypeApprovalRequested {
		ends := "then it expires"
		if !ev.Expires {
			ends = "until the turn's deadline"
		}
		return fmt.Sprintf("%s %s waits for approval (call %s, digest %s; %v, %s)", ev.Tool, clip(ev.Arguments, 160), ev.CallID, ev.Digest,
			time.Duration(ev.EndsInMS)*time.Millisecond, ends)
	}
	line := fmt.Sprintf("%s %s (call %s)", ev.Tool, ev.Approval, ev.CallID)
	if ev.Note != "" {
		line += ": " + clip(ev.Note, 160)
	}
	return line
}

// mcpLine shows an MCP server's event: a call's progress, a server's start
// or stop ("" for the others).
func mcpLine(ev *protocol.Event) string {
	switch ev.MCPEvent {
	case "progress":
		of := "?"
		if ev.Progress != nil {
			of = fmt.Sprintf("%g", *ev.Progress)
		}
		if ev.Total > 0 {
			of += fmt.Sprintf("/%g", ev.Total)
		}
		line := fmt.Sprintf("[%s] %s progress %s", ev.Agent, ev.Tool, of)
		if ev.Message != "" {
			line += ": " + clip(ev.Message, 160)
		}
		return line
	case "server_stopped":
		return fmt.Sprintf("escapement: MCP server %s stopped: %s; it is restarted on its next use", ev.Server, clip(ev.Detail, 400))
	case "server_started":
		return fmt.Sprintf("escapement: MCP server %s %s", ev.Server, clip(ev.Detail, 400))
	}
	return ""
}

// answer prints the root's answer on Out, redacted. A key the model
// repeats arrives in pieces, each too short to be recognised, so the end
// of the text that could be part of a run of the key (the longest suffix
// that is a substring of it) is held back, unredacted, until a chunk shows
// where the run ends, or the turn ends (final). Whatever run touches the
// cut lies wholly in the part held back, so redacting the two parts apart
// misses nothing.
//
// On a terminal the text's control characters other than newline and tab
// are escaped (termtext.Text), and a last character cut in two by the hold
// back waits with it, so its bytes are not escaped as broken UTF-8.
func (c *Console) answer(text string, final bool) {
	text = c.heldBack + text
	c.heldBack = ""
	if !final && len(c.Secret) >= 4 {
		for k := min(len(c.Secret), len(text)); k > 0; k-- {
			if strings.Contains(c.Secret, text[len(text)-k:]) {
				text, c.heldBack = text[:len(text)-k], text[len(text)-k:]
				break
			}
		}
	}
	if c.Terminal && !final {
		for j := 1; j <= min(utf8.UTFMax, len(text)); j++ {
			if last := len(text) - j; utf8.RuneStart(text[last]) {
				if !utf8.FullRuneInString(text[last:]) {
					text, c.heldBack = text[:last], text[last:]+c.heldBack
				}
				break
			}
		}
	}
	if text == "" {
		return
	}
	text = c.redact(text)
	if c.Terminal {
		text = termtext.Text(text)
	}
	io.WriteString(c.Out, text)
}

// clip puts s on one line and cuts it to at most n bytes, at a rune
// boundary, marking the cut.
func clip(s string, n int) string {
	return textcut.Clip(strings.ReplaceAll(s, "\n", " "), n)
}
