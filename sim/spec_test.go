package sim

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/sim/scenario"
)

// TestSemanticsSectionsExist: every section of docs/semantics.md a Go
// comment cites ("docs/semantics.md, "Deadlines"") exists.
func TestSemanticsSectionsExist(t *testing.T) {
	doc, err := os.ReadFile("../docs/semantics.md")
	if err != nil {
		t.Fatal(err)
	}
	cite := regexp.MustCompile(`docs/semantics\.md,?\s*(?://\s*)?\(?"([^"]+)"`)
	n := 0
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || filepath.Base(path) == "spec_test.go" {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range cite.FindAllStringSubmatch(string(src), -1) {
			n++
			if !strings.Contains(string(doc), "\n## "+m[1]+"\n") {
				t.Errorf("%s cites docs/semantics.md section %q, which does not exist", path, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("only %d citations found: the pattern no longer matches them", n)
	}
}

// TestLimitAndOutcomeBounds: the scenario format judges limits and outcomes
// by the kernel's own table (kernel.LimitTable, kernel.ParseOutcome): each
// bound holds exactly, and the refusal says which.
func TestLimitAndOutcomeBounds(t *testing.T) {
	for _, c := range []struct {
		limits, outcome, err string
	}{
		{"max_children: 0", "completed", ""},
		{"max_depth: 65536", "completed", ""},
		{"debounce: 0s", "completed", ""},
		{"max_requests: 1", "budget_exhausted", ""},
		{"max_requests: 0", "completed", "must be in 1..1048576, got 0"},
		{"max_depth: 65537", "completed", "must be in 0..65536, got 65537"},
		{"grace: 0s", "completed", "must be positive, got 0s"},
		{"grace: 1ns", "completed", ""},
		{"max_calls: 65537", "completed", "must be in 1..65536, got 65537"},
		{"grace: 2s", "none", `unknown outcome "none"`},
		{"grace: 2s", "interrupted", ""},
	} {
		src := "name: b\nlimits: {" + c.limits + "}\nagents: {main: []}\nexpect:\n  outcomes: {main: " + c.outcome + "}\n"
		_, err := scenario.Load("b.yaml", []byte(src))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s / %s: refused: %v", c.limits, c.outcome, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s / %s: %v, want an error containing %q", c.limits, c.outcome, err, c.err)
		}
	}
	// A limit the format refuses on its own (a negative duration) still
	// meets the kernel's check when a scenario is built in code.
	s := mustLoad(t, "name: b\nagents: {main: []}\n")
	s.Limits.Debounce = -time.Second
	if _, err := New(s, Options{}); err == nil || !strings.Contains(err.Error(), "limit debounce must not be negative, got -1s") {
		t.Errorf("a negative debounce: %v", err)
	}
}
