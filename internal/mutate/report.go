package mutate

import (
	"cmp"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
)

// Tally counts one set of records (a profile, or a package or an operator
// within one) against the profile's groups.
type Tally struct {
	Judged, Uncompilable, Equivalent, Scored int
	// KilledFirst counts scored mutants killed by the first group (for the
	// oracle profile: the simulator layers alone); KilledLater those only a
	// later group killed; Survived those no layer killed.
	KilledFirst, KilledLater, Survived int
	ByGroup                            map[string]int // scored mutants each group killed
	ByLayer                            map[string]int // scored mutants each layer killed (timeouts included)
	Timeouts                           int            // scored mutants some layer timed out on
	Errors                             int            // scored mutants some layer could not run for
}

// Score is the first group's kills over the scored mutants (killed / (total
// − equivalent − uncompilable)), in percent.
func (t Tally) Score() float64 { return pct(t.KilledFirst, t.Scored) }

// AnyScore is the share of scored mutants some layer killed, in percent.
func (t Tally) AnyScore() float64 { return pct(t.KilledFirst+t.KilledLater, t.Scored) }

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// equivalentReason is the current allow-list's reason for rec ("" if none).
func equivalentReason(rec *Record, eqs []Equivalent) string {
	for _, e := range eqs {
		if e.Matches(rec.File, rec.Line, rec.Col, rec.Op, rec.Before) {
			return e.Reason
		}
	}
	return ""
}

// Count tallies records of one profile.
func Count(recs []*Record, groups []string, eqs []Equivalent) Tally {
	t := Tally{ByGroup: map[string]int{}, ByLayer: map[string]int{}}
	for _, r := range recs {
		t.Judged++
		switch {
		case r.Status == StatusUncompilable:
			t.Uncompilable++
			continue
		case equivalentReason(r, eqs) != "":
			t.Equivalent++
			continue
		}
		t.Scored++
		timedOut, erred := false, false
		for _, l := range r.Layers {
			switch l.Result {
			case Killed:
				t.ByLayer[l.Name]++
			case Timeout:
				t.ByLayer[l.Name]++
				timedOut = true
			case Errored:
				erred = true
			}
		}
		if timedOut {
			t.Timeouts++
		}
		if erred {
			t.Errors++
		}
		for _, g := range groups {
			if r.KilledBy(g) {
				t.ByGroup[g]++
			}
		}
		switch {
		case len(groups) > 0 && r.KilledBy(groups[0]):
			t.KilledFirst++
		case slices.ContainsFunc(groups, r.KilledBy):
			t.KilledLater++
		default:
			t.Survived++
		}
	}
	return t
}

// ReportMeta is what the summary says about the run itself.
type ReportMeta struct {
	Command  string
	Tree     string // commit and whether the tree had changes
	Selected string // how the mutants were chosen
	Wall     string // how long this invocation took
	Warnings []string
	Stale    []Equivalent // allow-list entries naming no mutant (see Stale)
}

// WriteReport writes the Markdown summary of the records, profile by
// profile, with every survivor listed.
func WriteReport(w io.Writer, recs []*Record, profiles []Profile, eqs []Equivalent, meta ReportMeta) error {
	var b strings.Builder
	b.WriteString("# Mutation testing\n\n")
	fmt.Fprintf(&b, "- command: `%s`\n", meta.Command)
	if meta.Tree != "" {
		fmt.Fprintf(&b, "- tree: %s\n", meta.Tree)
	}
	fmt.Fprintf(&b, "- mutants: %s\n", meta.Selected)
	if meta.Wall != "" {
		fmt.Fprintf(&b, "- wall time of this invocation: %s\n", meta.Wall)
	}
	b.WriteString("- score = killed / (judged − equivalent − uncompilable); a layer that times out counts as killing (a hang is a bug a user sees)\n")
	for _, wn := range meta.Warnings {
		fmt.Fprintf(&b, "- warning: %s\n", wn)
	}
	for _, p := range profiles {
		var mine []*Record
		for _, r := range recs {
			if r.Profile == p.Name {
				mine = append(mine, r)
			}
		}
		if len(mine) == 0 {
			continue
		}
		if len(p.Groups) > 1 {
			writeLayered(&b, p, mine, eqs)
		} else {
			writeSingle(&b, p, mine, eqs)
		}
	}
	writeStale(&b, meta.Stale)
	_, err := io.WriteString(w, b.String())
	return err
}

var groupTitles = map[string]string{
	"sim":   "the simulator layers alone (sim tests, embedded scenarios, sweep)",
	"unit":  "the unit tests (`go test ./kernel/... ./fsm/...`)",
	"tests": "the package's tests",
}

func groupTitle(g string) string {
	if t, ok := groupTitles[g]; ok {
		return t
	}
	return "layer group " + g
}

