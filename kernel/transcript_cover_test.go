package kernel

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/escapement/escapement/fsm"
)

// The coverage test holds the transcripts to their promise as documentation:
// together they show every row of fsm.Table() fire and every failure class
// of docs/semantics.md ("The failure catalogue") ruled out, and a file that
// claims a class ("# covers: F3") really shows it.

var coversLine = regexp.MustCompile(`^#\s*covers:\s*(.*)$`)

// claims reads the "# covers: F3, F8" lines of a header.
func claims(header []string) ([]string, error) {
	var out []string
	for _, line := range header {
		m := coversLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, c := range strings.Split(m[1], ",") {
			c = strings.TrimSpace(c)
			if !slices.ContainsFunc(failureShows, func(f failureShow) bool { return f.class == c }) {
				return nil, fmt.Errorf("covers: %q is not a failure class (F1 to F14)", c)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// runTranscripts runs files for their runs only: the output is
// TestTranscripts' to compare, so each directive answers its expected text.
func runTranscripts(t *testing.T, files []string) []*transcriptRun {
	t.Helper()
	var runs []*transcriptRun
	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		runs = append(runs, runTranscript(t, name, string(src)))
	}
	return runs
}

func runTranscript(t *testing.T, name, src string) *transcriptRun {
	t.Helper()
	d := newTranscriptDriver(src)
	d.run.name = name
	t.Run(name, func(t *testing.T) {
		datadriven.RunTestFromStringAny(t, src, func(t testing.TB, td *datadriven.TestData) string {
			d.exec(t, td)
			return td.Expected
		})
	})
	return &d.run
}

// TestTranscriptCoverage checks the transcripts as a whole: at least 30
// files, each starting with a comment block that cites docs/semantics.md,
// each claim shown, the kernel's promises held in every run, and every row
// of fsm.Table() and every failure class covered.
func TestTranscriptCoverage(t *testing.T) {
	runs := runTranscripts(t, transcriptFiles(t))
	if len(runs) < 30 {
		t.Errorf("%d transcript files; the kernel's documentation keeps at least 30", len(runs))
	}
	sections := specSections(t)
	for _, r := range runs {
		cited := citedSections(r.header)
		if len(cited) == 0 {
			t.Errorf("%s: start the file with a # comment block saying what it shows, citing docs/semantics.md (docs/semantics.md, \"Section\")", r.name)
		}
		for _, c := range cited {
			if !sections[c] {
				t.Errorf("%s: cites docs/semantics.md, %q, which has no such section", r.name, c)
			}
		}
		for _, err := range checkRun(r) {
			t.Errorf("%s: %v", r.name, err)
		}
	}
	for _, gap := range coverageGaps(runs) {
		t.Error(gap)
	}
}

// specSections are the section titles of docs/semantics.md.
func specSections(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "docs", "semantics.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(src), "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			out[strings.TrimSpace(title)] = true
		}
	}
	return out
}

var quotedTitle = regexp.MustCompile(`"([^"]+)"`)

// specName is the spec's path as headers cite it, spelled in two pieces so
// the checks that read Go source for citations of its sections do not take
// this code for one.
const specName = "docs/semantics" + ".md"

// citedSections are the sections a header cites: the quoted titles in the
// parentheses that name docs/semantics.md, as in (docs/semantics.md,
// "Inputs"; "Deadlines": debounce).
func citedSections(header []string) []string {
	text := strings.Join(header, " ")
	text = strings.ReplaceAll(text, "# ", "")
	var out []string
	for {
		i := strings.Index(text, specName)
		if i < 0 {
			return out
		}
		text = text[i+len(specName):]
		end := strings.IndexByte(text, ')')
		if end < 0 {
			end = len(text)
		}
		for _, m := range quotedTitle.FindAllStringSubmatch(text[:end], -1) {
			out = append(out, m[1])
		}
	}
}

// checkRun reports a claim the run does not show, an inferred transition
// the table does not declare, and a broken promise.
func checkRun(r *transcriptRun) []error {
	var errs []error
	cs, err := claims(r.header)
	if err != nil {
		errs = append(errs, err)
	}
	for _, c := range cs {
		f := failureShow{}
		for _, x := range failureShows {
			if x.class == c {
				f = x
			}
		}
		if !f.shown(r) {
			errs = append(errs, fmt.Errorf("claims %s but does not show it: a file covering %s must show %s", c, c, f.what))
		}
	}
	if _, err := rowsFired(r); err != nil {
		errs = append(errs, err)
	}
	return append(errs, brokenPromises(r)...)
}

// coverageGaps names every table row no run fires and every failure class
// no run shows.
func coverageGaps(runs []*transcriptRun) []string {
	fired := map[[2]uint8]bool{}
	shown := map[string]bool{}
	for _, r := range runs {
		rows, _ := rowsFired(r)
		for k := range rows { // determinism: set union
			fired[k] = true
		}
		cs, _ := claims(r.header)
		for _, c := range cs {
			for _, f := range failureShows {
				if f.class == c && f.shown(r) {
					shown[c] = true
				}
			}
		}
	}
	var gaps []string
	for _, row := range fsm.Table() {
		if !fired[rowKey(row.From, row.Trigger)] {
			gaps = append(gaps, fmt.Sprintf("no transcript fires %s --%s--> %s (%s): add a file that does", row.From, row.Trigger, row.To, row.Why))
		}
	}
	for _, f := range failureShows {
		if !shown[f.class] {
			gaps = append(gaps, fmt.Sprintf("no transcript covers %s: add one that shows %s, with \"# covers: %s\"", f.class, f.what, f.class))
		}
	}
	return gaps
}

func rowKey(s fsm.State, t fsm.Trigger) [2]uint8 { return [2]uint8{uint8(s), uint8(t)} }

// rowsFired infers which (state, trigger) pairs the kernel fired in a run.
// A move is its transition record. A row that keeps the state leaves no
// transition record, so it is read from the record it leaves, in the state
// the agent is in at that point of the step (each agent's state before the
// step, moved on by its transition records in order). transitionRules
// lists them; an inferred pair the table does not declare is an error (the
// inference, or the kernel, is wrong).
func rowsFired(r *transcriptRun) (map[[2]uint8]bool, error) {
	fired := map[[2]uint8]bool{}
	for i, s := range r.steps {
		for _, p := range stepRows(s) {
			if _, ok := fsm.Lookup(p.from, p.trigger); !ok {
				return fired, fmt.Errorf("step %d (%s): inferred the undeclared pair %s/%s", i+1, s.ev.Describe(), p.from, p.trigger)
			}
			fired[rowKey(p.from, p.trigger)] = true
		}
	}
	return fired, nil
}

type firedRow struct {
	from    fsm.State
	trigger fsm.Trigger
}

// transitionRules says, for each row that keeps the state, which record
// shows it fired. TestTranscriptRulesCoverTable holds it to the table.
var transitionRules = map[[2]uint8]string{
	rowKey(fsm.Idle, fsm.Cancel):             "ignored, for a cancel bound to the current turn",
	rowKey(fsm.Streaming, fsm.Delta):         "a chunk of the request, neither stale, late, refused nor past the output cap",
	rowKey(fsm.Streaming, fsm.Interject):     "interjected, for an interjection",
	rowKey(fsm.Streaming, fsm.Restart):       "request_started with no transition into Streaming before it",
	rowKey(fsm.Tooling, fsm.ToolResult):      "call_finished, not a child's",
	rowKey(fsm.Tooling, fsm.Interject):       "interjected, for an interjection",
	rowKey(fsm.Delegating, fsm.ToolResult):   "call_finished, not a child's",
	rowKey(fsm.Delegating, fsm.ChildOutcome): "call_finished with status child",
	rowKey(fsm.Delegating, fsm.Interject):    "interjected, for an interjection",
	rowKey(fsm.Interrupted, fsm.Submit):      "interjected, for a submission",
	rowKey(fsm.Interrupted, fsm.Interject):   "interjected, for an interjection",
	rowKey(fsm.Interrupted, fsm.Cancel):      "ignored, for a cancel bound to the current turn",
	rowKey(fsm.Streaming, fsm.Compact):       "compaction_started with no move into Streaming by Compact before it",
	rowKey(fsm.Streaming, fsm.Compacted):     "compacted, with no StreamText after it (a compaction turn's completion)",
}

// stepRows is the pairs one step fired, in order.
func stepRows(s transcriptStep) []firedRow {
	cur := map[AgentID]fsm.State{}
	state := func(id AgentID) fsm.State {
		if st, ok := cur[id]; ok {
			return st
		}
		return s.beforeOf(id).state
	}
	var out []firedRow
	entered := map[AgentID]bool{} // moved into Streaming (or compacted); its request_started is that move's
	enteredBy := map[AgentID]fsm.Trigger{}
	deltaRefused := false
	for i, e := range s.effs {
		if e.Kind != EffEmit {
			continue
		}
		l := e.Life
		switch l.Kind {
		case LifeTransition:
			out = append(out, firedRow{l.From, l.Trigger})
			cur[l.Agent] = l.To
			entered[l.Agent] = l.To == fsm.Streaming
			enteredBy[l.Agent] = l.Trigger
			deltaRefused = deltaRefused || l.Trigger == fsm.OutputLimit
		case LifeIgnored:
			if ev := s.ev; ev.Kind == EvCancel && ev.Agent == l.Agent && (ev.Turn == 0 || ev.Turn == s.beforeOf(l.Agent).turn) {
				out = append(out, firedRow{state(l.Agent), fsm.Cancel})
			}
		case LifeInterjected:
			t := fsm.Interject
			if s.ev.Kind == EvSubmit {
				t = fsm.Submit
			}
			out = append(out, firedRow{state(l.Agent), t})
		case LifeRequestStarted:
			if !entered[l.Agent] {
				out = append(out, firedRow{state(l.Agent), fsm.Restart})
			}
			entered[l.Agent] = false
		case LifeCompactionStarted:
			if !entered[l.Agent] || enteredBy[l.Agent] != fsm.Compact {
				out = append(out, firedRow{state(l.Agent), fsm.Compact})
			}
			entered[l.Agent] = false
		case LifeCompacted:
			if !completesTurn(s.effs[i+1:], l.Agent) {
				out = append(out, firedRow{state(l.Agent), fsm.Compacted})
				entered[l.Agent] = true // the request it preceded is Compacted's
			}
		case LifeCallFinished:
			if st := state(l.Agent); st == fsm.Tooling || st == fsm.Delegating {
				t := fsm.ToolResult
				if l.Status == CallChild {
					t = fsm.ChildOutcome
				}
				out = append(out, firedRow{st, t})
			}
		case LifeStale, LifeLate, LifeRejected:
			deltaRefused = true
		}
	}
	if s.ev.Kind == EvLLMDelta && s.target != NoAgent && s.beforeOf(s.target).state == fsm.Streaming && !deltaRefused {
		out = append([]firedRow{{fsm.Streaming, fsm.Delta}}, out...)
	}
	return out
}

// completesTurn reports whether effs move agent out of Streaming by
// StreamText: the compaction record before them ended a compaction turn.
func completesTurn(effs []Effect, agent AgentID) bool {
	for _, e := range effs {
		if l := e.Life; e.Kind == EffEmit && l.Kind == LifeTransition && l.Agent == agent {
			return l.Trigger == fsm.StreamText
		}
	}
	return false
}

// TestTranscriptRulesCoverTable: every row that keeps the state has a rule
// to see it by, so a row added to the table cannot go unseen.
func TestTranscriptRulesCoverTable(t *testing.T) {
	for _, row := range fsm.Table() {
		_, ruled := transitionRules[rowKey(row.From, row.Trigger)]
		if row.Kind != fsm.Move && !ruled {
			t.Errorf("%s/%s keeps the state: teach stepRows how to see it fire and add it to transitionRules", row.From, row.Trigger)
		}
		if row.Kind == fsm.Move && ruled {
			t.Errorf("%s/%s is a move: its transition record shows it; drop its rule", row.From, row.Trigger)
		}
	}
}

// TestTranscriptCoverageNamesGaps proves the coverage check can fail: with
// the files that fire a row (or show a class) left out, it names that row
// (or class).
func TestTranscriptCoverageNamesGaps(t *testing.T) {
	runs := runTranscripts(t, transcriptFiles(t))
	without := func(drop func(*transcriptRun) bool) []*transcriptRun {
		return slices.DeleteFunc(slices.Clone(runs), drop)
	}
	for _, row := range fsm.Table() {
		key := rowKey(row.From, row.Trigger)
		gaps := coverageGaps(without(func(r *transcriptRun) bool {
			rows, _ := rowsFired(r)
			return rows[key]
		}))
		want := fmt.Sprintf("%s --%s--> %s", row.From, row.Trigger, row.To)
		if !slices.ContainsFunc(gaps, func(g string) bool { return strings.Contains(g, want) }) {
			t.Errorf("without the files that fire %s, the gaps do not name it: %q", want, gaps)
		}
	}
	for _, f := range failureShows {
		gaps := coverageGaps(without(func(r *transcriptRun) bool {
			cs, _ := claims(r.header)
			return slices.Contains(cs, f.class)
		}))
		if !slices.ContainsFunc(gaps, func(g string) bool { return strings.Contains(g, "covers "+f.class+":") }) {
			t.Errorf("without the files that claim %s, the gaps do not name it: %q", f.class, gaps)
		}
	}
}

// TestTranscriptClaimsMustShow proves no claim is free: a plain turn that
// claims every class shows none of them.
func TestTranscriptClaimsMustShow(t *testing.T) {
	classes := make([]string, len(failureShows))
	for i, f := range failureShows {
		classes[i] = f.class
	}
	src := "# A plain turn (docs/semantics.md, \"Turns\").\n# covers: " + strings.Join(classes, ", ") + "\n\n" +
		"submit \"hi\"\n----\n\nchunk main \"hello\"\n----\n\nend main\n----\n"
	r := runTranscript(t, "plain-turn-claims-all", src)
	errs := checkRun(r)
	for _, c := range classes {
		if !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), "claims "+c+" ") }) {
			t.Errorf("a plain turn passes as showing %s: %v", c, errs)
		}
	}
}

// TestTranscriptCitations: the header check reads the sections a file
// cites, and a section the spec lacks is not taken for one it has.
func TestTranscriptCitations(t *testing.T) {
	header := []string{
		`# A cancel (` + specName + `, "Inputs"; "Deadlines": grace). Not a`,
		`# section: "name". Nor (` + specName + `, "No such section").`,
	}
	got := citedSections(header)
	if want := []string{"Inputs", "Deadlines", "No such section"}; !slices.Equal(got, want) {
		t.Fatalf("cited %q, want %q", got, want)
	}
	sections := specSections(t)
	if !sections["Inputs"] || !sections["Deadlines"] || sections["No such section"] {
		t.Fatalf("docs/semantics.md sections misread: %v", sections)
	}
}
