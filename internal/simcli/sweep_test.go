package simcli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/escapement/escapement/internal/simtest"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
)

var (
	sweepLine = regexp.MustCompile(`^sweep: (\d+) worlds .* in \S+: \S+ worlds/s, (\d+) events .*, (\d+) violation\(s\), probes (\d+)/(\d+) reached(?: \(\d+ skipped: [^)]*\))?, digest ([0-9a-f]{16})`)
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
	unsetenv(t, "JOB_COMPLETION_INDEX")
	dir := t.TempDir()
	args := []string{"sim", "sweep", "--seeds", "120", "--depth", "4", "--jobs", "2", "--out", filepath.Join(dir, "fail")}
	code1, out1, _ := runCLI(t, args...)
	code2, out2, _ := runCLI(t, append(args, "--jobs", "1")...)
	a, b := parseSweep(t, out1), parseSweep(t, out2)
	if code1 != code2 || a[1] != "120" || !slices.Equal(a[1:], b[1:]) {
		t.Fatalf("same seeds, different summaries:\n%s\n%s", out1, out2)
	}
	if a[3] != "0" {
		t.Fatalf("violations in a clean sweep:\n%s", out1)
	}
	// 120 worlds rarely reach every probe: then a whole sweep exits 1 and
	// says which; when they do, it exits 0.
	if a[4] != a[5] {
		if code1 != exitCheckFailed || !strings.Contains(out1, "never reached") {
			t.Fatalf("unreached probes must fail a whole sweep: exit %d\n%s", code1, out1)
		}
	} else if code1 != exitOK || strings.Contains(out1, "never reached") {
		t.Fatalf("a clean sweep reaching every probe must exit 0: exit %d\n%s", code1, out1)
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
	if !slices.Equal(m[1:], a[1:]) || code != code1 { // worlds, events, violations, probes, digest
		t.Fatalf("merged shards differ from the whole sweep:\n%s\n%s", out, out1)
	}
	if code, out, _ := runCLI(t, "sim", "sweep", "merge", s0); code != exitCheckFailed || !strings.Contains(out, "incomplete") {
		t.Fatalf("merging one shard of two must fail: exit %d\n%s", code, out)
	}
}

// TestSweepCrashEvery: --crash-every also runs every world crashed after
// each N-th step; the summary counts those runs, its digest covers them
// (so it differs from the plain sweep's), and it is deterministic across
// --jobs.
func TestSweepCrashEvery(t *testing.T) {
	unsetenv(t, "JOB_COMPLETION_INDEX")
	dir := t.TempDir()
	args := []string{"sim", "sweep", "--seeds", "30", "--depth", "4", "--out", filepath.Join(dir, "fail")}
	_, plain, _ := runCLI(t, args...)
	args = append(args, "--crash-every", "2")
	_, out1, _ := runCLI(t, append(args, "--jobs", "2")...)
	_, out2, _ := runCLI(t, append(args, "--jobs", "1")...)
	p, a, b := parseSweep(t, plain), parseSweep(t, out1), parseSweep(t, out2)
	if !slices.Equal(a[1:], b[1:]) || a[3] != "0" {
		t.Fatalf("crashing sweeps differ or fail:\n%s\n%s", out1, out2)
	}
	if ea, ep := atoi(t, a[2]), atoi(t, p[2]); a[6] == p[6] || ea <= ep || !strings.Contains(out1, "each also crashed after every 2 step(s): ") {
		t.Fatalf("the crashed runs are not in the summary:\n%s\n%s", plain, out1)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSweepUsageErrors(t *testing.T) {
	unsetenv(t, "JOB_COMPLETION_INDEX")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"sim", "sweep", "--seeds", "0"}, "seeds must be at least 1"},
		{[]string{"sim", "sweep", "--depth", "9"}, "depth must be in 0..8"},
		{[]string{"sim", "sweep", "--shard", "2/2"}, "--shard"},
		{[]string{"sim", "sweep", "--jobs", "0"}, "--jobs"},
		{[]string{"sim", "sweep", "--crash-every", "-1"}, "crash-every must not be negative"},
		{[]string{"sim", "sweep", "merge", "/nonexistent.json"}, "nonexistent"},
	} {
		code, _, errb := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(errb, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 mentioning %q", tc.args, code, errb, tc.msg)
		}
	}
	t.Setenv("JOB_COMPLETION_INDEX", "0")
	unsetenv(t, "ESCAPEMENT_SHARDS")
	if code, _, errb := runCLI(t, "sim", "sweep", "--seeds", "1"); code != exitUsage || !strings.Contains(errb, "ESCAPEMENT_SHARDS") {
		t.Errorf("JOB_COMPLETION_INDEX without a count: exit %d %q", code, errb)
	}
}

