package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/internal/lineread"
	"github.com/escapement/escapement/kernel"
)

// chatHelp lists chat's commands (for /help and chat --help).
const chatHelp = `  /help          list these commands
  /cancel        cancel the running turn (as Ctrl-C does)
  /queue TEXT    start a turn with TEXT once the running turn has ended
  /compact [FOCUS]  summarise the history now (between turns), FOCUS saying what to keep
  /usage         the session's token usage so far
  /exit, /quit   end chat (a running turn is shut down)
  //TEXT         send /TEXT as a message
`

// chat is `escapement chat`.
func (lr *liveRun) chat(ctx context.Context) error {
	return lr.serve(ctx, func(ctx context.Context) error { return lr.repl(ctx, false, "") })
}

// repl is chat's loop: it reads lines until end of input or /exit, handles
// commands, hands messages to the root (or queues them), and acts on
// signals. Its state is the loop's own.
type repl struct {
	lr        *liveRun
	input     *lineread.Reader
	lines     <-chan lineread.Line // input.Lines; nil once the input has ended
	queue     []string             // lines waiting for the running turn to end (--while-busy queue, /queue)
	eof       bool
	inputErr  error // why the input ended early (a read error), once eof
	refused   int   // lines over lineread.MaxLine, or bad --input-format json lines: not acted on
	seenEnded uint64
	json      bool // --input-format json: a line is a protocol input (docs/protocol.md)
	once      bool // run's: the first turn's end ends the loop
	started   bool // a turn ran
	// terminating: a SIGTERM (a service manager, `kill`) asks the process
	// to end, not the turn: the tree is shut down and chat exits 130 once
	// it has.
	terminating bool
}

// repl runs chat's loop, or with once run's with --input-format json or --json PROMPT:
// prompt ("" for none) starts the turn, or the input's first message does.
func (lr *liveRun) repl(ctx context.Context, once bool, prompt string) error {
	input, err := lineread.Start(lr.a.in)
	if err != nil {
		return &exitError{Code: exitCheckFailed, Err: err}
	}
	defer input.Close()
	r := &repl{lr: lr, input: input, lines: input.Lines, json: lr.flags.inputFormat == "json", once: once}
	if prompt != "" && !r.submit(ctx, prompt) {
		return &exitError{Code: exitCheckFailed}
	}
	if busy, _, _, _ := lr.state.Get(); !busy { // a recovered turn may still run
		r.prompt()
	}
	for {
		if done, err := r.wait(ctx); done {
			return err
		}
	}
}

// wait handles what comes first — a line, the end of a turn, a signal, the
// driver's end — and says whether chat ends, with what.
func (r *repl) wait(ctx context.Context) (done bool, err error) {
	lr := r.lr
	select {
	case line, ok := <-r.lines:
		if !ok {
			return r.inputEnded(ctx)
		}
		if line.Size > 0 {
			r.refuse(line)
			return false, nil
		}
		if r.json || r.lr.flags.decide || r.lr.flags.json && protocol.IsDecision([]byte(line.Text)) { // chat --json: a decision line, not a message; run --json PROMPT: decisions only
			return r.protocolInput(ctx, line)
		}
		return r.line(ctx, line.Text)
	case <-lr.notify:
		return r.turnEnded(ctx)
	case sig := <-lr.intr.soft:
		return r.signal(ctx, sig)
	case <-lr.intr.exited:
		return true, &exitError{Code: exitInterrupted}
	case <-lr.driver.Done():
		// Run returned: a shutdown of an idle tree (SIGTERM while
		// idle). Nothing more can run.
		return true, &exitError{Code: exitInterrupted}
	case <-ctx.Done():
		return true, &exitError{Code: exitInterrupted, Err: ctx.Err()}
	}
}

