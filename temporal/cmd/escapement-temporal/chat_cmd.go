package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/remote"
)

// chatHelp lists chat's commands: the escapement CLI's, with /exit
// leaving the tree running and /shutdown ending it.
const chatHelp = `  /help          list these commands
  /cancel        cancel the running turn (as Ctrl-C does)
  /queue TEXT    start a turn with TEXT once the running turn has ended
  /exit, /quit   leave chat; the tree's workflow goes on (continue it with --workflow ID)
  /shutdown      shut the tree down and end its workflow
  //TEXT         send /TEXT as a message
`

func newChatCmd(a *app) *cobra.Command {
	f := &clientFlags{}
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "A headless REPL on a tree that runs on Temporal",
		Long: `Chat with the root agent of a tree whose workflow runs on Temporal: each
line on stdin is a message. A line typed while a turn runs interjects (joins
the running turn) or, with --while-busy queue (the default when stdin is not
a terminal), starts the next turn once the running one has ended.

Commands (a line whose first word starts with /, handled here, never sent):
` + chatHelp + `
Ctrl-C cancels the running turn and returns to the prompt; a second Ctrl-C
before the turn has ended exits at once; Ctrl-D (end of input) exits after
the running turn and any queued lines; SIGTERM shuts the tree down (reason
shutdown), ends the workflow and exits 130. Leaving chat otherwise leaves
the workflow running: --workflow ID attaches to it again, with its whole
conversation, from any machine.

The model, the endpoint and the tools are the worker's (escapement-temporal
worker).`,
		Example: `  escapement-temporal chat --temporal localhost:7233
  escapement-temporal chat --temporal localhost:7233 --workflow escapement-1a2b3c4d5e6f`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(cmd); err != nil {
				return err
			}
			rr, err := connect(cmd.Context(), a, f)
			if err != nil {
				return err
			}
			defer rr.close()
			return rr.chat(cmd.Context())
		},
	}
	f.register(cmd, true)
	return cmd
}

// repl is chat's loop state.
type repl struct {
	rr        *remoteRun
	in        *interrupts
	whileBusy string
	queue     []string
	eof       bool
	seenEnded uint64
	// terminating: SIGTERM shut the tree down; chat exits 130 once the
	// running turn has ended.
	terminating bool
}

func (rr *remoteRun) chat(ctx context.Context) error {
	sigs, stop := rr.a.signals()
	defer stop()
	r := &repl{rr: rr, in: &interrupts{sigs: sigs}, whileBusy: rr.whileBusy()}
	quit := make(chan struct{})
	defer close(quit)
	lines := readLines(rr.a.in, quit)
	if busy, _, _, _ := rr.state.get(); !busy {
		r.prompt()
	}
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				lines = nil
				if r.endOfInput() {
					return nil
				}
				continue
			}
			if done, err := r.line(ctx, line); done {
				return err
			}
		case <-rr.notify:
			if done, err := r.stateChanged(ctx); done {
				return err
			}
		case <-rr.ended:
			if rr.endErr != nil {
				return &exitError{Code: exitCheckFailed, Err: rr.endErr}
			}
			return &exitError{Code: exitInterrupted}
		case sig := <-r.in.sigs:
			if done, err := r.signal(ctx, sig); done {
				return err
			}
		case <-ctx.Done():
			return &exitError{Code: exitInterrupted, Err: ctx.Err()}
		}
	}
}

// endOfInput notes that stdin has ended (Ctrl-D); true means chat ends
// now: no turn runs and nothing is queued.
func (r *repl) endOfInput() bool {
	r.eof = true
	busy, _, _, _ := r.rr.state.get()
	return !busy && len(r.queue) == 0
}

// stateChanged acts on the root's new state: once a turn has ended it
// starts the next queued turn, or exits (after SIGTERM or the end of
// input), or prompts; done means chat ends with err.
func (r *repl) stateChanged(ctx context.Context) (done bool, err error) {
	busy, _, ended, _ := r.rr.state.get()
	if busy || ended == r.seenEnded {
		return false, nil
	}
	r.seenEnded = ended
	r.in.armed = false
	if r.terminating {
		return true, &exitError{Code: exitInterrupted}
	}
	if r.next(ctx) {
		return false, nil
	}
	if r.eof {
		return true, nil
	}
	r.prompt()
	return false, nil
}

// readLines reads stdin's lines on a goroutine of its own, closing the
// channel at the end of input; it returns once quit is closed. It may
// stay blocked in a read of a terminal when chat ends: it holds nothing
// and never blocks the exit.
func readLines(in io.Reader, quit <-chan struct{}) <-chan string {
	lines := make(chan string)
	go func() { // ends at EOF or quit; a read of a terminal may outlive chat (above)
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-quit:
				return
			}
		}
	}()
	return lines
}

func (r *repl) prompt() { fmt.Fprint(r.rr.errw, "> ") }

// line handles one line of input; done means chat ends with err.
func (r *repl) line(ctx context.Context, line string) (done bool, err error) {
	text := strings.TrimSpace(line)
	busy, turn, _, _ := r.rr.state.get()
	if text == "" {
		return false, nil
	}
	if strings.HasPrefix(text, "//") {
		r.message(ctx, text[1:], busy)
		return false, nil
	}
	name, arg, ok := headless.ChatCommand(text)
	if !ok {
		r.message(ctx, line, busy)
		return false, nil
	}
	return r.command(ctx, name, arg, busy, turn)
}

