package sim

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
	parsers := map[fsm.Format]func(out string) ([]string, error){
		fsm.FormatMermaid: func(out string) ([]string, error) {
			var rows []string
			for _, line := range strings.Split(out, "\n") {
				line = strings.TrimSpace(line)
				arrow, labels, ok := strings.Cut(line, ": ")
				from, to, isEdge := strings.Cut(arrow, " --> ")
				if !isEdge || from == "[*]" {
					continue
				}
				if !ok {
					return nil, fmt.Errorf("edge without a label: %q", line)
				}
				for _, l := range strings.Split(labels, ", ") {
					rows = append(rows, label(from, to, l))
				}
			}
			return rows, nil
		},
		fsm.FormatDOT: func(out string) ([]string, error) {
			var rows []string
			for _, line := range strings.Split(out, "\n") {
				line = strings.TrimSpace(line)
				arrow, rest, ok := strings.Cut(line, " [label=\"")
				from, to, isEdge := strings.Cut(arrow, " -> ")
				if !isEdge || from == "init" {
					continue
				}
				labels, _, closed := strings.Cut(rest, "\"")
				if !ok || !closed {
					return nil, fmt.Errorf("edge without a label: %q", line)
				}
				for _, l := range strings.Split(labels, `\n`) {
					rows = append(rows, label(from, to, l))
				}
			}
			return rows, nil
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
