// Command escapement-temporal runs escapement's agent trees on Temporal:
// `worker` runs the workflow and its activities (the model and the tools
// live there), `run` and `chat` start or attach to a tree's workflow and
// behave as `escapement run` and `escapement chat` do — the answer on
// stdout, activity on stderr, Ctrl-C cancels the turn, the same exit codes
// — while the tree itself runs on whichever worker picks it up
// (docs/temporal.md).
//
// Exit codes: 0 ok, 1 the turn failed or timed out (or a check failed),
// 2 usage or input error, 130 interrupted.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/escapement/escapement/internal/headless"
)

// Exit codes, as the escapement CLI's (docs/cli.md).
const (
	exitOK          = 0
	exitCheckFailed = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.Exit, processSignals))
}

// streams are the process's standard streams, injectable for tests.
type streams struct {
	in  io.Reader
	out io.Writer
	err io.Writer
}

// app is what every subcommand shares: the streams, the process's hard
// exit and its signals (tests inject both).
type app struct {
	streams
	exit    func(code int)
	signals func() (<-chan os.Signal, func())
}

// processSignals delivers SIGINT and SIGTERM until the returned func is
// called.
func processSignals() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	return ch, func() { signal.Stop(ch) }
}

// run is main without os.Exit.
func run(ctx context.Context, args []string, s streams, exit func(int), signals func() (<-chan os.Signal, func())) int {
	a := &app{streams: s, exit: exit, signals: signals}
	root := &cobra.Command{
		Use:   "escapement-temporal",
		Short: "escapement's agent trees as Temporal workflows",
		Long: `escapement-temporal runs escapement's agent trees on Temporal. A worker
(escapement-temporal worker) runs the tree's workflow, its model requests and
its tool calls; run and chat start a tree's workflow (or attach to a running
one) and show it as escapement run and chat do. A tree survives the loss of
any worker: another one picks it up.

Exit codes: 0 ok, 1 the turn failed or timed out, 2 usage or input error, 130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr("%v", err) })
	root.AddCommand(newWorkerCmd(a), newRunCmd(a), newChatCmd(a))
	root.SetArgs(args)
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		if ee.Err != nil {
			fmt.Fprintf(s.err, "escapement: %v\n", ee.Err)
		}
		return ee.Code
	default:
		fmt.Fprintf(s.err, "escapement: %v\nRun 'escapement-temporal --help' for usage.\n", err)
		return exitUsage
	}
}

// exitError carries an exit code through cobra's error return.
type exitError = headless.ExitError

// usageErr marks bad flags, arguments or input (exit 2).
func usageErr(format string, args ...any) error {
	return &exitError{Code: exitUsage, Err: fmt.Errorf(format, args...)}
}
