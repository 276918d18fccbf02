//go:build unix && !linux

package tools

import "syscall"

// shellProcAttr starts the shell as the leader of its own process group, so
// a cancel signals the whole group. This OS has no parent-death signal: if
// escapement is killed outright (SIGKILL), a running shell outlives it;
// every orderly exit kills the groups it tracks.
func shellProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
