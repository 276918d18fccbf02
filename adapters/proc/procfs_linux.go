package proc

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// child is a process and its state letter from /proc/PID/stat ('Z' for a
// zombie waiting to be reaped).
type child struct {
	pid   int
	state byte
}

// children lists the helper's children with their states.
func (h *helper) children() []child {
	var kids []child
	for _, p := range h.below(h.self) {
		kids = append(kids, child{pid: p.pid, state: p.state})
	}
	return kids
}

// below lists the children of pid. /proc/PID/task/TID/children (one file
// per thread: an adopted orphan may hang under any thread) is exact and
// reads only the tree; without it (a kernel built without
// CONFIG_PROC_CHILDREN) the whole of /proc is scanned for the parent pid.
func (h *helper) below(pid int) []procStat {
	if !h.childFiles {
		return scanBelow(pid)
	}
	var kids []procStat
	for _, c := range taskChildren(pid) {
		if st, ok := readStat(c); ok {
			kids = append(kids, st)
		}
	}
	return kids
}

// scanChildren is children by a scan of the whole of /proc.
func scanChildren(self int) []child {
	var kids []child
	for _, p := range scanBelow(self) {
		kids = append(kids, child{pid: p.pid, state: p.state})
	}
	return kids
}

// scanBelow lists the children of pid by a scan of the whole of /proc.
func scanBelow(pid int) []procStat {
	var kids []procStat
	for _, p := range scanProc() {
		if p.ppid == pid {
			kids = append(kids, p)
		}
	}
	return kids
}

// descendants counts the live processes below the helper other than the
// command itself: what the command left running.
func (h *helper) descendants() int {
	n := 0
	queue := []int{h.self}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		for _, p := range h.below(parent) {
			queue = append(queue, p.pid)
			if p.pid != h.leader && p.state != 'Z' {
				n++
			}
		}
	}
	return n
}

// procUsable reports whether the helper can see its children: /proc is
// mounted, and whether each thread's children file exists (kernels built
// with CONFIG_PROC_CHILDREN, nearly all).
func procUsable(self int) (childFiles bool, err error) {
	if _, err := os.Stat("/proc/" + strconv.Itoa(self) + "/stat"); err != nil {
		return false, err
	}
	_, err = os.Stat("/proc/self/task/" + strconv.Itoa(self) + "/children")
	return err == nil, nil
}

// taskChildren reads the children files of every thread of pid.
func taskChildren(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, _ := os.ReadDir(dir)
	var pids []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if err != nil {
			continue // a thread (or the process) that just ended
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// procStat is what the helper needs from /proc/PID/stat.
type procStat struct {
	pid, ppid int
	state     byte
}

func scanProc() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var all []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			all = append(all, st)
		}
	}
	return all
}

// readStat parses /proc/PID/stat: "pid (comm) state ppid ...", where comm
// may hold spaces and parentheses.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procStat{}, false
	}
	return procStat{pid: pid, ppid: ppid, state: f[0][0]}, true
}
