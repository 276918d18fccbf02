package simcli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/escapement/escapement/sim/explore"
)

// exploreLine is the summary line's counts and digest, without the time.
var exploreLine = regexp.MustCompile(`(?m)^explore: (.*) in [^;]+; digest ([0-9a-f]{16})$`)

func parseExplore(t *testing.T, out string) (counts, digest string) {
	t.Helper()
	m := exploreLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line in:\n%s", out)
	}
	return m[1], m[2]
}

// TestExploreDeterministic: explore twice — and with one job or two —
// gives the same counts and digest, exhaustively, with no violation.
func TestExploreDeterministic(t *testing.T) {
	args := []string{"sim", "explore", "../../scenarios/same-instant-cancel-and-timeout.yaml", "../../scenarios/f09-interrupt-races-results.yaml", "--out", t.TempDir()}
	code1, out1, errb := runCLI(t, args...)
	code2, out2, _ := runCLI(t, append(args, "--jobs", "1")...)
	if code1 != exitOK || code2 != exitOK {
		t.Fatalf("exit %d, %d\n%s%s", code1, code2, out1, errb)
	}
	c1, d1 := parseExplore(t, out1)
	c2, d2 := parseExplore(t, out2)
	if c1 != c2 || d1 != d2 {
		t.Fatalf("two explorations differ:\n%s\n%s", out1, out2)
	}
	if !strings.Contains(c1, "; exhaustive: ") || !strings.Contains(c1, " 0 violation(s)") || strings.Contains(out1, "PARTIAL") {
		t.Fatalf("want an exhaustive, clean exploration:\n%s", out1)
	}
}

// TestExploreBoundsSaySo: a bound that stops an exploration early is
// printed and exits 1 — never a claim of "exhaustive" — unless --partial.
func TestExploreBoundsSaySo(t *testing.T) {
	file := "../../scenarios/f09-interrupt-races-results.yaml"
	for _, bound := range [][]string{{"--max-states", "5"}, {"--time", "1ns"}} {
		args := append([]string{"sim", "explore", file, "--out", t.TempDir()}, bound...)
		code, out, errb := runCLI(t, args...)
		if code != exitCheckFailed || !strings.Contains(out, "NOT exhaustive") || !strings.Contains(errb, "--partial") {
			t.Fatalf("%v: exit %d\n%s%s", bound, code, out, errb)
		}
		if code, out, _ := runCLI(t, append(args, "--partial")...); code != exitOK || !strings.Contains(out, "NOT exhaustive") {
			t.Fatalf("%v --partial: exit %d\n%s", bound, code, out)
		}
	}
}

// TestExploreSmallScopeReduced: the smallest small scope (one agent, two
// inputs) runs exhaustively and counts its worlds: 4 trees × (1+3+9)
// sequences.
func TestExploreSmallScopeReduced(t *testing.T) {
	code, out, errb := runCLI(t, "sim", "explore", "--small-scope", "--agents", "1", "--max-inputs", "2", "--out", t.TempDir())
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errb)
	}
	counts, _ := parseExplore(t, out)
	if !strings.Contains(counts, "4 small-scope worlds (trees of ≤1 agents) × input sequences of ≤2 inputs = 52 worlds") || !strings.Contains(counts, "; exhaustive: ") {
		t.Fatalf("counts: %s", counts)
	}
}

func TestExploreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--small-scope", "x.yaml"}, "takes no PATH"},
		{[]string{"--family", "x.yaml"}, "takes no PATH"},
		{[]string{"--family", "--small-scope"}, "give one"},
		{[]string{"--small-scope", "--agents", "4"}, "--agents"},
		{[]string{"--max-inputs", "-2"}, "--max-inputs"},
		{[]string{"--max-states", "-1"}, "--max-states"},
		{[]string{"--jobs", "0"}, "--jobs"},
		{[]string{"/nonexistent.yaml"}, "nonexistent"},
	} {
		code, _, errb := runCLI(t, append([]string{"sim", "explore"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errb, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 mentioning %q", tc.args, code, errb, tc.msg)
		}
	}
}

// TestExploreInterrupted: a signal stops the exploration: exit 130, and
// the counts so far are printed as not exhaustive.
func TestExploreInterrupted(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGINT
	a, out, errb := testApp(sigs)
	err := a.runExplore(context.Background(), []string{filepath.Join("..", "..", "scenarios")}, exploreFlags{Plan: explore.Plan{MaxStates: 0, MaxInputs: -1, Nudge: 1e6}, jobs: 1, out: t.TempDir()})
	if code := exitCodeOf(err, nil); code != exitInterrupted || !strings.Contains(errb.String(), "interrupted after") {
		t.Fatalf("exit %d (%v), stderr %q; want 130", code, err, errb)
	}
	if counts, _ := parseExplore(t, out.String()); !strings.Contains(counts, "NOT exhaustive") {
		t.Fatalf("an interrupted exploration claimed to be exhaustive:\n%s", out)
	}
}

// TestExploreJudgesExpectations: a scenario whose expectation fails in a
// plain run fails its exploration (it once passed it: only the invariants
// were judged), with the expectation named, a scenario written that
// reproduces it, and no claim of exhaustiveness; a schedule-dependent
// expectation is counted: on how many schedules it held.
func TestExploreJudgesExpectations(t *testing.T) {
	src, err := os.ReadFile("../../scenarios/cancel-single-child.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Replace(string(src), "slow: interrupted", "slow: completed", 1)
	file := filepath.Join(t.TempDir(), "wrong.yaml")
	if err := os.WriteFile(file, []byte(wrong), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, errb := runCLI(t, "sim", "explore", file, "--out", out)
	counts, _ := parseExplore(t, stdout)
	if code != exitCheckFailed || !strings.Contains(stdout, "FAIL") || !strings.Contains(stdout, "outcomes.slow: interrupted, want completed") ||
		!strings.Contains(stdout, "reproduce: escapement sim "+out) || !strings.Contains(counts, "NOT exhaustive: 1 stopped at their first violation") {
		t.Fatalf("exit %d\n%s%s", code, stdout, errb)
	}
	code, stdout, errb = runCLI(t, "sim", "explore", "../../scenarios/same-instant-cancel-and-timeout.yaml", "--out", t.TempDir())
	if code != exitOK || !strings.Contains(stdout, "same-instant-cancel-and-timeout: expect outcomes.main (schedule-dependent) held on 1 of 2 schedules with every input at its instant") {
		t.Fatalf("exit %d\n%s%s", code, stdout, errb)
	}
}

// TestExploreFamily: --family explores the generated everyday family
// (here cut short by --max-states, and said so).
func TestExploreFamily(t *testing.T) {
	code, stdout, errb := runCLI(t, "sim", "explore", "--family", "--max-states", "20", "--partial", "--out", t.TempDir())
	counts, _ := parseExplore(t, stdout)
	if code != exitOK || !strings.Contains(counts, "36 everyday scenario(s) (shapes [pair chain fan] × chunks [2 5 10] × inputs [1 3 5 7])") ||
		!strings.Contains(counts, "NOT exhaustive") || !strings.Contains(stdout, "everyday-fan-c10-i7") {
		t.Fatalf("exit %d\n%s%s", code, stdout, errb)
	}
}

// TestExploreOutUnwritable: a failing scenario whose reproduction cannot
// be written to --out (its name is too long for a file name) is a usage
// error naming --out, after the summary, not a silent success.
func TestExploreOutUnwritable(t *testing.T) {
	src, err := os.ReadFile("../../scenarios/cancel-single-child.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wrong := strings.Replace(string(src), "slow: interrupted", "slow: completed", 1)
	wrong = strings.Replace(wrong, "name: cancel-single-child", "name: cancel-single-child-"+strings.Repeat("x", 300), 1)
	file := filepath.Join(t.TempDir(), "wrong.yaml")
	if err := os.WriteFile(file, []byte(wrong), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, errb := runCLI(t, "sim", "explore", file, "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(errb, "--out: ") || !strings.Contains(stdout, "FAIL") {
		t.Fatalf("exit %d\n%s%s", code, stdout, errb)
	}
}
