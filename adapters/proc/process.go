package proc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configures Start.
type Options struct {
	// Env filters the child's environment: cmd.Environ() (cmd.Env, or this
	// process's environment when cmd.Env is nil) through the policy. The
	// zero value withholds the API key and every secret-looking variable.
	Env EnvPolicy
	// KillGrace is how long the process group has between the SIGINT a
	// cancel sends and the SIGKILL that follows; 1s when 0.
	KillGrace time.Duration
}

// Exit is how a started command ended.
type Exit struct {
	// Code is the command's exit status, -1 when a signal ended it.
	Code int
	// Signal is the signal that ended the command; 0 when it exited.
	Signal syscall.Signal
	// Cancelled reports that the context ended before the command did, so
	// its process group got SIGINT.
	Cancelled bool
	// Killed reports that the hard kill went out: SIGKILL to the group and
	// to every descendant (the kill grace ran out, or Kill was called).
	Killed bool
	// Leftover counts the processes the command left running when it ended
	// by itself (background jobs, daemons); all were killed. Linux only:
	// always 0 elsewhere.
	Leftover int
}

// String is "exit status N" or "killed by signal NAME".
func (e Exit) String() string {
	if e.Signal != 0 {
		return "killed by signal " + e.Signal.String()
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

// Process is a command started by Start: the leader of its own process
// group, and on Linux the only child of a per-call helper that adopts and
// kills every descendant (see the package documentation). Its methods are safe for concurrent
// use.
type Process struct {
	pid       int
	sys       *sysProcess
	done      chan struct{}
	exit      Exit
	err       error
	killed    atomic.Bool
	cancelled atomic.Bool
}

// Start starts cmd as described in the package documentation and returns
// once the command runs (or with the error that kept it from starting:
// errors.Is(err, fs.ErrNotExist) for a missing program).
//
// Start takes cmd over: it sets cmd.Env (filtered by opt.Env),
// cmd.SysProcAttr and, on Linux, cmd.Path, cmd.Args and cmd.ExtraFiles (the
// helper runs in between, so cmd.Process is the helper, not the command).
// Use the Process, never cmd.Wait. cmd's Stdin, Stdout, Stderr, Dir and
// ExtraFiles reach the command unchanged. Prefer *os.File (os.Pipe) for
// output you read: like exec.Cmd.Wait, the end of the call closes the
// pipes exec.Cmd made itself.
//
// When ctx ends, the process group gets SIGINT, and after opt.KillGrace the
// hard kill. Either way, and when the command ends by itself, everything
// it left running is killed; Wait returns after that. A Process must be
// waited for, or its context cancelled, to release its goroutines.
//
// On Linux, Start makes this process non-dumpable (PR_SET_DUMPABLE 0) so a
// child running as the same user cannot read /proc/<this pid>/environ, which
// still holds the API key; a side effect is that same-user debuggers cannot
// attach and no core file is written.
func Start(ctx context.Context, cmd *exec.Cmd, opt Options) (*Process, error) {
	switch {
	case cmd.Err != nil:
		return nil, cmd.Err
	case cmd.Process != nil:
		return nil, errors.New("proc: command already started")
	case cmd.SysProcAttr != nil:
		return nil, errors.New("proc: the command's SysProcAttr must be nil (Start sets the process group itself)")
	case cmd.Cancel != nil:
		return nil, errors.New("proc: the command has a Cancel function (exec.CommandContext); Start's context cancels it")
	}
	if err := opt.Env.Validate(); err != nil {
		return nil, fmt.Errorf("proc: %w", err)
	}
	if opt.KillGrace <= 0 {
		opt.KillGrace = time.Second
	}
	cmd.Env = opt.Env.Apply(cmd.Environ())
	sys, pid, err := startSys(cmd)
	if err != nil {
		return nil, err
	}
	p := &Process{pid: pid, sys: sys, done: make(chan struct{})}
	go p.supervise(ctx, opt.KillGrace) // owned by p: ends when the whole tree is gone
	return p, nil
}

// supervise waits for the tree to be gone, turning a cancel into SIGINT and
// then, after grace, the hard kill.
func (p *Process) supervise(ctx context.Context, grace time.Duration) {
	var (
		exit Exit
		err  error
	)
	waited := make(chan struct{})
	go func() { // owned: supervise receives from waited on every path
		exit, err = p.sys.wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		p.cancelled.Store(true)
		p.sys.interrupt()
		timer := time.NewTimer(grace)
		select {
		case <-waited:
			timer.Stop()
		case <-timer.C:
			p.Kill()
			<-waited
		}
	}
	exit.Cancelled = p.cancelled.Load()
	exit.Killed = p.killed.Load()
	p.exit, p.err = exit, err
	close(p.done)
}

// Pid is the command's process id, which is also its process group id.
func (p *Process) Pid() int { return p.pid }

// Done is closed when Wait would return: the command and everything it
// started are gone.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits until the command has ended and every process it left running
// is gone, and says how it ended. The error reports a failure of the
// supervision itself (on Linux, a helper that died without reporting), in
// which case descendants may have survived.
func (p *Process) Wait() (Exit, error) {
	<-p.done
	return p.exit, p.err
}

// Interrupt sends SIGINT to the command's process group now.
func (p *Process) Interrupt() { p.sys.interrupt() }

// Kill starts the hard kill now: SIGKILL to the process group and to every
// descendant, also those that left the group (Linux). Wait returns once
// they are gone. Killing a finished Process does nothing.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.killed.Store(true)
	p.sys.kill()
}
