package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb strings.Builder
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestUsageErrors: bad flags and inputs exit 2 and name the flag or file.
func TestUsageErrors(t *testing.T) {
	eq := filepath.Join(t.TempDir(), "eq.txt")
	if err := os.WriteFile(eq, []byte("ops.go:1 bogus why\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--jobs", "0"}, "--jobs must be at least 1"},
		{[]string{"--sample", "-1"}, "--sample must not be negative"},
		{[]string{"--ops", "cond-boundary,nope"}, `--ops: unknown operator "nope"`},
		{[]string{"--equivalent", eq}, `eq.txt:1: unknown operator "bogus"`},
		{[]string{"--root", "../../testdata/ops", "./nosuchpkg"}, "nosuchpkg"},
	} {
		code, _, errb := runArgs(t, c.args...)
		if code != exitUsage || !strings.Contains(errb, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb, c.want)
		}
	}
}

// TestListSampleAndOps: --list prints the selected mutants, --ops filters
// them, --sample draws the same ones for the same seed.
func TestListSampleAndOps(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "ops")
	code, all, _ := runArgs(t, "--root", root, "--list", "./...")
	if code != exitOK || strings.Count(all, "\n") != 62 {
		t.Fatalf("exit %d, %d mutants:\n%s", code, strings.Count(all, "\n"), all)
	}
	_, flips, _ := runArgs(t, "--root", root, "--list", "--ops", "flip-bool,incdec", "./...")
	if strings.Count(flips, "\n") != 3 || !strings.Contains(flips, "ops.go:33:9:flip-bool\tc.ok = true  →  c.ok = false") {
		t.Fatalf("--ops flip-bool,incdec:\n%s", flips)
	}
	_, s1, _ := runArgs(t, "--root", root, "--list", "--sample", "5", "--seed", "3", "./...")
	_, s2, _ := runArgs(t, "--root", root, "--list", "--sample", "5", "--seed", "3", "./...")
	if s1 != s2 || strings.Count(s1, "\n") != 5 {
		t.Fatalf("samples differ or are not 5:\n%s\n%s", s1, s2)
	}
}
