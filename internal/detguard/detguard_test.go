package detguard

import (
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestKernelAndSimAreDeterministic: the production code of kernel/ and sim/
// (and the helper they share to order a map's keys) passes the guard.
func TestKernelAndSimAreDeterministic(t *testing.T) {
	fs, err := Check("../..", "./fsm/...", "./kernel/...", "./sim/...", "./internal/keys")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		t.Error(f)
	}
}

// TestGuardCatchesPlantedCode copies kernel/ (with the module's packages it
// imports, and the module files) into a temporary module, plants a file that reads the clock, uses
// the global rand, starts a goroutine and ranges over maps (directly and
// through maps.Keys/Values/All, with markers in the right and the wrong
// places), and shows the guard reports exactly those, in order —
// production code stays untouched.
func TestGuardCatchesPlantedCode(t *testing.T) {
	tmp := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		copyFile(t, filepath.Join("../..", f), filepath.Join(tmp, f))
	}
	// kernel/ and every package of this module it imports.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.ImportPath}}{{end}}{{end}}", "../../kernel").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		dir := strings.TrimPrefix(strings.TrimPrefix(pkg, "github.com/escapement/escapement"), "/")
		files, _ := filepath.Glob(filepath.Join("../..", dir, "*.go"))
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				copyFile(t, f, filepath.Join(tmp, dir, filepath.Base(f)))
			}
		}
	}
	if fs, err := Check(tmp, "./kernel/..."); err != nil || len(fs) != 0 {
		t.Fatalf("the unmodified copy must pass: %v %v", fs, err)
	}
	// Every map range whose variable is named badN must be reported, none
	// named okN.
	planted := `package kernel

import (
	"maps"
	"math/rand/v2"
	"slices"
	"time"
)

func planted(m map[string]int) (time.Duration, int) {
	start := time.Now()
	n := rand.IntN(10)
	go func() {}()
	for bad1 := range map[string]int{"a": 1} {
		_ = bad1
	}
	r := rand.New(rand.NewPCG(1, 2)) // a seeded source is fine
	_ = r.IntN(3)

	for ok1 := range m { // determinism: a trailing marker allows its own line
		_ = ok1
	}
	// determinism: a comment above allows the line right after it,
	// however many lines it takes.
	for ok2 := range m {
		_ = ok2
	}
	for ok3 := range m { /* determinism: a block comment works too */
		_ = ok3
	}
	_ = n // determinism: a trailing marker does not allow the next line
	for bad2 := range m {
		_ = bad2
	}
	// determinism: a comment above allows only the line right after it
	_ = n
	for bad3 := range m {
		_ = bad3
	}
	for bad4 := range m { // nondeterminism: not the marker
		_ = bad4
	}
	for bad5 := range m { // determinism:
		_ = bad5
	}
	for bad6 := range m { // the order matters, determinism: is not at the start
		_ = bad6
	}
	for bad7 := range maps.Keys(m) {
		_ = bad7
	}
	for bad8 := range maps.Values(m) {
		_ = bad8
	}
	for bad9, _ := range maps.All(m) {
		_ = bad9
	}
	for ok4 := range maps.Keys(m) { // determinism: a count
		_ = ok4
	}
	for bad10 := range slices.Collect(maps.Keys(m)) {
		_ = bad10
	}
	for ok5 := range slices.Sorted(maps.Keys(m)) {
		_ = ok5
	}
	clock, roll := time.Now, rand.IntN // function values, called later
	_, _ = clock, roll
	return time.Duration(n), int(start.Unix())
}
`
	if err := os.WriteFile(filepath.Join(tmp, "kernel", "planted.go"), []byte(planted), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, err := Check(tmp, "./kernel/...")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]int{}
	ranges := map[int]bool{}
	for _, f := range fs {
		if filepath.Base(f.Pos.Filename) != "planted.go" {
			t.Errorf("finding outside the planted file: %s", f)
		}
		rules[f.Rule]++
		if f.Rule == "maprange" {
			ranges[f.Pos.Line] = true
		}
		t.Log(f)
	}
	for r, want := range map[string]int{"wallclock": 2, "globalrand": 2, "goroutine": 1, "maprange": 10} {
		if rules[r] != want {
			t.Errorf("rule %s reported %d times, want %d", r, rules[r], want)
		}
	}
	for i, line := range strings.Split(planted, "\n") {
		if !strings.Contains(line, " := range ") {
			continue
		}
		bad := strings.Contains(line, "for bad")
		if ranges[i+1] != bad {
			t.Errorf("line %d %q: reported %v, want %v", i+1, strings.TrimSpace(line), ranges[i+1], bad)
		}
	}
	if !slices.IsSortedFunc(fs, compareFindings) {
		t.Errorf("findings out of order: %v", fs)
	}
}

// TestFindingsOrderIsTotal: findings on one line sort by column, then rule
// and detail, whatever order they were found in.
func TestFindingsOrderIsTotal(t *testing.T) {
	var fs []Finding
	for col := 40; col >= 1; col-- {
		for _, rule := range []string{"wallclock", "maprange"} {
			fs = append(fs, Finding{Pos: token.Position{Filename: "a.go", Line: 7, Column: col}, Rule: rule, Detail: "d"})
		}
	}
	fs = append(fs, Finding{Pos: token.Position{Filename: "a.go", Line: 3, Column: 9}, Rule: "goroutine"})
	sortFindings(fs)
	if fs[0].Pos.Line != 3 {
		t.Fatalf("line 3 not first: %v", fs[0])
	}
	for i := 1; i < len(fs); i++ {
		if compareFindings(fs[i-1], fs[i]) >= 0 {
			t.Fatalf("findings %d and %d out of order: %v then %v", i-1, i, fs[i-1], fs[i])
		}
	}
	if fs[1].Pos.Column != 1 || fs[1].Rule != "maprange" || fs[2].Rule != "wallclock" {
		t.Fatalf("want column 1's maprange then wallclock, got %v, %v", fs[1], fs[2])
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
