package protocol

import (
	"net/url"
	"strings"
	"time"

	"github.com/escapement/escapement/kernel"
)

// Run is what the started event says about a run.
type Run struct {
	// Version is the escapement build's version.
	Version string
	// Model and Endpoint are the root's model's name and the API root it
	// is asked at (Endpoint keeps no credentials: see EndpointOf).
	Model, Endpoint string
	// Profile is the root's profile ("" for none); Profiles are the names
	// of every profile the tree may run (docs/config.md).
	Profile  string
	Profiles []string
	// Session is the session file's path; Resumed says the run continues
	// it (--resume).
	Session string
	Resumed bool
	// Workspace is the directory the tools work in.
	Workspace string
	// Tools are the names of the tools the root's model is offered.
	Tools []string
	// Limits are the tree's limits.
	Limits kernel.Limits
}

// Started is the event a run opens with.
func Started(r Run) Event {
	limits := map[string]int64{}
	for _, spec := range kernel.LimitSpecs() {
		v := spec.Get(r.Limits)
		if spec.Unit == kernel.UnitDuration {
			limits[spec.Name+"_ms"] = time.Duration(v).Milliseconds()
			continue
		}
		limits[spec.Name] = v
	}
	tools, profiles := append([]string{}, r.Tools...), append([]string{}, r.Profiles...)
	return Event{Type: TypeStarted, Protocol: Version, Version: r.Version, Model: r.Model, Endpoint: EndpointOf(r.Endpoint),
		Profile: r.Profile, Profiles: profiles, Session: r.Session, Resumed: r.Resumed, Workspace: r.Workspace, Tools: tools, Limits: limits}
}

// EndpointOf is an API root without what could be a credential: its
// user information, query and fragment ("https://proxy.example/v1" of
// "https://user:pw@proxy.example/v1?key=…").
func EndpointOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(not a URL)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// Result is the event a run closes with: how its last root turn ended
// (null outcome when no turn ended), that turn's answer, what the run did
// (its root turns and their usage, the model requests it made,
// compactions included), how long it took, and how to continue its
// session. Its duration is the time since NewView.
func (v *View) Result(session string) Event {
	ev := Event{Type: TypeResult, Turns: v.turns, Requests: v.requests, DurationMS: ms(time.Since(v.start)), Session: session, Resume: ResumeCommand(session)}
	total := v.total
	ev.Usage = &total
	if l := v.last; l != nil {
		ev.Outcome, ev.Reason, ev.Detail, ev.Answer = l.Outcome, l.Reason, l.Detail, l.Text
	}
	return ev
}

// LastTurn is the root's last turn_ended event, if one has ended.
func (v *View) LastTurn() (Event, bool) {
	if v.last == nil {
		return Event{}, false
	}
	return *v.last, true
}

// ResumeCommand is the command line that continues the session at path
// (its path quoted for a POSIX shell); the next prompt goes after it.
func ResumeCommand(path string) string {
	return "escapement run --resume " + shellQuote(path)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Error sources.
const (
	// SourceInput: a line of --input-format json input was refused.
	SourceInput = "input"
	// SourceRun: the run said something went wrong outside a turn.
	SourceRun = "run"
)

// ErrorEvent says what went wrong with an input line (line, from 1) or
// the run (line 0).
func ErrorEvent(source string, line int, message string) Event {
	return Event{Type: TypeError, Source: source, Line: line, Message: message}
}
