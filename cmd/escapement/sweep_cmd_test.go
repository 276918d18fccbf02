package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	sweepLine = regexp.MustCompile(`^sweep: (\d+) worlds .* in \S+: \S+ worlds/s, (\d+) events .*, (\d+) violation\(s\), probes (\d+)/(\d+) reached, digest ([0-9a-f]{16})`)
)

func parseSweep(t *testing.T, out string) []string {
	t.Helper()
	m := sweepLine.FindStringSubmatch(strings.SplitN(out, "\n", 2)[0])
	if m == nil {
		t.Fatalf("no summary line in:\n%s", out)
	}
	return m
}

// TestSweepDeterministicAndSharded: the same seeds give the same summary;
// two shards (one by flag, one by the Kubernetes environment) merge into
// it exactly.
func TestSweepDeterministicAndSharded(t *testing.T) {
	dir := t.TempDir()
	args := []string{"sim", "sweep", "--seeds", "120", "--depth", "4", "--jobs", "2", "--out", filepath.Join(dir, "fail")}
	code1, out1, _ := runCLI(t, args...)
	code2, out2, _ := runCLI(t, append(args, "--jobs", "1")...)
	a, b := parseSweep(t, out1), parseSweep(t, out2)
	if code1 != code2 || a[1] != "120" || a[1] != b[1] || a[2] != b[2] || a[3] != b[3] || a[6] != b[6] {
		t.Fatalf("same seeds, different summaries:\n%s\n%s", out1, out2)
	}
	if a[3] != "0" {
		t.Fatalf("violations in a clean sweep:\n%s", out1)
	}
	// 120 worlds rarely reach every probe: then a whole sweep exits 1 and
	// says which.
	if a[4] != a[5] && (code1 != exitCheckFailed || !strings.Contains(out1, "never reached")) {
		t.Fatalf("unreached probes must fail a whole sweep: exit %d\n%s", code1, out1)
	}

	s0, s1 := filepath.Join(dir, "s0.json"), filepath.Join(dir, "s1.json")
	if code, out, errb := runCLI(t, append(args, "--shard", "0/2", "--summary", s0)...); code != exitOK {
		t.Fatalf("shard 0: exit %d %s %s", code, out, errb)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	t.Setenv("ESCAPEMENT_SHARDS", "2")
	if code, out, errb := runCLI(t, append(args, "--summary", s1)...); code != exitOK || !strings.Contains(out, "shards [1] of 2") {
		t.Fatalf("shard 1 from the environment: exit %d %s %s", code, out, errb)
	}
	code, out, _ := runCLI(t, "sim", "sweep", "merge", s0, s1)
	m := parseSweep(t, out)
	if m[1] != a[1] || m[2] != a[2] || m[6] != a[6] || code != code1 {
		t.Fatalf("merged shards differ from the whole sweep:\n%s\n%s", out, out1)
	}
	if code, out, _ := runCLI(t, "sim", "sweep", "merge", s0); code != exitCheckFailed || !strings.Contains(out, "incomplete") {
		t.Fatalf("merging one shard of two must fail: exit %d\n%s", code, out)
	}
}

func TestSweepUsageErrors(t *testing.T) {
	t.Setenv("JOB_COMPLETION_INDEX", "")
	os.Unsetenv("JOB_COMPLETION_INDEX")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"sim", "sweep", "--seeds", "0"}, "seeds must be at least 1"},
		{[]string{"sim", "sweep", "--depth", "9"}, "depth must be in 0..8"},
		{[]string{"sim", "sweep", "--shard", "2/2"}, "--shard"},
		{[]string{"sim", "sweep", "--jobs", "0"}, "--jobs"},
		{[]string{"sim", "sweep", "merge", "/nonexistent.json"}, "nonexistent"},
	} {
		code, _, errb := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(errb, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 mentioning %q", tc.args, code, errb, tc.msg)
		}
	}
	t.Setenv("JOB_COMPLETION_INDEX", "0")
	os.Unsetenv("ESCAPEMENT_SHARDS")
	if code, _, errb := runCLI(t, "sim", "sweep", "--seeds", "1"); code != exitUsage || !strings.Contains(errb, "ESCAPEMENT_SHARDS") {
		t.Errorf("JOB_COMPLETION_INDEX without a count: exit %d %q", code, errb)
	}
}
