package doccheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// Numbers and names the code owns, checked where the docs state them: a
// change to the code that leaves a doc behind fails here, naming the file.

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of a Markdown file's "## title" section.
func section(t *testing.T, doc, file, title string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "\n## "+title+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", file, title)
	}
	body, _, _ := strings.Cut(after, "\n## ")
	return body
}

// TestDocsTraceFormat: every doc that names the trace format's version
// names trace.FormatVersion.
func TestDocsTraceFormat(t *testing.T) {
	mention := regexp.MustCompile("`kernel/trace`[^.]{0,40}?format (\\d+)")
	n := 0
	for _, f := range docFiles(t) {
		for _, m := range mention.FindAllStringSubmatch(readDoc(t, f), -1) {
			n++
			if v, _ := strconv.Atoi(m[1]); v != trace.FormatVersion {
				t.Errorf("%s: %q: the trace format is %d (trace.FormatVersion)", f, m[0], trace.FormatVersion)
			}
		}
	}
	if n < 2 { // docs/scenarios.md and docs/durable.md
		t.Fatalf("found %d mentions of the trace format's version: the pattern no longer matches the docs", n)
	}
}

// docDefault is a limit's default as the docs write it: a duration in Go
// syntax without zero units (2m, not 2m0s), a count as a number (plain,
// or in MiB when mib is set and it is a whole number of them).
func docDefault(s kernel.LimitSpec, mib bool) string {
	if s.Unit == kernel.UnitDuration {
		d := time.Duration(s.Default).String()
		if strings.HasSuffix(d, "m0s") {
			d = strings.TrimSuffix(d, "0s")
		}
		if strings.HasSuffix(d, "h0m") {
			d = strings.TrimSuffix(d, "0m")
		}
		return d
	}
	if mib && s.Default >= 1<<20 && s.Default%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", s.Default>>20)
	}
	return strconv.FormatInt(s.Default, 10)
}

// tableRows are the cells of a section's Markdown table rows (the header
// and the delimiter row left out).
func tableRows(body string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), " | ") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	if len(rows) > 0 {
		rows = rows[1:]
	}
	return rows
}

// TestDocsLimitsTable: the kernel contract's table of limits has one row
// per row of kernel.LimitTable, with its name and default.
func TestDocsLimitsTable(t *testing.T) {
	const file = "docs/embedding.md"
	rows := tableRows(section(t, readDoc(t, file), file, "The kernel contract"))
	got := map[string]string{}
	for _, r := range rows {
		got[r[0]] = r[1]
	}
	for _, s := range kernel.LimitTable() {
		d, ok := got[s.Name]
		switch {
		case !ok:
			t.Errorf("%s: the limits table has no row for %s", file, s.Name)
		case d != docDefault(s, true):
			t.Errorf("%s: %s defaults to %s, the table says %s", file, s.Name, docDefault(s, true), d)
		}
		delete(got, s.Name)
	}
	for name := range got {
		t.Errorf("%s: the limits table has a row for %s, which kernel.LimitTable lacks", file, name)
	}
}

// TestDocsLimitFlags: the CLI reference lists every limit's flag with its
// default; a row of limit flags gives their defaults in the same order.
func TestDocsLimitFlags(t *testing.T) {
	const file = "docs/cli.md"
	specs := map[string]kernel.LimitSpec{}
	for _, s := range kernel.LimitTable() {
		specs["`--"+s.Flag+"`"] = s
	}
	listed := map[string]bool{}
	for _, r := range tableRows(section(t, readDoc(t, file), file, "Flags of `run` and `chat`")) {
		flags := strings.Split(r[0], ", ")
		var want []string
		for _, fl := range flags {
			if s, ok := specs[fl]; ok {
				want = append(want, docDefault(s, false))
				listed[fl] = true
			}
		}
		if len(want) == 0 {
			continue
		}
		if len(want) != len(flags) || r[1] != strings.Join(want, ", ") {
			t.Errorf("%s: the row for %s says %q; the defaults are %q", file, r[0], r[1], strings.Join(want, ", "))
		}
	}
	for _, s := range kernel.LimitTable() {
		if fl := "`--" + s.Flag + "`"; !listed[fl] {
			t.Errorf("%s does not list the limit flag %s", file, fl)
		}
	}
}

// TestDocsLimitFlagDefaults: wherever the docs write a limit's flag with a
// value in parentheses ("`--max-calls` (64)", "(1 MiB)"), the value is
// its default.
func TestDocsLimitFlagDefaults(t *testing.T) {
	n := 0
	for _, s := range kernel.LimitTable() {
		re := regexp.MustCompile("`--" + regexp.QuoteMeta(s.Flag) + "` \\(([0-9][0-9a-zA-Z. ]*)\\)")
		for _, f := range docFiles(t) {
			for _, m := range re.FindAllStringSubmatch(readDoc(t, f), -1) {
				n++
				if m[1] != docDefault(s, true) && m[1] != docDefault(s, false) {
					t.Errorf("%s: %q: --%s defaults to %s", f, m[0], s.Flag, docDefault(s, true))
				}
			}
		}
	}
	if n < 3 { // docs/live.md's caps
		t.Fatalf("found %d flag defaults in the docs: the pattern no longer matches them", n)
	}
}

// TestDocsEffectKinds: the kernel contract names every effect kind, in the
// kernel's order.
func TestDocsEffectKinds(t *testing.T) {
	const file = "docs/embedding.md"
	body := section(t, readDoc(t, file), file, "The kernel contract")
	var want []string
	for k := kernel.EffectKind(1); !strings.HasPrefix(k.String(), "effect("); k++ {
		want = append(want, "`"+k.String()+"`")
	}
	if len(want) < 8 {
		t.Fatalf("only %d effect kinds: %v", len(want), want)
	}
	at := 0
	for _, w := range want {
		i := strings.Index(body[at:], w)
		if i < 0 {
			t.Fatalf("%s: the kernel contract does not name the effect %s (after %s)", file, w, body[:at])
		}
		at += i + len(w)
	}
}
