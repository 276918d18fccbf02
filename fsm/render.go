package fsm

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// Format names an output format of Render.
type Format string

// Formats Render understands.
const (
	FormatMermaid Format = "mermaid"
	FormatDOT     Format = "dot"
	FormatTable   Format = "table"
)

// Formats lists the formats in the order the CLI documents them.
func Formats() []Format { return []Format{FormatMermaid, FormatDOT, FormatTable} }

// Render prints Table in the given format. The output is deterministic (it
// follows Table's order), so it can be committed and compared; the README's
// Mermaid diagram is checked against it by a test.
func Render(f Format) (string, error) {
	switch f {
	case FormatMermaid:
		return renderMermaid(), nil
	case FormatDOT:
		return renderDOT(), nil
	case FormatTable:
		return renderTable(), nil
	}
	return "", fmt.Errorf("unknown format %q (want one of mermaid, dot, table)", string(f))
}

// edge groups the triggers that share a (from, to) pair, so diagrams draw one
// arrow per pair with all its triggers on the label.
type edge struct {
	from, to State
	labels   []string
}

func edges() []edge {
	var out []edge
	index := map[[2]State]int{}
	for _, t := range Table() {
		label := t.Trigger.String()
		if t.Kind == Ignore {
			label += " (ignored)"
		}
		key := [2]State{t.From, t.To}
		if i, ok := index[key]; ok {
			out[i].labels = append(out[i].labels, label)
			continue
		}
		index[key] = len(out)
		out = append(out, edge{from: t.From, to: t.To, labels: []string{label}})
	}
	return out
}

func renderMermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	b.WriteString("    [*] --> Idle\n")
	for _, e := range edges() {
		fmt.Fprintf(&b, "    %s --> %s: %s\n", e.from, e.to, strings.Join(e.labels, ", "))
	}
	b.WriteString("    note right of Interrupted\n")
	b.WriteString("        no edge to Streaming, Tooling or Delegating (F1)\n")
	b.WriteString("    end note\n")
	return b.String()
}

func renderDOT() string {
	var b strings.Builder
	b.WriteString("digraph agent {\n")
	b.WriteString("    rankdir=LR;\n")
	b.WriteString("    node [shape=Mrecord];\n")
	b.WriteString("    init [label=\"\", shape=point];\n")
	for _, s := range States() {
		fmt.Fprintf(&b, "    %s [label=%q];\n", s, s.String())
	}
	b.WriteString("    init -> Idle;\n")
	for _, e := range edges() {
		style := ""
		if e.from == e.to {
			style = ", style=dashed"
		}
		fmt.Fprintf(&b, "    %s -> %s [label=%q%s];\n", e.from, e.to, strings.Join(e.labels, "\n"), style)
	}
	b.WriteString("}\n")
	return b.String()
}

func renderTable() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "FROM\tTRIGGER\tTO\tKIND\tWHAT THE KERNEL DOES")
	for _, t := range Table() {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.From, t.Trigger, t.To, t.Kind, t.Why)
	}
	_ = w.Flush()
	return b.String()
}

// Matrix returns, for every (state, trigger) pair, whether the table declares
// it. It is the fast form of Lookup for checkers that run after every step.
func Matrix() [NumStates][NumTriggers]bool {
	var m [NumStates][NumTriggers]bool
	for _, t := range Table() {
		m[t.From][t.Trigger] = true
	}
	return m
}
