// Package simcli is the simulator's command line: `escapement sim` and its
// subcommands replay, sweep (with merge) and explore — their flags, their
// help, and the wiring from flags to the simulator's packages (sim,
// sim/scenario, sim/sweep, sim/explore), which do the work. cmd/escapement
// mounts it (Command) with what it takes from the process (Host): the
// streams, the signals, the logger.
package simcli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Host is what the simulator's commands take from the program that runs
// them.
type Host struct {
	Out, Err io.Writer
	// Signals subscribes to SIGINT and SIGTERM for a batch command's
	// lifetime; the func it returns ends the subscription.
	Signals func() (<-chan os.Signal, func())
	// Debug logs at debug level (nil: nothing).
	Debug func(msg string, keyvals ...any)
	// Build names the program in trace headers.
	Build string
}

// Command is `escapement sim` with its subcommands.
func Command(h Host) *cobra.Command { return newSimCmd(&app{Host: h}) }

// app is what the commands share.
type app struct{ Host }

// debug logs at debug level.
func (a *app) debug(msg string, keyvals ...any) {
	if a.Debug != nil {
		a.Debug(msg, keyvals...)
	}
}

// Exit codes, documented in docs/cli.md and in --help.
const (
	exitOK          = 0
	exitCheckFailed = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// ExitError is a command's failure and the exit code it gives (1 a check
// failed, 2 usage or input error, 130 interrupted); Err, when set, says
// why.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// usageErr marks bad flags, arguments or input files (exit 2).
func usageErr(format string, args ...any) error {
	return &ExitError{Code: exitUsage, Err: fmt.Errorf(format, args...)}
}

// cancelOnSignal is how the batch commands (sim sweep, sim explore) stop
// on SIGINT or SIGTERM: the first signal cancels the returned context and
// sets the returned flag, so the command prints what it has and exits 130.
// stop must be called before the command returns: it joins the signal
// reader and stops listening.
func (a *app) cancelOnSignal(ctx context.Context) (_ context.Context, interrupted *atomic.Bool, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs, stopSignals := a.Signals()
	interrupted = new(atomic.Bool)
	done := make(chan struct{})
	go func() { // owned: joined by stop
		defer close(done)
		select {
		case <-sigs:
			interrupted.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, interrupted, func() {
		cancel()
		<-done
		stopSignals()
	}
}

// batchBar is the progress bar of a batch command on stderr, when stderr is
// a terminal (nil otherwise: every method is then a no-op). Its methods
// may be called from several goroutines.
type batchBar struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

// progressBar starts a bar of n units named unit, described as desc.
func (a *app) progressBar(n int, desc, unit string) *batchBar {
	fd, ok := a.Err.(interface{ Fd() uintptr })
	if !ok || !term.IsTerminal(int(fd.Fd())) {
		return nil
	}
	return &batchBar{bar: progressbar.NewOptions(n, progressbar.OptionSetWriter(a.Err), progressbar.OptionSetDescription(desc),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())}
}

// set shows done units, and desc when not empty.
func (b *batchBar) set(done int, desc string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if desc != "" {
		b.bar.Describe(desc)
	}
	_ = b.bar.Set(done)
}

func (b *batchBar) finish() {
	if b != nil {
		_ = b.bar.Finish()
	}
}

// goWorker runs a batch's worker (sim/pool): Pool.Run waits for it.
func goWorker(w func()) { go w() } // owned: pool.Run returns after every worker
