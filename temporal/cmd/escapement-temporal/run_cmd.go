package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/escapement/escapement/internal/headless"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/temporal/remote"
)

func newRunCmd(a *app) *cobra.Command {
	f := &clientFlags{}
	cmd := &cobra.Command{
		Use:   "run [PROMPT]",
		Short: "Run one turn of a tree on Temporal",
		Long: `Run one turn of the root agent of a tree whose workflow runs on Temporal:
the answer streams to stdout, tool and delegation activity to stderr, as
escapement run shows them. A turn that does not complete says why on stderr.

Without --workflow a new tree's workflow is started (its id is printed on
stderr); --workflow ID continues that tree: its next turn sees the whole
conversation. When a turn of it is running (this command was interrupted,
or another client started it), run shows it to its end first, and PROMPT
(optional then) runs after it. The workflow stays when run exits: continue
it with --workflow ID, end it with SIGTERM (or chat's /shutdown).

Ctrl-C cancels the turn (the workflow cancels its requests and tool calls
on the workers) and exits 130 once the turn has ended; a second Ctrl-C exits
at once (the cancel stands). SIGTERM shuts the tree down (reason shutdown):
the workflow ends.

The model, the endpoint and the tools are the worker's (escapement-temporal
worker); --model, --workspace and the like are refused here.

Exit codes: 0 completed, 1 the turn failed or timed out, 2 usage or input
error, 130 interrupted.`,
		Example: `  escapement-temporal run --temporal localhost:7233 "list the Go files here"
  escapement-temporal run --temporal localhost:7233 --workflow escapement-1a2b3c4d5e6f "and now the tests"`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(cmd); err != nil {
				return err
			}
			prompt := ""
			switch {
			case len(args) == 1 && strings.TrimSpace(args[0]) == "":
				return usageErr("the prompt is empty")
			case len(args) == 1:
				prompt = args[0]
			case f.workflow == "":
				return usageErr("run needs a PROMPT (or --workflow ID, to follow a turn of that tree to its end)")
			}
			rr, err := connect(cmd.Context(), a, f)
			if err != nil {
				return err
			}
			defer rr.close()
			return rr.runOnce(cmd.Context(), prompt)
		},
	}
	f.register(cmd, false)
	return cmd
}

// runOnce is run: the running turn to its end, if any, then prompt's.
func (rr *remoteRun) runOnce(ctx context.Context, prompt string) error {
	sigs, stop := rr.a.signals()
	defer stop()
	in := &interrupts{sigs: sigs}
	if busy, _, _, _ := rr.state.get(); busy {
		signalled, err := rr.await(ctx, in, 0)
		if prompt == "" || signalled {
			return err
		}
	}
	if prompt == "" {
		rr.r.say("no turn is running and no prompt was given; nothing to do")
		return nil
	}
	_, _, ended, _ := rr.state.get()
	acc, err := rr.s.Submit(ctx, prompt)
	if err != nil {
		return &exitError{Code: exitCheckFailed, Err: err}
	}
	rr.accepted(acc)
	_, err = rr.await(ctx, in, ended)
	return err
}

// interrupts is a command's signal handling: the first signal acts (a
// cancel, or a shutdown for SIGTERM) and arms; a signal while armed exits
// at once.
type interrupts struct {
	sigs  <-chan os.Signal
	armed bool
}

// await waits for the root's running turn to end (ended turns have ended
// so far) and maps its outcome to the exit code. signalled says a signal
// came.
func (rr *remoteRun) await(ctx context.Context, in *interrupts, ended uint64) (signalled bool, err error) {
	for {
		select {
		case <-rr.notify:
			if _, _, n, last := rr.state.get(); n > ended {
				return signalled, headless.OutcomeError(last)
			}
		case <-rr.ended:
			if rr.endErr != nil {
				return signalled, &exitError{Code: exitCheckFailed, Err: rr.endErr}
			}
			return signalled, &exitError{Code: exitInterrupted} // shut down before the turn ended
		case sig := <-in.sigs:
			signalled = true
			if in.armed {
				return true, &exitError{Code: exitInterrupted}
			}
			in.armed = true
			if err := rr.interrupt(ctx, sig); err != nil {
				return true, err
			}
		case <-ctx.Done():
			return signalled, &exitError{Code: exitInterrupted, Err: ctx.Err()}
		}
	}
}

// interrupt acts on a signal while a turn runs: SIGTERM shuts the tree
// down (reason shutdown; the workflow ends), anything else cancels the
// running turn (reason user_cancel).
func (rr *remoteRun) interrupt(ctx context.Context, sig os.Signal) error {
	if sig == syscall.SIGTERM {
		if err := rr.s.Shutdown(ctx); err != nil {
			return &exitError{Code: exitCheckFailed, Err: err}
		}
		return nil
	}
	_, turn, _, _ := rr.state.get()
	if _, err := rr.s.Cancel(ctx, kernel.Root, turn); err != nil && !errors.Is(err, remote.ErrEnded) {
		return &exitError{Code: exitCheckFailed, Err: err}
	}
	return nil
}
