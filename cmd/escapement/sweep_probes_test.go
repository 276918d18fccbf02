package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSweepProbeCountsAgree: the summary's "probes N/M reached" counts the
// table below it: M rows, N of them without the "never reached" mark.
func TestSweepProbeCountsAgree(t *testing.T) {
	unsetenv(t, "JOB_COMPLETION_INDEX")
	_, out, _ := runCLI(t, "sim", "sweep", "--seeds", "40", "--depth", "3", "--jobs", "1", "--out", filepath.Join(t.TempDir(), "fail"))
	m := parseSweep(t, out)
	_, table, ok := strings.Cut(out, "PROBE")
	if !ok {
		t.Fatalf("no probe table:\n%s", out)
	}
	rows, unreached := 0, 0
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 2 {
			break
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			break
		}
		rows++
		if strings.Contains(line, "never reached") {
			unreached++
		}
	}
	if m[4] != strconv.Itoa(rows-unreached) || m[5] != strconv.Itoa(rows) {
		t.Errorf("summary says probes %s/%s reached; the table has %d rows, %d never reached:\n%s", m[4], m[5], rows, unreached, out)
	}
}
