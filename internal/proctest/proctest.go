// Package proctest answers, for tests, whether processes are still running.
// A killed process whose parent has gone is re-parented to PID 1, which in a
// container may never reap it; so "alive" here means present in /proc and
// not a zombie, rather than kill(pid, 0) succeeding.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

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
