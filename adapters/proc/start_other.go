//go:build unix && !linux

package proc

import (
	"errors"
	"os/exec"
	"syscall"
)

// sysProcess is the command itself: without a child subreaper (macOS has
// none) only its process group can be found again, so a descendant that
// left the group (setsid, or a double fork into a new group) is not killed.
type sysProcess struct {
	cmd  *exec.Cmd
	pgid int
}

func startSys(cmd *exec.Cmd) (*sysProcess, int, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	pid := cmd.Process.Pid
	return &sysProcess{cmd: cmd, pgid: pid}, pid, nil
}

// wait waits for the command, then kills what it left in its group. The
// group id could in principle name a new group once this one is empty and
// its leader reaped; that needs the pid counter to wrap within the
// microseconds in between.
func (s *sysProcess) wait() (Exit, error) {
	err := s.cmd.Wait()
	_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
	exit := Exit{Code: -1}
	var ee *exec.ExitError
	switch {
	case err == nil:
		exit.Code = 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			exit.Signal = ws.Signal()
		} else {
			exit.Code = ee.ExitCode()
		}
	default:
		return exit, err
	}
	return exit, nil
}

func (s *sysProcess) interrupt() { _ = syscall.Kill(-s.pgid, syscall.SIGINT) }

func (s *sysProcess) kill() { _ = syscall.Kill(-s.pgid, syscall.SIGKILL) }
