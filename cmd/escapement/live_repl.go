package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/kernel"
)

// chatHelp lists chat's commands (for /help and chat --help).
const chatHelp = `  /help          list these commands
  /cancel        cancel the running turn (as Ctrl-C does)
  /queue TEXT    start a turn with TEXT once the running turn has ended
  /exit, /quit   end chat (a running turn is shut down)
  //TEXT         send /TEXT as a message
`

// commandRE is a line chat handles itself: a slash, a word, then the rest.
// Other lines that start with a slash ("/usr/lib is missing") are messages.
var commandRE = regexp.MustCompile(`^/([A-Za-z][A-Za-z0-9_-]*)(?:\s+(.*))?$`)

// chat is `escapement chat`.
func (lr *liveRun) chat(ctx context.Context) error {
	return lr.serve(ctx, lr.repl)
}

// repl is chat's loop: it reads lines until end of input or /exit, handles
// commands, hands messages to the root (or queues them), and acts on
// signals. Its state is the loop's own.
type repl struct {
	lr        *liveRun
	queue     []string // lines waiting for the running turn to end (--while-busy queue, /queue)
	eof       bool
	inputErr  error // why the input ended early (a read error), once eof
	refused   int   // lines over MaxInputLine, not sent
	seenEnded uint64
	// terminating: a SIGTERM (a service manager, `kill`) asks the process
	// to end, not the turn: the tree is shut down and chat exits 130 once
	// it has.
	terminating bool
}

func (lr *liveRun) repl(ctx context.Context) error {
	input, err := startInput(lr.a.in)
	if err != nil {
		return &exitError{code: exitCheckFailed, err: err}
	}
	defer input.close()
	r := &repl{lr: lr}
	lines := input.lines
	if busy, _, _, _ := lr.state.get(); !busy { // a recovered turn may still run
		r.prompt()
	}
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				r.eof, r.inputErr, lines = true, input.err, nil
				if input.err != nil {
					lr.say("%v; no more input is read", input.err)
				}
				if busy, _, _, _ := lr.state.get(); !busy && len(r.queue) == 0 {
					return r.end()
				}
				continue // end of input exits once the running turn and the queue are done
			}
			if line.size > 0 {
				r.refuse(line)
				continue
			}
			if done, err := r.line(ctx, line.text); done {
				return err
			}
		case <-lr.notify:
			busy, _, ended, _ := lr.state.get()
			if busy || ended == r.seenEnded {
				continue
			}
			r.seenEnded = ended
			lr.intr.disarm()
			if r.terminating {
				return &exitError{code: exitInterrupted}
			}
			if r.next(ctx) {
				continue
			}
			if r.eof {
				return r.end()
			}
			r.prompt()
		case sig := <-lr.intr.soft:
			if done, err := r.signal(ctx, sig); done {
				return err
			}
		case <-lr.intr.exited:
			return &exitError{code: exitInterrupted}
		case <-lr.driver.Done():
			// Run returned: a shutdown of an idle tree (SIGTERM while
			// idle). Nothing more can run.
			return &exitError{code: exitInterrupted}
		case <-ctx.Done():
			return &exitError{code: exitInterrupted, err: ctx.Err()}
		}
	}
}

func (r *repl) prompt() { fmt.Fprint(r.lr.errw, "> ") }

// refuse says that a line over MaxInputLine was not sent; chat goes on
// reading, and exits 2 at the end (end).
func (r *repl) refuse(line inputLine) {
	r.refused++
	r.lr.say("stdin line %d: %d bytes, over the %d MiB a line may hold; it was not sent (the lines after it are read)", line.n, line.size, MaxInputLine>>20)
	if busy, _, _, _ := r.lr.state.get(); !busy {
		r.prompt()
	}
}

// end is how chat ends once its input is done (or /exit): exit 2 when a
// line was refused, 1 when the input could not be read to its end, so a
// script never sees success for input chat did not act on.
func (r *repl) end() error {
	switch {
	case r.refused > 0:
		return &exitError{code: exitUsage, err: fmt.Errorf("%d line(s) of input were over the %d MiB a line may hold and were not sent", r.refused, MaxInputLine>>20)}
	case r.inputErr != nil:
		return &exitError{code: exitCheckFailed}
	}
	return nil
}

