package tools

import "syscall"

// shellProcAttr starts the shell as the leader of its own process group, so
// a cancel signals the whole group.
func shellProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid: true,
		// If escapement itself dies (SIGKILL, crash), the group leader is
		// killed too instead of running on unowned. The signal fires when
		// the forking OS thread ends (go.dev/issue/27505); Go retires a
		// thread only when a goroutine locked to it exits, and nothing in
		// this program locks threads.
		Pdeathsig: syscall.SIGKILL,
	}
}
