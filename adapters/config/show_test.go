package config

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/escapement/escapement/internal/redact"
)

// TestShowProfileRows: config show prints every setting of a profile, each
// with its value and the line of the file that sets it, and the rows of
// the settings it leaves to the root say so.
func TestShowProfileRows(t *testing.T) {
	s := newSetup(t)
	s.write(t, s.user, "profiles:\n  rev:\n    description: reviews diffs\n    system: You review.\n    model: small\n    tools: [read]\n    max_requests: 3\n")
	c, err := s.resolve()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Show(&out, redact.New()); err != nil {
		t.Fatal(err)
	}
	at := func(line string) string { return regexp.QuoteMeta("user " + s.user + ":" + line) }
	for _, want := range []string{
		`profiles\.rev +"" +` + at("2"),
		`profiles\.rev\.description +reviews diffs +` + at("3"),
		`profiles\.rev\.system +You review\. +` + at("4"),
		`profiles\.rev\.model +small +` + at("5"),
		`profiles\.rev\.base_url +\(the root's\) +` + at("2"),
		`profiles\.rev\.tools +\[read\] +` + at("6"),
		`profiles\.rev\.delegates +\[\] +` + at("2"),
		`profiles\.rev\.max_requests +3 +` + at("7"),
	} {
		if !regexp.MustCompile(`(?m)^` + want + `$`).MatchString(out.String()) {
			t.Errorf("no row %s in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "max_children") {
		t.Errorf("a limit the profile does not set is shown:\n%s", out.String())
	}
}
