package mutate

import (
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

func loadOps(t *testing.T) *Package {
	t.Helper()
	pkgs, err := Load("testdata/ops", "./...")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 {
		t.Fatalf("%d packages", len(pkgs))
	}
	return pkgs[0]
}

// TestOperatorsOnFixture: every operator produces exactly the expected
// mutants of testdata/ops/ops.go — each a one-line change of the source
// (a removal wraps the statement in `if false { ... }`) — and nothing else:
// not in constants, test files, generated files, files for another
// platform, a String method, panic/Errorf/Sprintf/errors.New arguments, log
// calls, := declarations, assignments to _, or a switch case's last break.
func TestOperatorsOnFixture(t *testing.T) {
	p := loadOps(t)
	var files []string
	for _, f := range p.Files {
		files = append(files, f.Rel)
	}
	if !slices.Equal(files, []string{"ops.go"}) {
		t.Fatalf("files mutated: %v (want only ops.go: no test, generated or other-platform file)", files)
	}
	want := []string{
		"20 cond-boundary: if x <= limit {",
		"21 remove-return: (removed)",
		"23 cond-boundary: if x > 10 && c.ok {",
		"23 off-by-one: if x >= 11 && c.ok {",
		"23 bool-op: if x >= 10 || c.ok {",
		"24 remove-return: (removed)",
		"24 arith: return x - 1, nil",
		"26 negate-cond: if x != 5 || !c.ok {",
		"26 off-by-one: if x == 6 || !c.ok {",
		"26 bool-op: if x == 5 && !c.ok {",
		"26 remove-not: if x == 5 || c.ok {",
		"27 incdec: c.n--",
		"29 remove-assign: (removed)",
		"29 arith: c.n += 2",
		"30 remove-append: (removed)",
		"31 remove-assign: (removed)",
		"31 flip-bool: c.ok = false",
		"34 remove-call: (removed)",
		"35 cond-boundary: for i := 0; i <= x; i++ {",
		"35 incdec: for i := 0; i < x; i-- {",
		"36 cond-boundary: if i >= 2 {",
		"36 off-by-one: if i > 3 {",
		"37 remove-loopctl: (removed)",
		"39 negate-cond: if i != 1 {",
		"39 off-by-one: if i == 2 {",
		"40 remove-loopctl: (removed)",
		"45 remove-assign: (removed)",
		"48 cond-boundary: if x >= 100 {",
	}
	ms := Generate(p, Exclusions{})
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%d %s: %s", m.Line, m.Op, m.After))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("mutants:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	seenOps := map[Operator]bool{}
	src := p.Files[0].Src
	for _, m := range ms {
		seenOps[m.Op] = true
		mut := m.Source()
		if _, err := parser.ParseFile(token.NewFileSet(), "ops.go", mut, 0); err != nil {
			t.Errorf("%s: mutated source does not parse: %v", m.ID(), err)
		}
		// Exactly the mutant's line differs (a removal keeps its line too).
		ol, ml := bytes.Split(src, []byte("\n")), bytes.Split(mut, []byte("\n"))
		if len(ol) != len(ml) {
			t.Fatalf("%s: line count changed", m.ID())
		}
		for i := range ol {
			if differs := !bytes.Equal(ol[i], ml[i]); differs != (i+1 == m.Line) {
				t.Errorf("%s: line %d differs=%v", m.ID(), i+1, differs)
			}
		}
		line := strings.TrimSpace(string(ml[m.Line-1]))
		if m.After == "(removed)" {
			if want := "if false { " + m.Before + " }"; line != want {
				t.Errorf("%s: removal wrote %q, want %q", m.ID(), line, want)
			}
		} else if line != m.After {
			t.Errorf("%s: line %q, After %q", m.ID(), line, m.After)
		}
		if m.SrcSHA256 != sha256Hex(src) {
			t.Errorf("%s: source hash", m.ID())
		}
	}
	for _, op := range Operators() {
		if !seenOps[op] {
			t.Errorf("operator %s has no case in the fixture", op)
		}
	}
	// Deterministic: a second generation gives the same IDs and sources.
	again := Generate(loadOps(t), Exclusions{})
	for i := range ms {
		if ms[i].ID() != again[i].ID() || !bytes.Equal(ms[i].Source(), again[i].Source()) {
			t.Fatalf("generation %d differs: %s vs %s", i, ms[i].ID(), again[i].ID())
		}
	}
}

// TestExcludedFuncs: a function on the exclusion list gets no mutants.
func TestExcludedFuncs(t *testing.T) {
	p := loadOps(t)
	all := Generate(p, Exclusions{})
	some := Generate(p, Exclusions{Funcs: map[string]string{"ops.counter.step": "test"}})
	if len(all) == 0 || len(some) != 0 {
		t.Fatalf("without exclusion %d mutants, with %d (want 0)", len(all), len(some))
	}
	for _, m := range all {
		if m.Func() != "counter.step" {
			t.Errorf("%s in %q", m.ID(), m.Func())
		}
	}
}

func TestParseOperator(t *testing.T) {
	for _, op := range Operators() {
		if got, err := ParseOperator(string(op)); err != nil || got != op {
			t.Errorf("%s: %v %v", op, got, err)
		}
	}
	if _, err := ParseOperator("bogus"); err == nil || !strings.Contains(err.Error(), "cond-boundary") {
		t.Errorf("bogus: %v", err)
	}
}
