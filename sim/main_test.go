package sim

import (
	"flag"
	"os"
	"testing"
)

// TestMain caps rapid's shrinking at 60s per failure (its default is 30s)
// unless -rapid.shrinktime or RAPID_SHRINKTIME says otherwise. The oracle's
// teeth tests shrink some thirty counterexamples; almost all are small within
// a few seconds, but a rare large first draw (5 agents, 80-odd events) was
// still shrinking at a 20s cap — and once at 60s — under the race detector on
// a loaded 2-core machine. `make test` therefore runs them without it (the
// Makefile's SHRINK_TIMED); the bound they are held to (maxShrunkAgents,
// maxShrunkEvents) is about the shrink's result, not its speed.
func TestMain(m *testing.M) {
	flag.Parse()
	set := os.Getenv("RAPID_SHRINKTIME") != ""
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "rapid.shrinktime" {
			set = true
		}
	})
	if !set {
		if err := flag.Set("rapid.shrinktime", "60s"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
