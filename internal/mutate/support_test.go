package mutate

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func fakeMutants(perPkg map[string]int) []*Mutant {
	var out []*Mutant
	for _, pkg := range []string{"a", "b", "c"} {
		for i := range perPkg[pkg] {
			out = append(out, &Mutant{File: pkg + "/x.go", Pkg: pkg, Line: i + 1, Col: 1, Op: NegateCond})
		}
	}
	return out
}

// TestSampleDeterministicStratified: the same seed gives the same sample,
// another seed another one; every package gets its share (largest
// remainder), the sample keeps source order, and 0 means everything.
func TestSampleDeterministicStratified(t *testing.T) {
	ms := fakeMutants(map[string]int{"a": 70, "b": 25, "c": 5})
	ids := func(ms []*Mutant) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID())
		}
		return out
	}
	s1, s2, s3 := Sample(ms, 20, 7), Sample(ms, 20, 7), Sample(ms, 20, 8)
	if !slices.Equal(ids(s1), ids(s2)) {
		t.Fatal("same seed, different samples")
	}
	if slices.Equal(ids(s1), ids(s3)) {
		t.Fatal("another seed, the same sample")
	}
	count := map[string]int{}
	for _, m := range s1 {
		count[m.Pkg]++
	}
	if len(s1) != 20 || count["a"] != 14 || count["b"] != 5 || count["c"] != 1 {
		t.Fatalf("sample of %d: %v (want a 14, b 5, c 1)", len(s1), count)
	}
	if !slices.IsSortedFunc(s1, func(x, y *Mutant) int { return slices.Index(ms, x) - slices.Index(ms, y) }) {
		t.Fatal("sample is not in source order")
	}
	if got := Sample(ms, 0, 1); len(got) != len(ms) {
		t.Fatalf("--sample 0 gave %d of %d", len(got), len(ms))
	}
	// Remainders: 3 packages of 1 each, 2 to pick: the ties go by name.
	small := fakeMutants(map[string]int{"a": 1, "b": 1, "c": 1})
	if got := Sample(small, 2, 1); len(got) != 2 || got[0].Pkg != "a" || got[1].Pkg != "b" {
		t.Fatalf("remainder tie-break: %v", ids(got))
	}
}

