package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The helper is this same executable, re-run through /proc/self/exe with
// argv[0] helperArg0 and helperEnv set to the parent's pid; the package's
// init turns such a process into the helper (helper_linux.go). Its argv
// after argv[0] is: the number of cmd.ExtraFiles, the command's path, the
// command's argv. It reports on fd 3, one line each:
//
//	pid N                       the command runs as pid N (its group too)
//	errno N                     the command could not start: fork/exec failed with errno N
//	error TEXT                  the helper could not do its job
//	exit N leftover M           the command exited with status N; M processes it left were killed
//	signal N leftover M         a signal N ended the command
const (
	helperArg0 = "escapement-proc-helper"
	helperEnv  = "ESCAPEMENT_PROC_HELPER"
	selfExe    = "/proc/self/exe"
)

// sysProcess is the parent's side of one helper.
type sysProcess struct {
	helper *exec.Cmd
	status *bufio.Reader
	pipe   *os.File // the read end under status
}

func startSys(cmd *exec.Cmd) (*sysProcess, int, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, 0, fmt.Errorf("proc: status pipe: %w", err)
	}
	path := cmd.Path
	cmd.Args = append([]string{helperArg0, strconv.Itoa(len(cmd.ExtraFiles)), path}, cmd.Args...)
	cmd.Path = selfExe
	cmd.Env = append(cmd.Env, helperEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.ExtraFiles = append([]*os.File{w}, cmd.ExtraFiles...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own group: the terminal's Ctrl-C reaches escapement only,
		// which decides what to cancel.
		Setpgid: true,
		// If this process dies, the helper kills the tree and exits. A
		// thread's exit also fires it (go.dev/issue/27505); the helper
		// tells the two apart by its parent pid.
		Pdeathsig: syscall.SIGHUP,
	}
	// A same-user child can read /proc/<pid>/environ of a dumpable process,
	// and this process's initial environment holds the API key.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	err = cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		return nil, 0, fmt.Errorf("proc: start the process helper: %w", err)
	}
	s := &sysProcess{helper: cmd, status: bufio.NewReader(r), pipe: r}
	line, rerr := s.status.ReadString('\n')
	verb, arg, _ := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
	if n, err := strconv.Atoi(arg); rerr == nil && verb == "pid" && err == nil {
		return s, n, nil
	}
	werr := cmd.Wait()
	r.Close()
	switch {
	case verb == "errno":
		if n, err := strconv.Atoi(arg); err == nil {
			return nil, 0, &os.PathError{Op: "fork/exec", Path: path, Err: syscall.Errno(n)}
		}
	case verb == "error":
		return nil, 0, fmt.Errorf("proc: %s", arg)
	case errors.Is(rerr, io.EOF):
		return nil, 0, fmt.Errorf("proc: the process helper ended before starting %s (%v)", path, werr)
	}
	return nil, 0, fmt.Errorf("proc: the process helper said %q (%v)", line, werr)
}

// wait waits for the helper, which exits only after the command and every
// descendant are gone, and reads the command's end from its report.
func (s *sysProcess) wait() (Exit, error) {
	werr := s.helper.Wait()
	line, _ := s.status.ReadString('\n')
	s.pipe.Close()
	var (
		verb    string
		n, left int
	)
	_, err := fmt.Sscanf(strings.TrimSuffix(line, "\n"), "%s %d leftover %d", &verb, &n, &left)
	if err != nil || (verb != "exit" && verb != "signal") {
		return Exit{Code: -1}, fmt.Errorf("proc: the process helper ended without reporting how the command ended (%v); processes it started may still run", werr)
	}
	exit := Exit{Code: -1}
	exit.Leftover = left
	if verb == "exit" {
		exit.Code = n
	} else {
		exit.Signal = syscall.Signal(n)
	}
	return exit, nil
}

// interrupt asks the helper to send SIGINT to the command's group.
func (s *sysProcess) interrupt() { _ = s.helper.Process.Signal(syscall.SIGINT) }

// kill asks the helper for the hard kill of the whole tree.
func (s *sysProcess) kill() { _ = s.helper.Process.Signal(syscall.SIGTERM) }
