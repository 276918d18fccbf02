package tools

import (
	"os"

	"golang.org/x/sys/unix"
)

// pseudoFS names the kernel pseudo-filesystem f lives on ("" for any other):
// procfs or sysfs mounted inside a workspace (a chroot being built, say)
// would expose process environments and memory through files that look
// regular. New already refuses a workspace under /proc or /sys.
func pseudoFS(f *os.File) string {
	var (
		st  unix.Statfs_t
		err error
	)
	rc, cerr := f.SyscallConn()
	if cerr != nil {
		return ""
	}
	if cerr = rc.Control(func(fd uintptr) { err = unix.Fstatfs(int(fd), &st) }); cerr != nil || err != nil {
		return ""
	}
	switch st.Type {
	case unix.PROC_SUPER_MAGIC:
		return "procfs"
	case unix.SYSFS_MAGIC:
		return "sysfs"
	}
	return ""
}
