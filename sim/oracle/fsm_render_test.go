package oracle

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/fsm"
)

// specRows is the oracle's statement of the machine as "from trigger to
// kind" rows, sorted, in the names the renderings print.
func specRows() []string {
	var rows []string
	for _, mv := range specMoves() {
		rows = append(rows, fmt.Sprintf("%s %s %s %v", mv.from, mv.on, mv.to, mv.kind == fsm.Ignore))
	}
	slices.Sort(rows)
	return rows
}

// TestRenderedMachineIsTheSpec: what `escapement fsm` prints — the table
// docs/semantics.md documents, as Mermaid, DOT and text — and the matrix
// checkers read (fsm.Matrix) state the machine as the oracle's own
// statement does: every declared pair and only those, each with its
// destination, and the no-ops (Ignore) marked as such and nothing else
// marked. A rendering that drops, invents or mislabels an edge documents
// a machine the kernel does not run.
func TestRenderedMachineIsTheSpec(t *testing.T) {
	want := specRows()
	legal := legalMoves()
	m := fsm.Matrix()
	for _, from := range fsm.States() {
		for _, on := range fsm.Triggers() {
			if _, declared := legal.lookup(from, on); m[from][on] != declared {
				t.Errorf("fsm.Matrix()[%s][%s] = %v; the oracle's machine declares it: %v", from, on, m[from][on], declared)
			}
		}
	}
	// A label is "Trigger" or "Trigger (ignored)".
	label := func(from, to, l string) string {
		l = strings.TrimSpace(l)
		trig, ignored := strings.CutSuffix(l, " (ignored)")
		return fmt.Sprintf("%s %s %s %v", from, trig, to, ignored)
	}
	// edges reads a graph rendering's edge lines: "FROM<arrow>TO" then the
	// labels, which split cuts off the line (ok false: an edge without
	// them); lines that are not edges, or leave the start node, are skipped.
	edges := func(out, arrow, start, sep string, split func(line string) (edge, labels string, ok bool)) ([]string, error) {
		var rows []string
		for _, line := range strings.Split(out, "\n") {
			line = strings.TrimSpace(line)
			edge, labels, ok := split(line)
			from, to, isEdge := strings.Cut(edge, arrow)
			if !isEdge || from == start {
				continue
			}
			if !ok {
				return nil, fmt.Errorf("edge without a label: %q", line)
			}
			for _, l := range strings.Split(labels, sep) {
				rows = append(rows, label(from, to, l))
			}
		}
		return rows, nil
	}
	parsers := map[fsm.Format]func(out string) ([]string, error){
		fsm.FormatMermaid: func(out string) ([]string, error) {
			return edges(out, " --> ", "[*]", ", ", func(line string) (string, string, bool) {
				return strings.Cut(line, ": ")
			})
		},
		fsm.FormatDOT: func(out string) ([]string, error) {
			return edges(out, " -> ", "init", `\n`, func(line string) (string, string, bool) {
				edge, rest, ok := strings.Cut(line, ` [label="`)
				labels, _, closed := strings.Cut(rest, `"`)
				return edge, labels, ok && closed
			})
		},
		fsm.FormatTable: func(out string) ([]string, error) {
			var rows []string
			for i, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
				f := strings.Fields(line)
				if i == 0 {
					continue // header
				}
				if len(f) < 4 {
					return nil, fmt.Errorf("short row: %q", line)
				}
				rows = append(rows, fmt.Sprintf("%s %s %s %v", f[0], f[1], f[2], f[3] == fsm.Ignore.String()))
			}
			return rows, nil
		},
	}
	for _, f := range fsm.Formats() {
		out, err := fsm.Render(f)
		if err != nil {
			t.Fatalf("Render(%s): %v", f, err)
		}
		parse, ok := parsers[f]
		if !ok {
			t.Fatalf("no parser for format %s: add one", f)
		}
		got, err := parse(out)
		if err != nil {
			t.Fatalf("Render(%s): %v\n%s", f, err, out)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("Render(%s) states another machine than the oracle's:\n got %q\nwant %q\n%s", f, got, want, out)
		}
	}
}
