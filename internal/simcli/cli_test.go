package simcli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/spf13/cobra"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// runCLI runs `escapement ARGS...` with the simulator's commands mounted as
// cmd/escapement mounts them, and returns the exit code, stdout and
// stderr (each error printed as the program prints it).
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	err := execute(Host{Out: &out, Err: &errb, Signals: noSignals, Build: "escapement"}, args...)
	return exitCodeOf(err, &errb), out.String(), errb.String()
}

// execute runs the command line args under a root command as the
// program's (its flag errors usage errors).
func execute(h Host, args ...string) error {
	root := &cobra.Command{Use: "escapement", SilenceUsage: true, SilenceErrors: true}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr("%v", err) })
	root.AddCommand(Command(h))
	root.SetArgs(args)
	root.SetOut(h.Out)
	root.SetErr(h.Err)
	return root.ExecuteContext(context.Background())
}

// exitCodeOf is the program's exit code for a command's error, which it
// prints on w as the program does.
func exitCodeOf(err error, w *bytes.Buffer) int {
	var ee *ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		if ee.Err != nil && w != nil {
			fmt.Fprintf(w, "escapement: %s\n", ee.Err)
		}
		return ee.Code
	}
	if w != nil {
		fmt.Fprintf(w, "escapement: %s\n", err)
	}
	return exitUsage
}

// noSignals is a signal source that never delivers.
func noSignals() (<-chan os.Signal, func()) { return make(chan os.Signal), func() {} }

// testApp is an app whose interrupts arrive on sigs, for calling a
// command's run function directly (with a test core).
func testApp(sigs chan os.Signal) (*app, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &app{Host: Host{Out: &out, Err: &errb, Signals: func() (<-chan os.Signal, func()) { return sigs, func() {} }}}, &out, &errb
}
