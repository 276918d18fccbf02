// Package proctest answers, for tests, whether processes are still running,
// and waits for the pid files and process groups the tests' shells leave.
// A killed process whose parent has gone is re-parented to PID 1, which in a
// container may never reap it; so "alive" here means present in /proc and
// not a zombie, rather than kill(pid, 0) succeeding.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// poll is how often the waits below look again.
const poll = 5 * time.Millisecond

// stat returns a process's state letter and process group from
// /proc/<pid>/stat; ok is false when the process does not exist.
func stat(pid int) (state byte, pgrp int, ok bool) {
	state, _, pgrp, ok = statPPID(pid)
	return state, pgrp, ok
}

// statPPID is stat with the parent's pid.
func statPPID(pid int) (state byte, ppid, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	// pid (comm) state ppid pgrp ... — comm may contain spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, 0, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 3 {
		return 0, 0, 0, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return 0, 0, 0, false
	}
	return f[0][0], ppid, pgrp, true
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	s, _, ok := stat(pid)
	return ok && s != 'Z'
}

// GroupMembers lists the live (non-zombie) processes of process group pgid.
func GroupMembers(pgid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("scan /proc: %w", err)
	}
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, g, ok := stat(pid); ok && g == pgid && s != 'Z' {
			live = append(live, pid)
		}
	}
	return live, nil
}

// Parent is the parent pid of a process, 0 when it does not exist.
func Parent(pid int) int {
	_, ppid, _, ok := statPPID(pid)
	if !ok {
		return 0
	}
	return ppid
}

// Children lists the children of ppid: the live ones and the zombies (exited,
// not yet reaped by ppid).
func Children(ppid int) (live, zombies []int, err error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil, fmt.Errorf("scan /proc: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		switch s, p, _, ok := statPPID(pid); {
		case !ok || p != ppid:
		case s == 'Z':
			zombies = append(zombies, pid)
		default:
			live = append(live, pid)
		}
	}
	return live, zombies, nil
}

// WaitGone waits up to timeout for pid to be gone (or a zombie); the error
// says it is still running at the deadline. The timeout only bounds a hang.
func WaitGone(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for Alive(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still running after %v", pid, timeout)
		}
		time.Sleep(poll)
	}
	return nil
}

// WaitPIDFile waits up to timeout for a command to write its pid (a number
// and a newline, e.g. `echo $$ > pid`) to path and returns it; it fails the
// test if the file never appears whole or holds something else.
func WaitPIDFile(tb testing.TB, path string, timeout time.Duration) int {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(path)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				tb.Fatalf("pid file %s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pid file %s not written within %v (%v)", path, timeout, err)
		}
		time.Sleep(poll)
	}
}

// WaitGroupGone waits up to timeout for process group pgid to have no live
// member and returns when it first saw it empty; the error lists the
// members still running at the deadline (or says why /proc was unreadable).
func WaitGroupGone(pgid int, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		m, err := GroupMembers(pgid)
		if err != nil {
			return time.Time{}, fmt.Errorf("process group %d: %w", pgid, err)
		}
		now := time.Now()
		if len(m) == 0 {
			return now, nil
		}
		if now.After(deadline) {
			return time.Time{}, fmt.Errorf("process group %d still has %v after %v", pgid, m, timeout)
		}
		time.Sleep(poll)
	}
}
