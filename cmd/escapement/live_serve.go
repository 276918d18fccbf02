package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/internal/termtext"
	"github.com/escapement/escapement/kernel"
)

// stopSlack is how much longer than the grace period a command waits for
// the driver once it has shut the tree down. The kernel makes the tree
// quiescent by the shutdown's time + grace (I3) and the driver does not
// wait for goroutines it abandoned, so Run is late only when something
// outside the kernel is stuck (an observer blocked writing to a stdout
// nobody reads); the process then exits without it.
const stopSlack = time.Second

// interrupts reads the process's signals for the whole life of a live
// command — while the tree runs, while it shuts down, and while the command
// waits for the driver to stop — so a signal is never left unread. A
// signal goes to the command's loop (soft) and arms the reader: until the
// loop disarms it (the signal only explained something, the turn it
// cancelled has ended), another signal is the user insisting and exits at
// once from this goroutine (hardExit), even while the loop is blocked.
type interrupts struct {
	soft     chan os.Signal
	armed    atomic.Bool
	exited   chan struct{} // closed after a hard exit
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// startInterrupts reads sigs; gone closing (stdout's reader went away)
// counts as a SIGPIPE that asks for a shutdown, never as an insistence.
func startInterrupts(sigs <-chan os.Signal, gone <-chan struct{}, hardExit func()) *interrupts {
	in := &interrupts{soft: make(chan os.Signal, 1), exited: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go in.read(sigs, gone, hardExit) // owned: close waits for it
	return in
}

func (in *interrupts) read(sigs <-chan os.Signal, gone <-chan struct{}, hardExit func()) {
	defer close(in.done)
	for {
		select {
		case <-gone:
			gone = nil
			in.armed.Store(true)
			select {
			case in.soft <- syscall.SIGPIPE:
			default: // a signal is pending: it ends the turn as well
			}
		case sig := <-sigs:
			if in.armed.CompareAndSwap(false, true) {
				select {
				case in.soft <- sig:
				default: // disarmed with a signal still unread: that one stands for both
				}
				continue
			}
			hardExit()
			close(in.exited)
			return
		case <-in.stop:
			return
		}
	}
}

// arm makes the next signal exit at once; disarm makes it soft again.
func (in *interrupts) arm()    { in.armed.Store(true) }
func (in *interrupts) disarm() { in.armed.Store(false) }

// hardExited reports whether a signal has forced the exit.
func (in *interrupts) hardExited() bool {
	select {
	case <-in.exited:
		return true
	default:
		return false
	}
}

// close stops reading signals and waits for the reader.
func (in *interrupts) close() {
	in.stopOnce.Do(func() { close(in.stop) })
	<-in.done
}

// serve runs body with the driver running and signals read; then it shuts
// the tree down (reason shutdown, for a turn still running), waits for the
// driver — bounded by grace + stopSlack, any signal meanwhile exiting at
// once — and closes the trace, the session and the workspace. body's error
// wins over the shutdown's, unless the driver itself failed.
func (lr *liveRun) serve(ctx context.Context, body func(ctx context.Context) error) error {
	sigs, stopSignals := lr.a.signals()
	defer stopSignals()
	if lr.a.catchPipe != nil {
		defer lr.a.catchPipe()()
	}
	lr.intr = startInterrupts(sigs, lr.out.Gone(), lr.hardExit)
	defer lr.intr.close()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	errc := make(chan error, 1)
	go func() { errc <- lr.driver.Run(runCtx) }() // owned: received below, or left to the process's exit past the bound
	lr.submitLost(ctx)
	err := body(ctx)
	if lr.intr.hardExited() {
		lr.sess.Abandon()
		return &exitError{Code: exitInterrupted}
	}
	lr.intr.arm()
	stopRun()
	bound := lr.grace + stopSlack
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case runErr := <-errc:
		// A driver that failed (its log could not be written: a full disk)
		// stopped the run: that is why body returned, and what is said.
		if ferr := lr.finish(runErr); ferr != nil && (err == nil || runErr != nil) {
			err = ferr
		}
		return lr.ended(err)
	case <-lr.intr.exited:
		lr.sess.Abandon()
		return &exitError{Code: exitInterrupted}
	case <-timer.C:
		// The kernel's goroutine is stuck outside the kernel; it may not
		// be touched. What it wrote is on disk (every record and step is
		// written through); sync the session and go.
		lr.box.KillAll()
		lr.discardFinal()
		serr := lr.sess.Abandon()
		fmt.Fprintf(lr.errw, "escapement: the agent tree did not stop within %v of the end (grace %v + %v); exiting without it\n", bound, lr.grace, stopSlack)
		if err == nil {
			err = &exitError{Code: exitCheckFailed, Err: errors.Join(errors.New("the live driver did not stop"), serr)}
		}
		return err
	}
}

// finish closes what the run wrote once the driver has stopped (with runErr)
// and reports the first error as a failed check. It names the ops the
// kernel abandoned that still run: the process leaves them to the OS.
func (lr *liveRun) finish(runErr error) error {
	err := lr.stopped(runErr)
	for _, op := range lr.driver.Abandoned() {
		what := "model request"
		if op.Tool != "" {
			what = "tool call " + op.Tool
		}
		fmt.Fprintf(lr.errw, "escapement: %s of %s was abandoned at %v (it ignored its cancel) and still runs; it ends with this process\n", termtext.Line(what), termtext.Line(op.Path), op.At.Round(time.Millisecond))
	}
	if serr := lr.sess.Close(runErr); serr != nil && err == nil {
		err = serr
	}
	if lr.traceOut != nil {
		if terr := lr.traceOut.Close(); terr != nil && err == nil {
			err = fmt.Errorf("--trace: %w", terr)
		}
	}
	lr.box.Close()
	if err != nil {
		return &exitError{Code: exitCheckFailed, Err: err}
	}
	return nil
}

// ended closes the run for its reader once the driver has stopped: the
// result event (--json), the final answer (-o), how to continue the
// session; a stdout that went away makes the exit 141.
func (lr *liveRun) ended(err error) error {
	lr.emit(lr.view.Result(lr.sess.Path())) // with the console's line on how to continue
	if lr.final != nil {
		note, ferr := headless.WriteFinal(lr.final, lr.redact, lr.view)
		if note != "" {
			lr.say("-o %s: %s", lr.flags.lastMessage, note)
		}
		if ferr != nil && err == nil {
			err = writeErr("-o: %v", ferr)
		}
	}
	if lr.out.Closed() {
		lr.say("stdout was closed; the run was shut down and its session closed cleanly")
		return &exitError{Code: exitBrokenPipe}
	}
	return err
}

// stopped explains a driver that stopped because its write-ahead log
// failed (a full disk, an I/O error): the run could not record what it did
// next, so it did nothing more; what was recorded is kept, and a resume
// goes on from it once the cause is gone. Other errors pass unchanged.
func (lr *liveRun) stopped(runErr error) error {
	if !errors.Is(runErr, live.ErrWriteAhead) {
		return runErr
	}
	path := lr.sess.Path()
	return fmt.Errorf("%w\nthe run stopped: it could not record what it would do next. %s and its log %s keep everything before that; once there is room, `escapement chat --resume %s` (or run --resume) continues", runErr, path, path+session.LogSuffix, path)
}

// submitLost submits the prompt of a turn whose start the crashed run's log
// lost (session.Unfinished), once the driver runs; if it cannot be, the
// command stops waiting for that turn.
func (lr *liveRun) submitLost(ctx context.Context) {
	if err := lr.sess.Resubmit(ctx); err != nil {
		lr.say("%v", err)
		lr.state.GiveUp()
		select {
		case lr.notify <- struct{}{}:
		default:
		}
	}
}

// hardExit is a signal the user insisted with (a second Ctrl-C, a signal
// during a shutdown): kill every running shell group at once (they would
// otherwise outlive us in their own process groups), make the session
// durable, and exit 130. It runs on the signal reader's goroutine.
func (lr *liveRun) hardExit() {
	lr.box.KillAll()
	lr.sess.Sync() // the log stays for --resume
	lr.discardFinal()
	lr.a.exit(exitInterrupted)
}

// runOnce is `escapement run`: one turn, then exit with its outcome. A
// run resumed from a crash first finishes the turn the dead process left
// (adapters/session), then runs prompt, if any, as the next turn.
func (lr *liveRun) runOnce(ctx context.Context, prompt string) error {
	jsonIn := lr.flags.inputFormat == "json" || lr.flags.decide
	lr.whileBusy = busyInterject // a message while the turn runs joins it
	return lr.serve(ctx, func(ctx context.Context) error {
		if busy, _, _, _ := lr.state.Get(); busy {
			signalled, err := lr.await(ctx, 0)
			if prompt == "" && !jsonIn || signalled {
				return err
			}
		}
		if jsonIn {
			return lr.repl(ctx, true, prompt)
		}
		if prompt == "" {
			lr.say("no turn was left unfinished and no prompt was given; nothing to do")
			return nil
		}
		return lr.turn(ctx, prompt)
	})
}

// turn submits prompt and waits for its end.
func (lr *liveRun) turn(ctx context.Context, prompt string) error {
	_, _, ended, _ := lr.state.Get()
	if err := lr.driver.Submit(ctx, prompt); err != nil {
		return &exitError{Code: exitCheckFailed, Err: err}
	}
	_, err := lr.await(ctx, ended)
	return err
}

// await waits for the root's turn that is running to end (the turns ended
// so far are ended) and maps its outcome to the exit code. The first
// SIGINT cancels the turn (reason user_cancel), SIGTERM shuts the tree down
// (reason shutdown); either arms the next signal to exit at once, and
// signalled says one came.
func (lr *liveRun) await(ctx context.Context, ended uint64) (signalled bool, err error) {
	for {
		select {
		case <-lr.notify:
			if _, _, n, last := lr.state.Get(); n > ended {
				return signalled, headless.OutcomeError(last)
			}
		case sig := <-lr.intr.soft:
			signalled = true
			lr.intr.arm()
			if err := lr.interrupt(ctx, sig); err != nil {
				return true, err
			}
		case <-lr.intr.exited:
			return true, &exitError{Code: exitInterrupted}
		case <-lr.driver.Done():
			return signalled, &exitError{Code: exitInterrupted} // shut down before the turn began
		case <-ctx.Done():
			return signalled, &exitError{Code: exitInterrupted, Err: ctx.Err()}
		}
	}
}

// interrupt acts on a signal while a turn runs: SIGTERM asks the process to
// end (Driver.Shutdown: the turn ends with reason shutdown), anything else
// is the user's interrupt of the running turn (reason user_cancel).
func (lr *liveRun) interrupt(ctx context.Context, sig os.Signal) error {
	var err error
	if sig == syscall.SIGTERM || sig == syscall.SIGPIPE {
		err = lr.driver.Shutdown(ctx)
	} else {
		_, turn, _, _ := lr.state.Get()
		err = lr.driver.Cancel(ctx, kernel.Root, turn)
	}
	if err != nil && !errors.Is(err, live.ErrStopped) {
		return &exitError{Code: exitCheckFailed, Err: err}
	}
	return nil
}
