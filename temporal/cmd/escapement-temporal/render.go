package main

import (
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/escapement/escapement/adapters/console"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/buildinfo"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/kernel"
	tprotocol "github.com/escapement/escapement/temporal/protocol"
)

// renderer shows a tree's lifecycle records as the escapement CLI shows a
// local run: each record becomes its protocol event (adapters/protocol,
// from the record and the query page's context: the agents' paths, the
// calls' arguments and results), and the events go to adapters/console —
// the root's answer on stdout, the tree's activity (a failed tool's
// reason, a shell's exit status) and a turn's end that did not complete
// on stderr — and, with --json, to stdout as protocol JSON Lines, opened
// by a started event and closed by a result (docs/temporal.md, "The event
// protocol from a workflow"). Only the follower's goroutine shows records;
// the command's goroutine says notices and, once the follower has
// stopped, the result.
type renderer struct {
	con  *console.Console
	enc  *protocol.Encoder // --json; nil otherwise
	view *protocol.View

	// The run as the started and result events name it: the workflow is
	// the session; resumed says the client attached to a running tree;
	// resume is the command that continues it.
	session, resume string
	resumed         bool
	started         bool
}

// say prints one notice on stderr, redacted, its control characters
// escaped (its arguments may be a server's or a tool's text).
func (r *renderer) say(format string, args ...any) { r.con.Say(format, args...) }

// emit writes ev on stdout with --json and shows it on the console.
func (r *renderer) emit(ev protocol.Event) {
	if r.enc != nil {
		_ = r.enc.Encode(ev)
	}
	r.con.Show(ev)
}

// start emits the started event once, from the first page of a run that
// has built its kernel (its tools are known then). The model, the
// endpoint and the workspace are the worker's, which the client does not
// know: they are empty.
func (r *renderer) start(p *tprotocol.Page) {
	if r.started || !p.Ready {
		return
	}
	r.started = true
	ev := protocol.Started(protocol.Run{Version: buildinfo.Version(), Session: r.session, Resumed: r.resumed, Tools: p.Tools, Limits: p.Limits})
	ev.Endpoint = ""
	r.emit(ev)
}

// show emits the event of one record of page p.
func (r *renderer) show(l *kernel.Lifecycle, p *tprotocol.Page) {
	r.start(p)
	r.emit(r.view.Record(l, protocol.Context{Paths: p.Paths, Args: p.Args, Results: p.Results, Expires: p.Expires}))
}

// result emits the result event: the last root turn this client saw end,
// the usage and requests of what it saw, the time since it began; the
// session is the workflow's id and resume the command that continues it.
// Its console line says how to continue the tree.
func (r *renderer) result() {
	ev := r.view.Result(r.session)
	ev.Resume = r.resume
	r.emit(ev)
}

// resumeCommand is the command line that continues workflow id on the
// service, namespace and task queue c names.
func resumeCommand(c *connFlags, id string) string {
	cmd := "escapement-temporal run --temporal " + shellQuote(c.hostPort)
	if c.namespace != "default" {
		cmd += " --namespace " + shellQuote(c.namespace)
	}
	if c.taskQueue != tprotocol.DefaultTaskQueue {
		cmd += " --task-queue " + shellQuote(c.taskQueue)
	}
	return cmd + " --workflow " + shellQuote(id)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// newRenderer shows on out and errw; with json, events go to out as JSON
// Lines and the console only says why a turn did not complete. Everything
// shown is redacted of the API key in $OPENAI_API_KEY, should the client's
// environment hold the one the worker uses.
func newRenderer(out, errw io.Writer, json, tty bool) *renderer {
	key := os.Getenv("OPENAI_API_KEY")
	red := redact.New(key).Redact
	r := &renderer{view: protocol.NewView(),
		con: &console.Console{Out: out, Err: errw, Redact: red, Secret: key, Terminal: tty, Quiet: json}}
	if json {
		r.enc = protocol.NewEncoder(out, red)
	}
	return r
}

// isTerminal says w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
