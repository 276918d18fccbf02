package agent

import (
	"errors"
	"fmt"
	"os"
)

// Exit ends a command-line program the way the escapement CLI ends
// (docs/cli.md): status 0 when err is nil; else err on stderr and status
// 130 for an interrupted turn (ErrInterrupted: a Ctrl-C), 1 for anything
// else. It is what a small program does last, with its turn's errors
// joined: Result's, Close's and Result.Err.
func Exit(err error) {
	os.Exit(report(err))
}

// report prints err and returns the exit status for it.
func report(err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, err)
	if errors.Is(err, ErrInterrupted) {
		return 130
	}
	return 1
}
