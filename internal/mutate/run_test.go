package mutate

import (
	"context"
	"crypto/sha256"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// treeHashes hashes every file under dir.
func treeHashes(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = sha256.Sum256(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pick returns the toy mutant on the line holding text with operator op.
func pick(t *testing.T, ms []*Mutant, op Operator, text string) *Mutant {
	t.Helper()
	for _, m := range ms {
		if m.Op == op && strings.Contains(m.Before, text) {
			return m
		}
	}
	t.Fatalf("no %s mutant on a line with %q", op, text)
	return nil
}

// TestRunnerReportsLayers: on testdata/toy, with two layers in two groups,
// the runner reports which layer killed each mutant — one killed by the
// first layer, one only by the second, one by neither, one that hangs (a
// timeout), one that does not compile — records the allow-listed one as
// equivalent, leaves every file of the fixture as it was, and a second run
// with the same output file judges nothing again.
func TestRunnerReportsLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a fixture module many times")
	}
	root := filepath.Join("testdata", "toy")
	before := treeHashes(t, root)
	pkgs, err := Load(root, "./...")
	if err != nil {
		t.Fatal(err)
	}
	all := Generate(pkgs[0], Exclusions{})
	add := pick(t, all, Arith, "return a + b")
	positiveOff := pick(t, all, OffByOne, "return n > 0")
	positiveBoundary := pick(t, all, CondBoundary, "return n > 0")
	hang := pick(t, all, IncDec, "i++")
	broken := pick(t, all, RemoveReturn, "return -1")
	ms := []*Mutant{add, positiveOff, positiveBoundary, hang, broken}

	profile := Profile{
		Name:   "toy",
		Groups: []string{"first", "second"},
		Layers: []Layer{
			{Name: "add-sum", Group: "first", GoTest: []string{"-run", "TestAdd|TestSum", "."}},
			{Name: "positive", Group: "second", GoTest: []string{"-run", "TestPositive", "."}},
		},
	}
	out := filepath.Join(t.TempDir(), "toy.jsonl")
	var log strings.Builder
	cfg := Config{
		Root:          root,
		Profile:       func(*Mutant) Profile { return profile },
		Jobs:          2,
		Out:           out,
		TimeoutFactor: 1,
		MinTimeout:    3 * time.Second,
		Equivalents:   []Equivalent{{File: positiveBoundary.File, Line: positiveBoundary.Line, Op: CondBoundary, Reason: "for the test's sake"}},
		Log:           &log,
	}
	recs, err := Run(context.Background(), cfg, ms)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(recs) != len(ms) {
		t.Fatalf("%d records for %d mutants\n%s", len(recs), len(ms), log.String())
	}
	want := map[string]string{ // mutant → status and each layer's result
		add.ID():              "run add-sum=killed positive=survived",
		positiveOff.ID():      "run add-sum=survived positive=killed",
		positiveBoundary.ID(): "run add-sum=survived positive=survived",
		hang.ID():             "run add-sum=timeout positive=survived",
		broken.ID():           "uncompilable",
	}
	for _, r := range recs {
		got := r.Status
		for _, l := range r.Layers {
			got += " " + l.Name + "=" + l.Result
		}
		if got != want[r.ID] {
			t.Errorf("%s (%s): %q, want %q %s", r.ID, r.Diff(), got, want[r.ID], r.CompileError)
		}
	}
	if r := recs[0]; r.ID != add.ID() || !strings.Contains(r.Layer("add-sum").Detail, "TestAdd") {
		t.Errorf("the kill of %s does not name TestAdd: %+v", r.ID, r.Layers)
	}
	if r := recs[2]; r.Equivalent != "for the test's sake" {
		t.Errorf("equivalent not recorded: %+v", r)
	}
	if r := recs[4]; !strings.Contains(r.CompileError, "missing return") {
		t.Errorf("compile error: %q", r.CompileError)
	}

	tally := Count(recs, profile.Groups, cfg.Equivalents)
	if tally.Judged != 5 || tally.Uncompilable != 1 || tally.Equivalent != 1 || tally.Scored != 3 ||
		tally.KilledFirst != 2 || tally.KilledLater != 1 || tally.Survived != 0 || tally.Timeouts != 1 {
		t.Errorf("tally %+v", tally)
	}
	var report strings.Builder
	if err := WriteReport(&report, recs, []Profile{profile}, cfg.Equivalents, ReportMeta{Command: "test"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| **killed by layer group first** | **2** | **66.7 %** |", "only by second** | **1** |",
		"Equivalent, not scored (1)", "Uncompilable, discarded (1)", "missing return"} {
		if !strings.Contains(report.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, report.String())
		}
	}

	after := treeHashes(t, root)
	if len(after) != len(before) {
		t.Errorf("files in the fixture: %d before, %d after", len(before), len(after))
	}
	for p, h := range before {
		if after[p] != h {
			t.Errorf("%s changed", p)
		}
	}

	// Resumed: everything is in the output already; nothing runs.
	log.Reset()
	again, err := Run(context.Background(), cfg, ms)
	if err != nil || len(again) != len(ms) || !strings.Contains(log.String(), "0 to run") {
		t.Fatalf("resume: %d records, %v\n%s", len(again), err, log.String())
	}

	// A record a layer of which could not run is judged again on resume,
	// and the new record wins.
	w, err := openRecords(out)
	if err != nil {
		t.Fatal(err)
	}
	bad := *recs[0]
	bad.Layers = []LayerResult{{Name: "add-sum", Group: "first", Result: Errored, Detail: "tests did not build"}}
	if err := w.write(&bad); err != nil {
		t.Fatal(err)
	}
	if err := w.close(); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	again, err = Run(context.Background(), cfg, ms)
	if err != nil || !strings.Contains(log.String(), "1 to run (1 of them again") {
		t.Fatalf("retry: %v\n%s", err, log.String())
	}
	if r := again[0]; r.Incomplete() || r.Layer("add-sum").Result != Killed {
		t.Fatalf("retried record %+v", r)
	}
	written, _, err := ReadRecords(out)
	if err != nil || Latest(written)[add.Key()].Layer("add-sum").Result != Killed {
		t.Fatalf("the file's latest record of %s is not the retried one (%v)", add.ID(), err)
	}
}

// TestBaselineMustPass: a layer that fails on the unmutated tree stops the
// run before any mutant (every mutant would look killed).
func TestBaselineMustPass(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a fixture module")
	}
	root := filepath.Join("testdata", "toy")
	pkgs, err := Load(root, "./...")
	if err != nil {
		t.Fatal(err)
	}
	ms := Generate(pkgs[0], Exclusions{})[:1]
	profile := Profile{Name: "toy", Groups: []string{"g"}, Layers: []Layer{
		{Name: "false", Group: "g", Exec: []string{"false"}},
	}}
	out := filepath.Join(t.TempDir(), "x.jsonl")
	_, err = Run(context.Background(), Config{Root: root, Profile: func(*Mutant) Profile { return profile }, Out: out}, ms)
	if err == nil || !strings.Contains(err.Error(), "fails on the unmutated tree") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output written after a failed baseline: %v", err)
	}
}