func writeLayered(b *strings.Builder, p Profile, recs []*Record, eqs []Equivalent) {
	t := Count(recs, p.Groups, eqs)
	first := p.Groups[0]
	fmt.Fprintf(b, "\n## %s (profile %q)\n\n", cmp.Or(p.Title, first+" versus "+strings.Join(p.Groups[1:], ", ")), p.Name)
	b.WriteString("| | mutants | share of scored |\n|---|---:|---:|\n")
	fmt.Fprintf(b, "| judged | %d | |\n| uncompilable (discarded) | %d | |\n| equivalent (allow-list) | %d | |\n| **scored** | **%d** | |\n",
		t.Judged, t.Uncompilable, t.Equivalent, t.Scored)
	fmt.Fprintf(b, "| **killed by %s** | **%d** | **%.1f %%** |\n", groupTitle(first), t.KilledFirst, t.Score())
	for _, l := range p.Layers {
		if l.Group == first {
			fmt.Fprintf(b, "| ↳ killed by `%s` (alone or with others) | %d | %.1f %% |\n", l.Name, t.ByLayer[l.Name], pct(t.ByLayer[l.Name], t.Scored))
		}
	}
	for _, g := range p.Groups[1:] {
		fmt.Fprintf(b, "| killed by %s (any) | %d | %.1f %% |\n", groupTitle(g), t.ByGroup[g], pct(t.ByGroup[g], t.Scored))
	}
	fmt.Fprintf(b, "| **killed only by %s** | **%d** | %.1f %% |\n", strings.Join(p.Groups[1:], ", "), t.KilledLater, pct(t.KilledLater, t.Scored))
	fmt.Fprintf(b, "| **survived every layer** | **%d** | %.1f %% |\n", t.Survived, pct(t.Survived, t.Scored))
	fmt.Fprintf(b, "| killed by any layer | %d | %.1f %% |\n", t.KilledFirst+t.KilledLater, t.AnyScore())
	fmt.Fprintf(b, "| of the scored: a layer timed out (counted as killed) | %d | |\n", t.Timeouts)
	if t.Errors > 0 {
		fmt.Fprintf(b, "| of the scored: a layer could not run (counted as not killed) | %d | |\n", t.Errors)
	}

	header := fmt.Sprintf("| scored | killed by %s | only by %s | survived | %s score |\n|---|---:|---:|---:|---:|---:|\n",
		first, strings.Join(p.Groups[1:], ", "), first)
	b.WriteString("\nBy package:\n\n| package " + header)
	for _, k := range keys(recs, pkgDir) {
		tt := Count(filter(recs, func(r *Record) bool { return pkgDir(r) == k }), p.Groups, eqs)
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %.1f %% |\n", k, tt.Scored, tt.KilledFirst, tt.KilledLater, tt.Survived, tt.Score())
	}
	b.WriteString("\nBy operator:\n\n| operator " + header)
	for _, op := range Operators() {
		sub := filter(recs, func(r *Record) bool { return r.Op == op })
		if len(sub) == 0 {
			continue
		}
		tt := Count(sub, p.Groups, eqs)
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %.1f %% |\n", op, tt.Scored, tt.KilledFirst, tt.KilledLater, tt.Survived, tt.Score())
	}

	scored := filter(recs, func(r *Record) bool { return r.Status == StatusRun && equivalentReason(r, eqs) == "" })
	later := filter(scored, func(r *Record) bool {
		return !r.KilledBy(first) && slices.ContainsFunc(p.Groups[1:], r.KilledBy)
	})
	fmt.Fprintf(b, "\n### Killed only by %s: what %s misses (%d)\n\n", strings.Join(p.Groups[1:], ", "), groupTitle(first), len(later))
	for _, r := range later {
		var by []string
		for _, l := range r.Layers {
			if l.Group != first && (l.Result == Killed || l.Result == Timeout) {
				by = append(by, l.Name+": "+oneLine(l.Detail, 160))
			}
		}
		fmt.Fprintf(b, "- %s — killed by %s\n", mutantLine(r), strings.Join(by, "; "))
	}
	writeSurvivors(b, p, scored, eqs)
	writeRest(b, recs, eqs)
}

