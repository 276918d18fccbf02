package simcli

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSweepProbeCountsAgree: the summary's "probes N/M reached" counts the
// table below it: M rows not skipped, N of them without the "never
// reached" mark.
func TestSweepProbeCountsAgree(t *testing.T) {
	unsetenv(t, "JOB_COMPLETION_INDEX")
	_, out, _ := runCLI(t, "sim", "sweep", "--seeds", "40", "--depth", "3", "--jobs", "1", "--out", filepath.Join(t.TempDir(), "fail"))
	m := parseSweep(t, out)
	_, table, ok := strings.Cut(out, "PROBE")
	if !ok {
		t.Fatalf("no probe table:\n%s", out)
	}
	rows, unreached, skipped := 0, 0, 0
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
		if strings.Contains(line, "skipped: needs --depth 4 or more") {
			skipped++
		}
	}
	if m[4] != strconv.Itoa(rows-skipped-unreached) || m[5] != strconv.Itoa(rows-skipped) || skipped != 2 || !strings.Contains(out, "(2 skipped: they need deeper worlds than depth 3)") {
		t.Errorf("summary says probes %s/%s reached; the table has %d rows, %d skipped, %d never reached:\n%s", m[4], m[5], rows, skipped, unreached, out)
	}
}

// TestShallowSweepExitsClean: a sweep shallower than some probes need
// (--depth 3: nothing sits four delegations down) exits 0 when it finds
// no violation and reaches every probe its worlds can reach; the probes
// it cannot reach are skipped, not failed.
func TestShallowSweepExitsClean(t *testing.T) {
	unsetenv(t, "JOB_COMPLETION_INDEX")
	code, out, errb := runCLI(t, "sim", "sweep", "--seeds", "1000", "--depth", "3", "--jobs", "2", "--out", filepath.Join(t.TempDir(), "fail"))
	m := parseSweep(t, out)
	if code != exitOK || m[3] != "0" || m[4] != m[5] || strings.Contains(out, "never reached") {
		t.Fatalf("sweep --depth 3: exit %d\n%s%s", code, out, errb)
	}
}
