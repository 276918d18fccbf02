package proc

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// init turns this process into a helper when Start re-ran the executable
// for one (argv[0] and the environment variable both say so). It runs
// before main (or a test binary's TestMain) and never returns in a helper.
func init() {
	if len(os.Args) < 4 || os.Args[0] != helperArg0 {
		return
	}
	if parent, ok := os.LookupEnv(helperEnv); ok {
		// syscall.Exit, not os.Exit: nothing is buffered, and a race-enabled
		// build would sleep a second in os.Exit (GORACE atexit_sleep_ms).
		syscall.Exit(runHelper(parent, os.Args[1:]))
	}
}

// helper is one call's supervisor: a child subreaper (PR_SET_CHILD_SUBREAPER)
// whose only own child is the command, so every process the command starts
// that is orphaned — by setsid, a double fork, its parent's exit — is
// re-parented to the helper, not to init. Attribution needs no bookkeeping:
// the helper's children are, by construction, this call's processes.
type helper struct {
	self, parent, leader int
	status               *os.File
	childFiles           bool // /proc/self/task/TID/children exists
}

// runHelper is the helper's main: start the command, wait for it while
// reaping adopted orphans and forwarding signals, then kill what is left,
// report, exit. args: number of extra files, path, argv.
func runHelper(parentArg string, args []string) int {
	h := &helper{self: os.Getpid(), status: os.NewFile(3, "status")}
	syscall.CloseOnExec(3)
	fail := func(format string, a ...any) int {
		fmt.Fprintf(h.status, "error "+format+"\n", a...)
		return 127
	}
	var err error
	if h.parent, err = strconv.Atoi(parentArg); err != nil {
		return fail("bad helper parent %q", parentArg)
	}
	extra, err := strconv.Atoi(args[0])
	if err != nil || extra < 0 {
		return fail("bad helper arguments %q", args)
	}
	if os.Getppid() != h.parent {
		return fail("the parent process exited before the command started")
	}
	if h.childFiles, err = procUsable(h.self); err != nil {
		return fail("cannot see child processes in /proc: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGCHLD)
	files := []uintptr{0, 1, 2}
	for i := range extra {
		files = append(files, uintptr(4+i))
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, helperEnv+"=") {
			env = append(env, kv)
		}
	}
	h.leader, err = syscall.ForkExec(args[1], args[2:], &syscall.ProcAttr{Env: env, Files: files, Sys: &syscall.SysProcAttr{
		Setpgid: true, // the command leads its own group: the target of SIGINT
		// If the helper itself is killed outright, the leader goes too.
		Pdeathsig: syscall.SIGKILL,
	}})
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			fmt.Fprintf(h.status, "errno %d\n", int(errno))
			return 127
		}
		return fail("fork/exec %s: %v", args[1], err)
	}
	fmt.Fprintf(h.status, "pid %d\n", h.leader)
	// The command holds its own copies of the descriptors; the helper lets
	// go of its own, so a pipe's end means the command's tree closed it.
	if null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0); err == nil {
		for fd := range 3 {
			_ = unix.Dup3(int(null.Fd()), fd, 0)
		}
		null.Close()
	}
	for i := range extra {
		_ = unix.Close(4 + i)
	}

	hard := h.watch(sigs)
	leftover := 0
	if !hard {
		leftover = h.descendants()
	}
	ws := h.killAll()
	switch {
	case ws.Signaled():
		fmt.Fprintf(h.status, "signal %d leftover %d\n", int(ws.Signal()), leftover)
	default:
		fmt.Fprintf(h.status, "exit %d leftover %d\n", ws.ExitStatus(), leftover)
	}
	return 0
}

// watch returns when the leader has exited (it stays an unreaped zombie, so
// its pid — the group's id — cannot be reused while the group is killed) or
// when the hard kill is asked for: SIGTERM from the parent, or SIGHUP (the
// parent-death signal) once the parent is really gone. Meanwhile it
// forwards SIGINT to the group and reaps adopted orphans as they exit.
func (h *helper) watch(sigs <-chan os.Signal) (hard bool) {
	for {
		for _, c := range h.children() {
			if c.pid != h.leader && c.state == 'Z' {
				_, _ = unix.Wait4(c.pid, nil, unix.WNOHANG, nil)
			}
		}
		// Asked directly, not from the list: the leader is an unreaped
		// child, so its /proc entry is its own until the helper reaps it.
		if st, ok := readStat(h.leader); !ok || st.state == 'Z' {
			return false
		}
		switch <-sigs {
		case syscall.SIGINT:
			_ = unix.Kill(-h.leader, unix.SIGINT)
		case syscall.SIGTERM:
			return true
		case syscall.SIGHUP:
			if os.Getppid() != h.parent {
				return true
			}
		}
	}
}

// killAll kills the group, then every child of the helper until none is
// left: killing a child re-parents its own children to the helper, which
// kills them on the next round. Only children are signalled one by one: a
// child's pid stays reserved until the helper reaps it, so no signal can
// reach an unrelated process that reused a pid. It returns the leader's
// wait status.
func (h *helper) killAll() unix.WaitStatus {
	_ = unix.Kill(-h.leader, unix.SIGKILL) // the leader is not reaped yet
	var leader unix.WaitStatus
	for {
		kids := h.children()
		if len(kids) == 0 && h.childFiles {
			// The children files are read entry by entry; should one ever
			// miss a child, the blocking wait below would wait for a live
			// process nobody kills. So before waiting on "none", check
			// that there is none, and scan /proc if there is one.
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			switch {
			case errors.Is(err, unix.ECHILD):
				return leader
			case pid == h.leader:
				leader = ws
				continue
			case pid > 0:
				continue
			}
			kids = scanChildren(h.self)
		}
		for _, c := range kids {
			if c.state != 'Z' {
				_ = unix.Kill(c.pid, unix.SIGKILL)
			}
		}
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil: // ECHILD: nothing left
			return leader
		case pid == h.leader:
			leader = ws
		}
	}
}
