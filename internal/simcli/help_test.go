package simcli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/escapement/escapement/sim/oracle"
)

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
