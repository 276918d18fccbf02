//go:build unix

package mutate

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts cmd in a new process group and makes its
// cancellation kill the whole group (go test's test binaries included). The
// returned function kills whatever of the group is left once cmd has ended
// (a process a test started and forgot).
func ownProcessGroup(cmd *exec.Cmd) (killRest func()) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}