func TestParseEquivalents(t *testing.T) {
	eqs, err := ParseEquivalents("eq.txt", []byte(`# comment

kernel/turn.go:12 cond-boundary   the loop cannot reach the bound
kernel/turn.go:13:7 remove-call same effect twice | k.emit(x)
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(eqs) != 2 || eqs[0].Reason != "the loop cannot reach the bound" || eqs[0].Source != "" ||
		eqs[1].Col != 7 || eqs[1].At != "eq.txt:4" || eqs[1].Reason != "same effect twice" || eqs[1].Source != "k.emit(x)" {
		t.Fatalf("%+v", eqs)
	}
	switch {
	case !eqs[0].Matches("kernel/turn.go", 12, 99, CondBoundary, "anything"):
		t.Error("an entry without a column or source matches any column and line text")
	case eqs[1].Matches("kernel/turn.go", 13, 8, RemoveCall, "k.emit(x)"):
		t.Error("another column matched")
	case eqs[0].Matches("kernel/turn.go", 12, 1, NegateCond, ""):
		t.Error("another operator matched")
	case !eqs[1].Matches("kernel/turn.go", 13, 7, RemoveCall, "k.emit(x)"):
		t.Error("the named mutant did not match")
	case eqs[1].Matches("kernel/turn.go", 13, 7, RemoveCall, "k.stopTimer(y)"):
		t.Error("an entry matched a line whose code changed")
	}
	for _, bad := range []struct{ src, want string }{
		{"kernel/turn.go:12 cond-boundary\n", "eq.txt:1: want FILE:LINE"},
		{"kernel/turn.go:12 cond-boundary | x < y\n", "eq.txt:1: want FILE:LINE"},
		{"\nkernel/turn.go cond-boundary why\n", `eq.txt:2: "kernel/turn.go" is not FILE:LINE`},
		{"kernel/turn.go:x cond-boundary why\n", `eq.txt:1: bad line number "x"`},
		{"kernel/turn.go:1:0 cond-boundary why\n", `eq.txt:1: bad column "0"`},
		{"kernel/turn.go:1 bogus why\n", `eq.txt:1: unknown operator "bogus"`},
	} {
		if _, err := ParseEquivalents("eq.txt", []byte(bad.src)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.src, err, bad.want)
		}
	}
}

// TestProjectEquivalentsParse: the committed allow-list parses and every
// entry is pinned to its line's code (so an edit that moves the code makes
// the entry match nothing — reported as stale by the tool — instead of
// excusing another mutant). Stale entries do not fail this test: the
// kernel's lines move with every change, and the summary lists them.
func TestProjectEquivalentsParse(t *testing.T) {
	eqs, err := ReadEquivalents("equivalent.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eqs {
		if e.Source == "" {
			t.Errorf("%s: no \" | SOURCE LINE\" pinning the entry to its code", e.At)
		}
	}
}

// TestRecordsResumeAfterTornLine: a torn last line (a killed run) is
// skipped with its file:line named, kept in the file, and the next record
// starts on a line of its own.
func TestRecordsResumeAfterTornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	w, err := openRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.write(&Record{ID: "a:1:1:arith", Status: StatusRun}); err != nil {
		t.Fatal(err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, `{"id":"b:1:1:ar`)
	f.Close()
	w, err = openRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.write(&Record{ID: "c:1:1:arith", Status: StatusRun}); err != nil {
		t.Fatal(err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	recs, warnings, err := ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ID != "a:1:1:arith" || recs[1].ID != "c:1:1:arith" {
		t.Fatalf("records %+v", recs)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "m.jsonl:2:") {
		t.Fatalf("warnings %v", warnings)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), `{"id":"b:1:1:ar`+"\n") {
		t.Fatalf("the torn line was not kept:\n%s", b)
	}
}

// TestProjectProfiles: kernel/ and fsm/ (kernel/trace too) get the
// simulator layers and the unit tests; adapters get their tests and the
// CLI's; anything else its own tests.
func TestProjectProfiles(t *testing.T) {
	pf := ProjectProfiles(DefaultSweep)
	for dir, want := range map[string]string{
		"kernel":          "oracle sim-test[sim] sim-scenarios[sim] sim-sweep[sim] unit[unit]",
		"kernel/trace":    "oracle sim-test[sim] sim-scenarios[sim] sim-sweep[sim] unit[unit]",
		"fsm":             "oracle sim-test[sim] sim-scenarios[sim] sim-sweep[sim] unit[unit]",
		"adapters/openai": "package tests[tests] ./adapters/openai ./cmd/escapement",
		"cmd/escapement":  "package tests[tests] ./cmd/escapement",
		"kernelish":       "package tests[tests] ./kernelish",
	} {
		p := pf(&Mutant{Dir: dir})
		got := p.Name
		for _, l := range p.Layers {
			got += " " + l.Name + "[" + l.Group + "]"
		}
		if p.Name == "package" {
			got += " " + strings.Join(p.Layers[0].GoTest, " ")
		}
		if got != want {
			t.Errorf("%s: %q, want %q", dir, got, want)
		}
	}
	sweep := OracleProfile(SweepPlan{Seeds: 3000, Depth: 6}).Layers[2].Exec
	if s := strings.Join(sweep, " "); !strings.Contains(s, "sim sweep --seeds 3000 --depth 6") || !strings.Contains(s, "--out {tmp}/") {
		t.Errorf("sweep command %q", s)
	}
}

// TestCaptureKeepsWhatKilled: the kill detail names the failing tests and
// panics; timeouts and build failures are recognised.
func TestCaptureKeepsWhatKilled(t *testing.T) {
	c := &capture{}
	fmt.Fprint(c, "=== RUN   TestA\n--- FAIL: TestA (0.00s)\n    a_test.go:3: boom\nFAIL\nFAIL\texample.com/a\t0.01s\n")
	for i := range 5000 {
		fmt.Fprintf(c, "noise %d\n", i)
	}
	c.flush()
	if got := c.killedBy(); got != "--- FAIL: TestA (0.00s)" {
		t.Errorf("killedBy %q", got)
	}
	c = &capture{}
	fmt.Fprint(c, "panic: test timed out after 3s\n\trunning tests:\n")
	c.flush()
	if !c.testTimedOut {
		t.Error("timeout not seen")
	}
	c = &capture{}
	fmt.Fprint(c, "# example.com/a\n./a.go:3:1: missing return\nFAIL\texample.com/a [build failed]")
	c.flush()
	if !c.buildFailed || !strings.Contains(c.head(2), "missing return") {
		t.Errorf("build failure not seen: %v %q", c.buildFailed, c.head(2))
	}
}

// TestTrimCacheKeepsTheBaseline: trimming the private build cache deletes
// what was added after the snapshot and keeps everything before it.
func TestTrimCacheKeepsTheBaseline(t *testing.T) {
	dir := t.TempDir()
	write := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := write("ab/ab01-d")
	r := &runner{cfg: Config{GoCache: dir}}
	if err := r.snapshotCache(); err != nil {
		t.Fatal(err)
	}
	added := write("cd/cd02-d")
	if err := r.trimCache(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("baseline entry removed: %v", err)
	}
	if _, err := os.Stat(added); !os.IsNotExist(err) {
		t.Errorf("entry added after the snapshot kept: %v", err)
	}
	if err := (&runner{}).trimCache(); err != nil {
		t.Errorf("no private cache: %v", err)
	}
}

// TestLockDirExcludesASecondRun: one build cache, one run at a time; the
// lock goes with its holder.
func TestLockDirExcludesASecondRun(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDir(dir); err == nil || !strings.Contains(err.Error(), "in use by another mutate run") {
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	unlock2, err := lockDir(dir)
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	unlock2()
}
