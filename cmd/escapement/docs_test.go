package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// wallTime matches the summary's wall clock, whatever its unit (36ms,
// 1.521s under the race detector, 1m2.5s).
var wallTime = regexp.MustCompile(`events in [0-9.hmsµn]+$`)

// TestDocsSimSample: the output of `escapement sim` that the README and the
// simulator's guide show is what the embedded suite prints: each result
// row shown (its outcome, quiescence, counts and trace hash) and the
// summary's counts (its wall time aside).
func TestDocsSimSample(t *testing.T) {
	code, out, errb := runCLI(t, "sim")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	real := map[string]string{} // by scenario name, or "summary"
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(wallTime.ReplaceAllString(line, "events in (wall time)")); len(f) > 1 {
			real[f[0]] = strings.Join(f, " ")
		}
	}
	row := regexp.MustCompile(`^[a-z0-9-]+ +(PASS|FAIL) `)
	summary := regexp.MustCompile(`^\d+ scenario\(s\): `)
	for _, path := range []string{"../../README.md", "../../docs/scenarios.md"} {
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range strings.Split(string(doc), "\n") {
			if !row.MatchString(line) && !summary.MatchString(line) {
				continue
			}
			n++
			shown := strings.Join(strings.Fields(wallTime.ReplaceAllString(line, "events in (wall time)")), " ")
			if got := real[strings.Fields(line)[0]]; got != shown {
				t.Errorf("%s shows\n\t%s\nescapement sim prints\n\t%s", path, shown, got)
			}
		}
		if n < 2 {
			t.Errorf("%s shows %d lines of escapement sim's output; want its sample rows and summary", path, n)
		}
	}
}
