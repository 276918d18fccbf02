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
// calls, := declarations, assignments to _ (but `_ = f.Close()` is a call
// that can be dropped), a switch case's last break, a deferred call, or
// where the mutant would not compile (dropping `v > 1` from
// `if v, ok := m[s]; ok && v > 1` leaves v unused).
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
		"22 cond-boundary: if x <= limit {",
		"23 remove-return: (removed)",
		"25 drop-cond: if x >= 10 {",
		"25 cond-boundary: if x > 10 && c.ok {",
		"25 off-by-one: if x >= 11 && c.ok {",
		"25 bool-op: if x >= 10 || c.ok {",
		"26 remove-return: (removed)",
		"26 arith: return x - 1, nil",
		"28 drop-cond: if x == 5 {",
		"28 negate-cond: if x != 5 || !c.ok {",
		"28 off-by-one: if x == 6 || !c.ok {",
		"28 bool-op: if x == 5 && !c.ok {",
		"28 remove-not: if x == 5 || c.ok {",
		"29 incdec: c.n--",
		"31 remove-assign: (removed)",
		"31 arith: c.n += 2",
		"32 remove-append: (removed)",
		"33 remove-assign: (removed)",
		"33 flip-bool: c.ok = false",
		"36 remove-call: (removed)",
		"37 cond-boundary: for i := 0; i <= x; i++ {",
		"37 incdec: for i := 0; i < x; i-- {",
		"38 cond-boundary: if i >= 2 {",
		"38 off-by-one: if i > 3 {",
		"39 remove-loopctl: (removed)",
		"41 negate-cond: if i != 1 {",
		"41 off-by-one: if i == 2 {",
		"42 remove-loopctl: (removed)",
		"47 remove-assign: (removed)",
		"50 cond-boundary: if x >= 100 {",
		"70 skip-call: if err := func() error { if false { return f.Sync() }; return nil }(); err != nil {",
		"70 negate-cond: if err := f.Sync(); err == nil {",
		"71 remove-return: (removed)",
		"73 skip-call: err := func() error { if false { return f.Truncate(0) }; return nil }()",
		"73 ignore-error: err := f.Truncate(0); err = nil",
		"74 negate-cond: if err != nil {",
		"75 remove-assign: (removed)",
		"75 skip-call: err = func() error { if false { return f.Chmod(0o600) }; return nil }()",
		"75 ignore-error: err = f.Chmod(0o600); err = nil",
		"77 skip-err-check: if false && err != nil {",
		"77 negate-cond: if err == nil {",
		"78 remove-call: (removed)",
		"79 remove-return: (removed)",
		"81 remove-call: (removed)",
		"83 drop-case: case 503:",
		"83 drop-case: case 429:",
		"84 remove-assign: (removed)",
		"84 skip-redact: s = s",
		"86 bool-op: if v, ok := m[s]; ok || v > 1 {",
		"86 cond-boundary: if v, ok := m[s]; ok && v >= 1 {",
		"86 off-by-one: if v, ok := m[s]; ok && v > 2 {",
		"87 remove-assign: (removed)",
		"87 slice-bound: s = s[1+1:len(s)]",
		"87 slice-bound: s = s[1:len(s)-1]",
		"89 index-swap: i := strings.IndexByte(s, ')')",
		"90 drop-suffix: return s[:i], nil",
		"90 slice-bound: return s[:i-1] + fmt.Sprintf(\" [%d]\", i), nil",
		"93 drop-cond: func quiet(s string) bool { return s == \"\" }",
		"93 return-bool: func quiet(s string) bool { return !(s == \"\" || strings.TrimSpace(s) == \"\") }",
		"93 negate-cond: func quiet(s string) bool { return s != \"\" || strings.TrimSpace(s) == \"\" }",
		"93 bool-op: func quiet(s string) bool { return s == \"\" && strings.TrimSpace(s) == \"\" }",
		"93 negate-cond: func quiet(s string) bool { return s == \"\" || strings.TrimSpace(s) != \"\" }",
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
	inStep := 0
	for _, m := range all {
		if m.Func() == "counter.step" {
			inStep++
		}
	}
	if inStep == 0 || len(some) != len(all)-inStep {
		t.Fatalf("without exclusion %d mutants (%d in counter.step), with %d", len(all), inStep, len(some))
	}
	for _, m := range some {
		if m.Func() == "counter.step" {
			t.Errorf("%s in the excluded %q", m.ID(), m.Func())
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

// TestUncompilableMutantsDropped: the fixture's `ok && v > 1` with `v > 1`
// dropped leaves v unused, so the mutant is planted (the generator makes
// it) but type-checking refuses it and Generate leaves it out; every
// mutant of a type-checked operator that Generate keeps compiles.
func TestUncompilableMutantsDropped(t *testing.T) {
	p := loadOps(t)
	f := p.Files[0]
	g := &generator{pkg: p, file: f, tf: p.Fset.File(f.AST.Pos())}
	for _, d := range f.AST.Decls {
		g.decl(d)
	}
	var planted *Mutant
	for _, m := range g.out {
		if m.Op == DropCond && strings.HasPrefix(m.Before, "if v, ok := m[s]; ok && v > 1") {
			planted = m
		}
	}
	if planted == nil {
		t.Fatal("the generator plants no drop-cond on `ok && v > 1`")
	}
	if err := p.compilesErr(f, planted); err == nil || !strings.Contains(err.Error(), "declared and not used") {
		t.Fatalf("%s: type-check error %v, want v declared and not used", planted.Diff(), err)
	}
	kept := 0
	for _, m := range Generate(p, Exclusions{}) {
		if m.ID() == planted.ID() {
			t.Fatalf("%s was kept", m.ID())
		}
		if typeChecked[m.Op] {
			kept++
			if err := p.compilesErr(f, m); err != nil {
				t.Errorf("%s kept but does not compile: %v", m.ID(), err)
			}
		}
	}
	if kept == 0 {
		t.Fatal("no type-checked mutant kept")
	}
}