// command runs one of chat's commands (chatHelp); done means chat ends
// with err. A command that leaves the root idle shows the prompt again.
func (r *repl) command(ctx context.Context, name, arg string, busy bool, turn uint64) (done bool, err error) {
	rr := r.rr
	switch {
	case name == "queue":
		r.queueCommand(ctx, arg, busy)
		return false, nil
	case !takesNoArgument(name):
		rr.r.say("unknown command /%s; nothing was sent. /help lists the commands; //%s sends the text /%s", name, name, name)
	case arg != "":
		rr.r.say("/%s takes no argument; nothing was sent", name)
	case name == "help":
		fmt.Fprintf(rr.errw, "Commands (handled here, never sent to the model):\n%s", chatHelp)
	case name == "cancel":
		r.cancelCommand(ctx, busy, turn)
		return false, nil
	case name == "shutdown":
		return r.shutdown(ctx, busy)
	default: // exit, quit
		if busy {
			rr.r.say("the running turn goes on in workflow %s", rr.s.ID())
		}
		return true, nil
	}
	if !busy {
		r.prompt()
	}
	return false, nil
}

// takesNoArgument: name is one of chat's commands other than /queue, the
// only one that takes an argument.
func takesNoArgument(name string) bool {
	switch name {
	case "help", "cancel", "exit", "quit", "shutdown":
		return true
	}
	return false
}

// cancelCommand is /cancel: it cancels the running turn, as Ctrl-C does.
func (r *repl) cancelCommand(ctx context.Context, busy bool, turn uint64) {
	if !busy {
		r.rr.r.say("no turn is running")
		r.prompt()
		return
	}
	r.cancel(ctx, turn)
}

// queueCommand is /queue TEXT: a turn with TEXT at once when the root is
// idle and nothing waits, else at the end of the queue.
func (r *repl) queueCommand(ctx context.Context, text string, busy bool) {
	switch {
	case text == "":
		r.rr.r.say("/queue needs the text of the next turn: /queue TEXT")
		if !busy {
			r.prompt()
		}
	case !busy && len(r.queue) == 0:
		if !r.submit(ctx, text) {
			r.prompt()
		}
	default:
		r.queue = append(r.queue, text)
		r.rr.r.say("queued (%d waiting): it starts when the running turn has ended", len(r.queue))
	}
}

// message hands text to the root: a new turn when it is idle; while a turn
// runs, an interjection (--while-busy interject) or the end of the queue.
func (r *repl) message(ctx context.Context, text string, busy bool) {
	if len(r.queue) > 0 || busy && r.whileBusy == busyQueue {
		r.queue = append(r.queue, text)
		return
	}
	acc, err := r.rr.s.Say(ctx, text)
	if err != nil {
		r.rr.r.say("%v", err)
		if !busy {
			r.prompt()
		}
		return
	}
	r.rr.accepted(acc)
}

// next starts a turn with the first queued line the tree accepts; false
// when the queue is empty.
func (r *repl) next(ctx context.Context) bool {
	for len(r.queue) > 0 {
		text := r.queue[0]
		r.queue = r.queue[1:]
		if r.submit(ctx, text) {
			return true
		}
	}
	return false
}

func (r *repl) submit(ctx context.Context, text string) bool {
	acc, err := r.rr.s.Submit(ctx, text)
	if err != nil {
		r.rr.r.say("%v", err)
		return false
	}
	r.rr.accepted(acc)
	return true
}

// cancel cancels turn; the next Ctrl-C before it has ended exits at once.
func (r *repl) cancel(ctx context.Context, turn uint64) {
	r.in.armed = true
	if _, err := r.rr.s.Cancel(ctx, kernel.Root, turn); err != nil && !errors.Is(err, remote.ErrEnded) {
		r.rr.r.say("%v", err)
	}
}

// shutdown ends the tree's workflow; chat exits 130 once a running turn
// has ended (at once when none runs).
func (r *repl) shutdown(ctx context.Context, busy bool) (bool, error) {
	r.terminating, r.queue = true, nil
	r.in.armed = true
	if err := r.rr.s.Shutdown(ctx); err != nil {
		return true, &exitError{Code: exitCheckFailed, Err: err}
	}
	if !busy {
		return true, &exitError{Code: exitInterrupted}
	}
	return false, nil
}

// signal acts on a signal: while armed (a cancel or shutdown is under
// way) it exits at once; SIGTERM shuts the tree down; Ctrl-C cancels the
// running turn.
func (r *repl) signal(ctx context.Context, sig os.Signal) (done bool, err error) {
	if r.in.armed {
		return true, &exitError{Code: exitInterrupted}
	}
	busy, turn, _, _ := r.rr.state.get()
	if sig == syscall.SIGTERM {
		return r.shutdown(ctx, busy)
	}
	if !busy {
		fmt.Fprintln(r.rr.errw, "\n(no turn is running; Ctrl-D or /exit exits)")
		r.prompt()
		return false, nil
	}
	r.cancel(ctx, turn)
	return false, nil
}
