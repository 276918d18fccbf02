package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/escapement/escapement/sim/oracle"
	"github.com/spf13/cobra"
)

// TestHelpStatesEachDefaultOnce: no flag's line in any command's --help
// gives two defaults (pflag appends "(default X)" to a usage that already
// named one: "(default 4) (default 2)").
func TestHelpStatesEachDefaultOnce(t *testing.T) {
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, line := range strings.Split(c.LocalFlags().FlagUsages(), "\n") {
			n++
			if strings.Count(line, "(default") > 1 {
				t.Errorf("%s: %s", c.CommandPath(), strings.TrimSpace(line))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(&app{}))
	if n < 40 {
		t.Fatalf("only %d flag lines: the walk misses commands", n)
	}
}

// TestExploreHelpDefaults: --max-inputs names the default of each mode, and
// the small-scope example its bounds, from the constants RunE applies.
func TestExploreHelpDefaults(t *testing.T) {
	code, out, _ := runCLI(t, "sim", "explore", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{
		fmt.Sprintf("(-1: all; default %d)", defaultMovedInputs),
		fmt.Sprintf("inputs one schedule makes (default %d)", defaultSmallInputs),
		fmt.Sprintf("# every world of ≤%d agents, ≤%d inputs", defaultSmallAgents, defaultSmallInputs),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("sim explore --help lacks %q:\n%s", want, out)
		}
	}
}

// TestSimHelpNamesEveryInvariant: sim --help names the oracle's invariants
// from the first to the last in oracle.Invariants().
func TestSimHelpNamesEveryInvariant(t *testing.T) {
	code, out, _ := runCLI(t, "sim", "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	invs := oracle.Invariants()
	numbered := 0
	for _, inv := range invs {
		if strings.HasPrefix(string(inv), "I") {
			numbered++
		}
	}
	want := fmt.Sprintf("(I1–I%d and liveness)", numbered)
	if numbered < 24 || !strings.Contains(strings.ReplaceAll(out, "\n", " "), want) {
		t.Errorf("sim --help does not name the %d invariants as %q:\n%s", numbered, want, out)
	}
}
