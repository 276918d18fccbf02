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
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp ... — comm may contain spaces and parens.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 3 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(string(f[2]))
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pgrp, true
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