// inputEnded is the end of stdin: chat exits once the running turn and
// the queue are done; no one can decide a call any more (Leave denies).
func (r *repl) inputEnded(ctx context.Context) (done bool, err error) {
	r.eof, r.inputErr, r.lines = true, r.input.Err(), nil
	r.lr.attend.Leave(ctx, r.lr.driver)
	if r.inputErr != nil {
		r.lr.say("%v; no more input is read", r.inputErr)
	}
	if busy, _, _, _ := r.lr.state.Get(); !busy && len(r.queue) == 0 {
		if r.once && !r.started {
			return true, usageErr("stdin ended without a message to run (--input-format json: a line such as {\"message\": \"…\"})")
		}
		return true, r.end()
	}
	return false, nil
}

// turnEnded acts on a turn's end: the next queued line starts, or chat
// ends (after a SIGTERM, or at the end of input), or the prompt shows.
func (r *repl) turnEnded(ctx context.Context) (done bool, err error) {
	lr := r.lr
	busy, _, ended, last := lr.state.Get()
	if busy || ended == r.seenEnded {
		return false, nil
	}
	r.seenEnded = ended
	lr.intr.disarm()
	switch {
	case r.once:
		return true, errors.Join(headless.OutcomeError(last), r.end())
	case r.terminating:
		return true, &exitError{Code: exitInterrupted}
	case r.next(ctx):
		return false, nil
	case r.eof:
		return true, r.end()
	}
	r.prompt()
	return false, nil
}

// prompt shows "> " for the next line (text input only).
func (r *repl) prompt() {
	if !r.json && !r.lr.flags.decide {
		fmt.Fprint(r.lr.errw, "> ")
	}
}

// refuse says that a line over lineread.MaxLine was not sent; chat goes on
// reading, and exits 2 at the end (end).
func (r *repl) refuse(line lineread.Line) {
	r.refused++
	r.lr.say("stdin line %d: %d bytes, over the %d MiB a line may hold; it was not sent (the lines after it are read)", line.N, line.Size, lineread.MaxLine>>20)
	if r.lr.enc != nil {
		_ = r.lr.enc.Encode(protocol.ErrorEvent(protocol.SourceInput, line.N, fmt.Sprintf("%d bytes, over the %d MiB a line may hold", line.Size, lineread.MaxLine>>20)))
	}
	if busy, _, _, _ := r.lr.state.Get(); !busy {
		r.prompt()
	}
}

// end is how chat ends once its input is done (or /exit): exit 2 when a
// line was refused, 1 when the input could not be read to its end, so a
// script never sees success for input chat did not act on.
func (r *repl) end() error {
	switch {
	case r.refused > 0 && (r.json || r.lr.flags.json):
		return &exitError{Code: exitUsage, Err: fmt.Errorf("%d line(s) of input were refused and not acted on", r.refused)}
	case r.refused > 0:
		return &exitError{Code: exitUsage, Err: fmt.Errorf("%d line(s) of input were over the %d MiB a line may hold and were not sent", r.refused, lineread.MaxLine>>20)}
	case r.inputErr != nil:
		return &exitError{Code: exitCheckFailed}
	}
	return nil
}