// line handles one line of input; done means chat ends with err.
func (r *repl) line(ctx context.Context, line string) (done bool, err error) {
	lr := r.lr
	text := strings.TrimSpace(line)
	busy, turn, _, _ := lr.state.get()
	if text == "" {
		return false, nil
	}
	if strings.HasPrefix(text, "//") {
		r.message(ctx, text[1:], busy)
		return false, nil
	}
	m := commandRE.FindStringSubmatch(text)
	if m == nil {
		r.message(ctx, line, busy)
		return false, nil
	}
	name, arg := m[1], strings.TrimSpace(m[2])
	switch {
	case name == "help" && arg == "":
		busyText := "joins it (--while-busy interject)"
		if lr.whileBusy == busyQueue {
			busyText = "starts the next turn once it has ended (--while-busy queue)"
		}
		fmt.Fprintf(lr.errw, "Commands (handled here, never sent to the model):\n%sA line typed while a turn runs %s.\n", chatHelp, busyText)
	case name == "cancel" && arg == "":
		if !busy {
			lr.say("no turn is running")
			break
		}
		r.cancel(ctx, turn)
		return false, nil
	case name == "queue":
		if arg == "" {
			lr.say("/queue needs the text of the next turn: /queue TEXT")
			break
		}
		if !busy && len(r.queue) == 0 {
			if !r.submit(ctx, arg) {
				r.prompt()
			}
			return false, nil
		}
		r.queue = append(r.queue, arg)
		lr.say("queued (%d waiting): it starts when the running turn has ended", len(r.queue))
		return false, nil
	case (name == "exit" || name == "quit") && arg == "":
		return true, r.end()
	case name == "help" || name == "cancel" || name == "exit" || name == "quit":
		lr.say("/%s takes no argument; nothing was sent", name)
	default:
		lr.say("unknown command /%s; nothing was sent. /help lists the commands; //%s sends the text /%s", name, name, name)
	}
	if !busy {
		r.prompt()
	}
	return false, nil
}

// message hands text to the root: a new turn when it is idle; while a turn
// runs, an interjection (--while-busy interject) or the end of the queue.
// Lines already queued go first: the queue is only non-empty while a turn
// runs or its end is about to be handled (repl's notify case).
func (r *repl) message(ctx context.Context, text string, busy bool) {
	if len(r.queue) > 0 || busy && r.lr.whileBusy == busyQueue {
		r.queue = append(r.queue, text)
		return
	}
	if err := r.lr.driver.Say(ctx, text); err != nil {
		r.lr.say("%v", err)
		if !busy {
			r.prompt()
		}
	}
}

// next starts a turn with the first queued line that the kernel accepts;
// false when the queue is empty.
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

// submit starts the next turn with text (the root is idle, or still
// settling an interrupted turn: the kernel then queues it).
func (r *repl) submit(ctx context.Context, text string) bool {
	if err := r.lr.driver.Submit(ctx, text); err != nil {
		r.lr.say("%v", err)
		return false
	}
	return true
}

// cancel cancels turn; the next Ctrl-C before it has ended exits at once.
func (r *repl) cancel(ctx context.Context, turn uint64) {
	r.lr.intr.arm()
	if err := r.lr.driver.Cancel(ctx, kernel.Root, turn); err != nil && !errors.Is(err, live.ErrStopped) {
		r.lr.say("%v", err)
	}
}

// signal acts on a signal the interrupt reader passed on (it exits by
// itself on one that follows a cancel or a shutdown).
func (r *repl) signal(ctx context.Context, sig os.Signal) (done bool, err error) {
	lr := r.lr
	busy, turn, _, _ := lr.state.get()
	if sig == syscall.SIGTERM {
		r.terminating = true
		r.queue = nil
		lr.intr.arm()
		if err := lr.driver.Shutdown(ctx); err != nil {
			return true, &exitError{code: exitCheckFailed, err: err}
		}
		if !busy {
			return true, &exitError{code: exitInterrupted}
		}
		return false, nil
	}
	if !busy {
		lr.intr.disarm()
		fmt.Fprintln(lr.errw, "\n(no turn is running; Ctrl-D or /exit exits)")
		r.prompt()
		return false, nil
	}
	r.cancel(ctx, turn)
	return false, nil
}