func writeSingle(b *strings.Builder, p Profile, recs []*Record, eqs []Equivalent) {
	g := p.Groups[0]
	t := Count(recs, p.Groups, eqs)
	fmt.Fprintf(b, "\n## %s (profile %q)\n\n", cmp.Or(p.Title, "killed by "+groupTitle(g)), p.Name)
	b.WriteString("| package | judged | uncompilable | equivalent | scored | killed | survived | kill rate |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range keys(recs, pkgDir) {
		tt := Count(filter(recs, func(r *Record) bool { return pkgDir(r) == k }), p.Groups, eqs)
		fmt.Fprintf(b, "| %s | %d | %d | %d | %d | %d | %d | %.1f %% |\n", k, tt.Judged, tt.Uncompilable, tt.Equivalent, tt.Scored, tt.KilledFirst, tt.Survived, tt.Score())
	}
	fmt.Fprintf(b, "| **all** | %d | %d | %d | %d | **%d** | %d | **%.1f %%** |\n", t.Judged, t.Uncompilable, t.Equivalent, t.Scored, t.KilledFirst, t.Survived, t.Score())
	fmt.Fprintf(b, "\nOf the scored, a layer timed out on %d (counted as killed)", t.Timeouts)
	if t.Errors > 0 {
		fmt.Fprintf(b, "; a layer could not run for %d (counted as not killed)", t.Errors)
	}
	b.WriteString(".\n\nBy operator:\n\n| operator | scored | killed | survived | kill rate |\n|---|---:|---:|---:|---:|\n")
	for _, op := range Operators() {
		sub := filter(recs, func(r *Record) bool { return r.Op == op })
		if len(sub) == 0 {
			continue
		}
		tt := Count(sub, p.Groups, eqs)
		fmt.Fprintf(b, "| %s | %d | %d | %d | %.1f %% |\n", op, tt.Scored, tt.KilledFirst, tt.Survived, tt.Score())
	}
	scored := filter(recs, func(r *Record) bool { return r.Status == StatusRun && equivalentReason(r, eqs) == "" })
	writeSurvivors(b, p, scored, eqs)
	writeRest(b, recs, eqs)
}

func writeSurvivors(b *strings.Builder, p Profile, scored []*Record, eqs []Equivalent) {
	surv := filter(scored, func(r *Record) bool { return !slices.ContainsFunc(p.Groups, r.KilledBy) })
	fmt.Fprintf(b, "\n### Survived every layer (%d)\n\n", len(surv))
	for _, r := range surv {
		note := ""
		for _, l := range r.Layers {
			if l.Result == Errored {
				note += " (" + l.Name + " could not run: " + oneLine(l.Detail, 120) + ")"
			}
		}
		fmt.Fprintf(b, "- %s%s\n", mutantLine(r), note)
	}
}

// writeRest lists the uncompilable and the equivalent mutants.
func writeRest(b *strings.Builder, recs []*Record, eqs []Equivalent) {
	unc := filter(recs, func(r *Record) bool { return r.Status == StatusUncompilable })
	if len(unc) > 0 {
		fmt.Fprintf(b, "\n### Uncompilable, discarded (%d)\n\n", len(unc))
		for _, r := range unc {
			fmt.Fprintf(b, "- %s — %s\n", mutantLine(r), oneLine(lastLine(r.CompileError), 160))
		}
	}
	var eq []*Record
	for _, r := range recs {
		if r.Status != StatusUncompilable && equivalentReason(r, eqs) != "" {
			eq = append(eq, r)
		}
	}
	if len(eq) > 0 {
		fmt.Fprintf(b, "\n### Equivalent, not scored (%d)\n\n", len(eq))
		for _, r := range eq {
			var killers []string
			for _, l := range r.Layers {
				if l.Result == Killed || l.Result == Timeout {
					killers = append(killers, l.Name)
				}
			}
			warn := ""
			if len(killers) > 0 {
				warn = " — **but killed by " + strings.Join(killers, ", ") + ": not equivalent, fix the allow-list**"
			}
			fmt.Fprintf(b, "- %s — %s%s\n", mutantLine(r), equivalentReason(r, eqs), warn)
		}
	}
}

// writeStale lists allow-list entries that name no mutant the generator
// makes today: the code moved and the entry must be updated.
func writeStale(b *strings.Builder, stale []Equivalent) {
	if len(stale) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Allow-list entries naming no mutant (%d)\n\nThe code moved: update or remove them.\n\n", len(stale))
	for _, e := range stale {
		fmt.Fprintf(b, "- %s: `%s:%d %s`\n", e.At, e.File, e.Line, e.Op)
	}
}

// Stale returns the allow-list entries about the given files that match
// none of the mutants (pass every mutant generated from those files, not a
// sample): entries about other files are not judged.
func Stale(eqs []Equivalent, ms []*Mutant) []Equivalent {
	files := map[string]bool{}
	for _, m := range ms {
		files[m.File] = true
	}
	var out []Equivalent
	for _, e := range eqs {
		if files[e.File] && !slices.ContainsFunc(ms, func(m *Mutant) bool { return e.Matches(m.File, m.Line, m.Col, m.Op, m.Before) }) {
			out = append(out, e)
		}
	}
	return out
}

// pkgDir is the record's package as its directory in the module.
func pkgDir(r *Record) string { return path.Dir(r.File) }

func mutantLine(r *Record) string {
	return fmt.Sprintf("`%s:%d` %s: %s → %s", r.File, r.Line, r.Op, code(r.Before), code(r.After))
}

// code quotes Go source as Markdown inline code.
func code(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func filter(recs []*Record, keep func(*Record) bool) []*Record {
	var out []*Record
	for _, r := range recs {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

func keys(recs []*Record, key func(*Record) string) []string {
	var out []string
	for _, r := range recs {
		out = append(out, key(r))
	}
	slices.SortFunc(out, cmp.Compare)
	return slices.Compact(out)
}
