package main

import (
	"strings"
	"testing"

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
