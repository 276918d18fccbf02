package sim

import (
	"flag"
	"os"
	"testing"
)

// TestMain caps rapid's shrinking at 20s per failure (its default is 30s)
// unless -rapid.shrinktime or RAPID_SHRINKTIME says otherwise: the oracle's
// teeth tests shrink fourteen counterexamples, under the race detector in
// `make test`, and their worlds are small well before that.
func TestMain(m *testing.M) {
	flag.Parse()
	set := os.Getenv("RAPID_SHRINKTIME") != ""
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "rapid.shrinktime" {
			set = true
		}
	})
	if !set {
		if err := flag.Set("rapid.shrinktime", "20s"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