// unsetenv unsets key for the test and restores it afterwards.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // registers the restore
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}

// TestSweepInterrupted: a signal from the app's hook (SIGINT or SIGTERM)
// stops the sweep early: exit 130 and the partial summary.
func TestSweepInterrupted(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	a, out, errb := testApp(sigs)
	err := a.runSweep(context.Background(), sweepFlags{seeds: 20000, from: 1, depth: 6, jobs: 2, recheck: 10, out: t.TempDir()})
	if code := exitCodeOf(err, nil); code != exitInterrupted || !strings.Contains(errb.String(), "interrupted after") {
		t.Fatalf("exit %d (%v), stderr %q; want 130", code, err, errb)
	}
	if m := parseSweep(t, out.String()); m[1] == "20000" {
		t.Fatalf("every world ran despite the interrupt:\n%s", out)
	}
}

// TestSweepStopsAtFirstBrokenWorld: a generated world the simulator cannot
// run stops the sweep at once and is a failed check (exit 1) naming the
// seed, not a usage error.
func TestSweepStopsAtFirstBrokenWorld(t *testing.T) {
	var calls atomic.Int64
	broken := func(kernel.Config) (sim.Core, error) {
		calls.Add(1)
		return nil, errors.New("no core today")
	}
	a, _, _ := testApp(make(chan os.Signal))
	const jobs = 2
	err := a.runSweep(context.Background(), sweepFlags{seeds: 2000, from: 1, depth: 2, jobs: jobs, out: t.TempDir(), core: broken})
	if code := exitCodeOf(err, nil); code != exitCheckFailed || !strings.Contains(fmt.Sprint(err), "does not run") || !strings.Contains(fmt.Sprint(err), "--seeds 1") {
		t.Fatalf("exit %d: %v; want 1 naming the world that does not run", code, err)
	}
	// Each worker may have started one more world before the cancel.
	if n := calls.Load(); n > 2*jobs {
		t.Fatalf("%d worlds ran after the first one failed to run", n-1)
	}
}

// TestSweepOutNotWritable: a failing world that cannot be written to --out
// is a usage error (exit 2) naming --out.
func TestSweepOutNotWritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, _, _ := testApp(make(chan os.Signal))
	err := a.runSweep(context.Background(), sweepFlags{seeds: 1, from: 1, depth: 1, jobs: 1, out: file, core: simtest.DropsFirstStep}) // loses the first step's effects: the world fails
	if code := exitCodeOf(err, nil); code != exitUsage || !strings.Contains(fmt.Sprint(err), "--out") {
		t.Fatalf("exit %d: %v; want 2 naming --out", code, err)
	}
}

// TestSweepOutReproduces: a failing world is shrunk and written to --out,
// and the summary names the file with the command that runs it. The failure
// belongs to the broken core, so the file (a valid scenario) loads and, with
// the real kernel, passes: exit 0 from `escapement sim FILE`.
func TestSweepOutReproduces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fail")
	a, out, _ := testApp(make(chan os.Signal))
	err := a.runSweep(context.Background(), sweepFlags{seeds: 1, from: 1, depth: 1, jobs: 1, out: dir, core: simtest.DropsFirstStep})
	if code := exitCodeOf(err, nil); code != exitCheckFailed {
		t.Fatalf("exit %d: %v; want 1\n%s", code, err, out)
	}
	m := regexp.MustCompile(`shrunk to \d+ agent\(s\), \d+ events: escapement sim (\S+)`).FindStringSubmatch(out.String())
	if m == nil || filepath.Dir(m[1]) != dir {
		t.Fatalf("no shrunk file under %s named in:\n%s", dir, out)
	}
	if code, o, errb := runCLI(t, "sim", m[1]); code != exitOK {
		t.Fatalf("sim %s: exit %d\n%s\n%s", m[1], code, o, errb)
	}
}
