package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSlug: anchors as GitHub makes them (checked against headings of this
// repository and of GitHub-rendered pages): punctuation and symbols go,
// letters of any script stay (lower-cased), each space is a hyphen, so a
// space next to a dropped character or a hyphen leaves two.
func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, slug string }{
		{"Quick start", "quick-start"},
		{"Why: the failures it makes impossible", "why-the-failures-it-makes-impossible"},
		{"The tools' environment", "the-tools-environment"},
		{"Exhaustive exploration: escapement sim explore", "exhaustive-exploration-escapement-sim-explore"},
		{"Performance (2-core shared machine; medians of -count 5 or more)", "performance-2-core-shared-machine-medians-of--count-5-or-more"},
		{"fsm ← kernel", "fsm--kernel"},
		{"I1–I24 and F1-F14", "i1i24-and-f1-f14"},
		{"snake_case & more!", "snake_case--more"},
		{"Straße über Ölfeld", "straße-über-ölfeld"},
		{"  padded  ", "padded"},
	} {
		if got := Slug(c.heading); got != c.slug {
			t.Errorf("Slug(%q) = %q, want %q", c.heading, got, c.slug)
		}
	}
}

// TestAnchors: a heading's anchor is built from its rendered text (code
// spans and links without their markup), repeated headings get -1, -2, and
// a "# comment" in a fenced block is no heading.
func TestAnchors(t *testing.T) {
	src := "# Live runs: `run` and `chat`\n\n## See [the spec](x.md) *now*\n\n## Notes\n\n## Notes\n\n### Notes\n\n```sh\n# not a heading\n```\n"
	got := Anchors([]byte(src))
	for _, want := range []string{"live-runs-run-and-chat", "see-the-spec-now", "notes", "notes-1", "notes-2"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] || len(got) != 5 {
		t.Errorf("anchors %v, want exactly five", got)
	}
}

// TestLinks: links and images of paragraphs, tables and lists are found with
// their line; a link in a code span or a fenced block is not a link.
func TestLinks(t *testing.T) {
	src := strings.Join([]string{
		"# T",                         // 1
		"",                            // 2
		"See [a](a.md) and",           // 3
		"[b](b.md#x) `[c](c.md)`.",    // 4
		"",                            // 5
		"| x | y |",                   // 6
		"|---|---|",                   // 7
		"| [d](d.md) | ![e](e.png) |", // 8
		"",                            // 9
		"```",                         // 10
		"[f](f.md)",                   // 11
		"```",                         // 12
		"- [g][ref]",                  // 13
		"",                            // 14
		"[ref]: g.md",                 // 15
	}, "\n")
	var got []string
	for _, l := range Links([]byte(src)) {
		got = append(got, fmt.Sprintf("%s@%d", filepath.Base(l.Target), l.Line))
	}
	want := []string{"a.md@3", "b.md#x@4", "d.md@8", "e.png@8", "g.md@13"}
	if !slices.Equal(got, want) {
		t.Errorf("links %v, want %v", got, want)
	}
}

// TestCheckFindsBrokenLinks: a missing file, a missing anchor (in another
// file and in the same one), a link out of the repository are each
// reported with file and line; good links, directories and external URLs
// are not.
func TestCheckFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", strings.Join([]string{
		"# Top",
		"[ok](docs/a.md#the-part) [dir](docs) [web](https://example.com/x#y) [self](#top) [code](main.go)",
		"[gone](docs/nope.md)",
		"[bad anchor](docs/a.md#no-such-part)",
		"[bad self](#nowhere)",
		"[out](../outside.md)",
		"[root-relative](/docs/a.md#the-part)",
	}, "\n"))
	write("docs/a.md", "# A\n\n## The part\n\nBack to [the top](../README.md#top).\n")
	write("main.go", "package main\n")
	problems, err := Check(root, []string{"README.md", "docs/a.md"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.String())
	}
	want := []string{
		`README.md:3: link "docs/nope.md": docs/nope.md does not exist`,
		`README.md:4: link "docs/a.md#no-such-part": docs/a.md has no heading with the anchor #no-such-part`,
		`README.md:5: link "#nowhere": README.md has no heading with the anchor #nowhere`,
		`README.md:6: link "../outside.md": leaves the repository`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