// line handles one line of input; done means chat ends with err.
func (r *repl) line(ctx context.Context, line string) (done bool, err error) {
	if r.lr.prompt.Take(ctx, line, r.lr.driver, r.lr.say) { // y, n [note] or a: a call waits (adapters/approval)
		return false, nil
	}
	text := strings.TrimSpace(line)
	busy, turn, _, _ := r.lr.state.Get()
	switch {
	case text == "":
		return false, nil
	case strings.HasPrefix(text, "//"):
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

// command runs a chat command (/help, /cancel, /queue, /exit).
func (r *repl) command(ctx context.Context, name, arg string, busy bool, turn uint64) (done bool, err error) {
	lr := r.lr
	switch name {
	case "help", "cancel", "exit", "quit":
		if arg == "" {
			return r.plainCommand(ctx, name, busy, turn)
		}
		lr.say("/%s takes no argument; nothing was sent", name)
	case "queue":
		if arg != "" {
			r.enqueue(ctx, arg, busy)
			return false, nil
		}
		lr.say("/queue needs the text of the next turn: /queue TEXT")
	case "compact", "usage":
		if (headless.ContextCommands{Driver: lr.driver, Turns: &lr.state, View: lr.view, Prior: lr.sess.PriorUsage(), Say: lr.say, Out: lr.errw}).Run(ctx, name, arg) {
			return false, nil // the compaction's turn runs; its end shows the prompt
		}
	default:
		lr.say("unknown command /%s; nothing was sent. /help lists the commands; //%s sends the text /%s", name, name, name)
	}
	if !busy {
		r.prompt()
	}
	return false, nil
}

// plainCommand runs a command without an argument.
func (r *repl) plainCommand(ctx context.Context, name string, busy bool, turn uint64) (done bool, err error) {
	switch {
	case name == "exit" || name == "quit":
		return true, r.end()
	case name == "cancel" && busy:
		r.cancel(ctx, turn)
		return false, nil
	case name == "cancel":
		r.lr.say("no turn is running")
	default:
		r.help()
	}
	if !busy {
		r.prompt()
	}
	return false, nil
}

// help lists the commands and what a line typed while a turn runs does.
func (r *repl) help() {
	busyText := "joins it (--while-busy interject)"
	if r.lr.whileBusy == busyQueue {
		busyText = "starts the next turn once it has ended (--while-busy queue)"
	}
	fmt.Fprintf(r.lr.errw, "Commands (handled here, never sent to the model):\n%sA line typed while a turn runs %s.\n", chatHelp, busyText)
}

// enqueue is /queue TEXT: the next turn, now when the root is idle.
func (r *repl) enqueue(ctx context.Context, text string, busy bool) {
	if !busy && len(r.queue) == 0 {
		if !r.submit(ctx, text) {
			r.prompt()
		}
		return
	}
	r.queue = append(r.queue, text)
	r.lr.say("queued (%d waiting): it starts when the running turn has ended", len(r.queue))
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
	r.started = true
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
	busy, turn, _, _ := lr.state.Get()
	if sig == syscall.SIGTERM || sig == syscall.SIGPIPE {
		r.terminating = true
		r.queue = nil
		lr.intr.arm()
		if err := lr.driver.Shutdown(ctx); err != nil {
			return true, &exitError{Code: exitCheckFailed, Err: err}
		}
		if !busy {
			return true, &exitError{Code: exitInterrupted}
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

// protocolInput acts on one --input-format json line (docs/protocol.md, "Input");
// a line that cannot be acted on is said on stderr (and as an error event
// with --json), and chat or run exits 2 at the end.
func (r *repl) protocolInput(ctx context.Context, line lineread.Line) (done bool, err error) {
	if strings.TrimSpace(line.Text) == "" {
		return false, nil
	}
	in, err := headless.ParseDecisionInput(line.Text, r.lr.flags.decide)
	busy, turn, _, _ := r.lr.state.Get()
	switch {
	case err != nil:
	case in.Kind == protocol.InputMessage || in.Kind == protocol.InputInterject:
		if in.Kind == protocol.InputInterject && busy {
			err = r.lr.driver.Interject(ctx, in.Text)
			break
		}
		r.started = r.started || !busy
		r.message(ctx, in.Text, busy)
	case in.Kind == protocol.InputQueue && r.once:
		err = errors.New("run runs one turn; queue the next in chat")
	case in.Kind == protocol.InputQueue:
		r.enqueue(ctx, in.Text, busy)
	case in.Kind == protocol.InputCancel:
		err = r.cancelInput(ctx, in.Agent, busy, turn)
	default: // approve, deny
		err = protocol.Decide(ctx, r.lr.driver, in)
	}
	if err != nil {
		r.refused++
		r.lr.inputError(line.N, err)
	}
	return false, nil
}

// cancelInput cancels the root's running turn, or the agent path names.
func (r *repl) cancelInput(ctx context.Context, path string, busy bool, turn uint64) error {
	if path == "" {
		if busy {
			r.cancel(ctx, turn)
		}
		return nil
	}
	id, ok := kernel.NoAgent, false
	if err := r.lr.driver.Inspect(ctx, func(k *kernel.Kernel) { id, ok = k.Find(path) }); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no agent %q is running", path)
	}
	r.lr.intr.arm()
	return r.lr.driver.Cancel(ctx, id, 0)
}
