package detguard

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKernelAndSimAreDeterministic: the production code of kernel/ and sim/
// passes the guard.
func TestKernelAndSimAreDeterministic(t *testing.T) {
	fs, err := Check("../..", "./fsm/...", "./kernel/...", "./sim/...")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		t.Error(f)
	}
}

// TestGuardCatchesPlantedCode copies kernel/ (with fsm/ and the module
// files) into a temporary module, plants a file that reads the clock, uses
// the global rand, starts a goroutine and ranges over a map, and shows the
// guard reports exactly those four — production code stays untouched.
func TestGuardCatchesPlantedCode(t *testing.T) {
	tmp := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		copyFile(t, filepath.Join("../..", f), filepath.Join(tmp, f))
	}
	for _, dir := range []string{"fsm", "kernel"} {
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
	planted := `package kernel

import (
	"math/rand/v2"
	"time"
)

func planted() (time.Duration, int) {
	start := time.Now()
	n := rand.IntN(10)
	go func() {}()
	for k := range map[string]int{"a": 1} {
		_ = k
	}
	r := rand.New(rand.NewPCG(1, 2)) // a seeded source is fine
	_ = r.IntN(3)
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
	for _, f := range fs {
		if filepath.Base(f.Pos.Filename) != "planted.go" {
			t.Errorf("finding outside the planted file: %s", f)
		}
		rules[f.Rule]++
		t.Log(f)
	}
	for _, r := range []string{"wallclock", "globalrand", "goroutine", "maprange"} {
		if rules[r] != 1 {
			t.Errorf("rule %s reported %d times, want 1", r, rules[r])
		}
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
