package oracle

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
	"pgregory.net/rapid"
)

// machineDiff lists where a transition table and the oracle's statement of
// the machine disagree (empty when they agree row for row).
func machineDiff(spec []move, table []fsm.Transition) []string {
	key := func(from fsm.State, on fsm.Trigger) string { return from.String() + "+" + on.String() }
	want := map[string]move{}
	for _, mv := range spec {
		want[key(mv.from, mv.on)] = mv
	}
	var diff []string
	seen := map[string]bool{}
	for _, t := range table {
		k := key(t.From, t.Trigger)
		if seen[k] {
			diff = append(diff, k+": declared twice")
		}
		seen[k] = true
		mv, ok := want[k]
		switch {
		case !ok:
			diff = append(diff, fmt.Sprintf("%s → %s (%s): the oracle's machine has no such edge", k, t.To, t.Kind))
		case mv.to != t.To || mv.kind != t.Kind:
			diff = append(diff, fmt.Sprintf("%s → %s (%s): the oracle's machine says %s (%s)", k, t.To, t.Kind, mv.to, mv.kind))
		}
	}
	for _, mv := range spec {
		if k := key(mv.from, mv.on); !seen[k] {
			diff = append(diff, fmt.Sprintf("%s → %s (%s): missing from the table", k, mv.to, mv.kind))
		}
	}
	slices.Sort(diff)
	return diff
}

// TestOracleMachineIsTheTable: fsm.Table — which configures the kernel's
// machine — and the oracle's own statement of the machine agree row for
// row, kinds included; and the comparison sees each kind of edit to the
// table: the F1 edge (Interrupted → Streaming once results are in), a
// declared no-op removed, a no-op turned into a move.
func TestOracleMachineIsTheTable(t *testing.T) {
	if d := machineDiff(specMoves(), fsm.Table()); len(d) > 0 {
		t.Fatalf("fsm.Table and the oracle's machine disagree:\n%s", strings.Join(d, "\n"))
	}
	// The machine the kernel runs, and fsm.Lookup, answer every pair as the
	// statement does.
	legal := legalMoves()
	m := fsm.NewMachine()
	for _, from := range fsm.States() {
		for _, on := range fsm.Triggers() {
			to, declared := legal.lookup(from, on)
			if tr, ok := fsm.Lookup(from, on); ok != declared || (ok && (tr.To != to || tr.From != from || tr.Trigger != on)) {
				t.Errorf("fsm.Lookup(%s, %s) = %+v, %v; the oracle's machine: %s, %v", from, on, tr, ok, to, declared)
			}
			if got := m.CanFire(from, on); got != declared {
				t.Errorf("CanFire(%s, %s) = %v, want %v", from, on, got, declared)
			}
			st := from
			err := m.Fire(&st, on)
			var und *fsm.UndeclaredError
			switch {
			case declared && (err != nil || st != to):
				t.Errorf("Fire(%s, %s): %v, now %s; want %s", from, on, err, st, to)
			case !declared && (!errors.As(err, &und) || und.State != from || und.Trigger != on || st != from):
				t.Errorf("Fire(%s, %s) of an undeclared pair: %v, now %s", from, on, err, st)
			}
		}
	}
	edits := map[string]func([]fsm.Transition) []fsm.Transition{
		"F1 edge": func(tab []fsm.Transition) []fsm.Transition {
			return append(tab, fsm.Transition{From: fsm.Interrupted, Trigger: fsm.ResultsIn, To: fsm.Streaming, Kind: fsm.Move})
		},
		"no-op row removed": func(tab []fsm.Transition) []fsm.Transition {
			return slices.DeleteFunc(tab, func(t fsm.Transition) bool { return t.From == fsm.Idle && t.Trigger == fsm.Cancel })
		},
		"no-op made a move": func(tab []fsm.Transition) []fsm.Transition {
			for i := range tab {
				if tab[i].From == fsm.Interrupted && tab[i].Trigger == fsm.Cancel {
					tab[i].Kind = fsm.Move
				}
			}
			return tab
		},
	}
	for _, name := range keys.Sorted(edits) {
		if d := machineDiff(specMoves(), edits[name](fsm.Table())); len(d) != 1 {
			t.Errorf("%s: want one difference, got %q", name, d)
		} else {
			t.Logf("%s: %s", name, d[0])
		}
	}
}

// TestOracleMachineRules: the oracle's statement keeps what the catalogue
// needs: no edge from Interrupted to a working state (F1), the only way out
// of Interrupted is Settled, and every no-op keeps the state.
func TestOracleMachineRules(t *testing.T) {
	for _, mv := range specMoves() {
		if mv.from == fsm.Interrupted && isActive(mv.to) {
			t.Errorf("%s --%s--> %s: an edge from Interrupted to a working state", mv.from, mv.on, mv.to)
		}
		if mv.from == fsm.Interrupted && mv.to != fsm.Interrupted && mv.on != fsm.Settled {
			t.Errorf("%s --%s--> %s: Interrupted left by something other than Settled", mv.from, mv.on, mv.to)
		}
		if mv.kind != fsm.Move && mv.to != mv.from {
			t.Errorf("%s --%s--> %s: a %s row changes the state", mv.from, mv.on, mv.to, mv.kind)
		}
	}
}

// genTranscript draws a chat history that is mostly valid, with now and
// then one of the slips a transcript can have.
func genTranscript() *rapid.Generator[[]kernel.Message] {
	return rapid.Custom(func(t *rapid.T) []kernel.Message {
		var h []kernel.Message
		if rapid.Bool().Draw(t, "system") {
			h = append(h, kernel.Message{Role: kernel.RoleSystem, Content: "sys"})
		}
		ids := []string{"a", "b", "c", "a"}
		for n := rapid.IntRange(0, 6).Draw(t, "n"); n > 0; n-- {
			switch rapid.IntRange(0, 9).Draw(t, "kind") {
			case 0:
				h = append(h, kernel.Message{Role: kernel.RoleUser, Content: rapid.SampledFrom([]string{"hi", ""}).Draw(t, "user")})
			case 1:
				h = append(h, kernel.Message{Role: kernel.RoleAssistant, Content: rapid.SampledFrom([]string{"ok", ""}).Draw(t, "text")})
			case 2, 3, 4:
				var calls []kernel.ToolCall
				for c := rapid.IntRange(1, 3).Draw(t, "calls"); c > 0; c-- {
					calls = append(calls, kernel.ToolCall{
						ID:   rapid.SampledFrom(ids).Draw(t, "id") + rapid.SampledFrom([]string{"1", "2", ""}).Draw(t, "suffix"),
						Name: rapid.SampledFrom([]string{"grep", "grep", ""}).Draw(t, "name"),
					})
				}
				h = append(h, kernel.Message{Role: kernel.RoleAssistant, ToolCalls: calls})
				// Answer them, mostly in full and in order.
				order := rapid.Permutation(calls).Draw(t, "order")
				for i, c := range order {
					if i == len(order)-1 && rapid.IntRange(0, 4).Draw(t, "skip") == 0 {
						break
					}
					h = append(h, kernel.Message{Role: kernel.RoleTool, ToolCallID: c.ID, Content: "r"})
				}
			case 5:
				h = append(h, kernel.Message{Role: kernel.RoleTool, ToolCallID: rapid.SampledFrom(ids).Draw(t, "stray"), Content: "r"})
			case 6:
				h = append(h, kernel.Message{Role: kernel.RoleSystem, Content: "late"})
			case 7:
				h = append(h, kernel.Message{Role: kernel.Role(rapid.SampledFrom([]string{"developer", "user"}).Draw(t, "role")), Content: "x"})
			default:
				h = append(h, kernel.Message{Role: kernel.RoleUser, Content: "more"})
			}
		}
		return h
	})
}

// TestTranscriptRulesAgree: the oracle's own statement of a valid
// transcript (validTranscript) and the kernel's ValidateTranscript — which
// vets a resumed session's history — accept and refuse the same histories.
func TestTranscriptRulesAgree(t *testing.T) {
	// The slips a provider refuses, each once for certain (the generator
	// below draws them only now and then).
	call := func(ids ...string) kernel.Message {
		m := kernel.Message{Role: kernel.RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, kernel.ToolCall{ID: id, Name: "grep"})
		}
		return m
	}
	result := func(id string) kernel.Message {
		return kernel.Message{Role: kernel.RoleTool, ToolCallID: id, Content: "r"}
	}
	for _, c := range []struct {
		name string
		h    []kernel.Message
	}{
		{"result for an unknown call", []kernel.Message{call("a1"), result("a1"), result("b")}},
		{"result for an unknown call, one open", []kernel.Message{call("a1", "a2"), result("zz"), result("a1")}},
		{"result answered twice", []kernel.Message{call("a1"), result("a1"), result("a1")}},
		{"stray result before any call", []kernel.Message{{Role: kernel.RoleUser, Content: "hi"}, result("a1")}},
		{"result of an earlier message's call", []kernel.Message{call("a1"), result("a1"), call("b1"), result("a1")}},
		{"call without result before a user text", []kernel.Message{call("a1"), {Role: kernel.RoleUser, Content: "hi"}}},
	} {
		for _, openTail := range []bool{false, true} {
			_, why := validTranscript(c.h, openTail)
			err := kernel.ValidateTranscript(c.h, openTail)
			if why == "" || err == nil {
				t.Errorf("%s (open tail %v): oracle %q, kernel %v; both must refuse it", c.name, openTail, why, err)
			}
		}
	}
	if t.Failed() {
		return
	}
	// The generator covers both kinds, over fixed seeds (a count over
	// rapid's random draws could come out one-sided by chance).
	valid, invalid := 0, 0
	for seed := range 60 {
		if kernel.ValidateTranscript(genTranscript().Example(seed), seed%2 == 0) == nil {
			valid++
		} else {
			invalid++
		}
	}
	if valid == 0 || invalid == 0 {
		t.Fatalf("%d valid and %d invalid histories of seeds 0..59: the generator does not cover both", valid, invalid)
	}
	rapid.Check(t, func(t *rapid.T) {
		h := genTranscript().Draw(t, "history")
		openTail := rapid.Bool().Draw(t, "open_tail")
		_, why := validTranscript(h, openTail)
		err := kernel.ValidateTranscript(h, openTail)
		if (why == "") != (err == nil) {
			t.Fatalf("oracle: %q, kernel: %v\nhistory: %+v", why, err, h)
		}
	})
}

// TestInvariantsCheckedOnce: every invariant (and run limit, and
// expectation) is reported from exactly one file, the one its Checker
// names — a file of this package, or of package sim for what the
// simulator checks itself — and every report names one of them.
func TestInvariantsCheckedOnce(t *testing.T) {
	fset := token.NewFileSet()
	var files []string
	for dir, prefix := range map[string]string{".": "sim/oracle/", "..": "sim/"} { // determinism: files are sorted below
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			files = append(files, prefix+filepath.Base(name))
		}
	}
	slices.Sort(files)
	if !slices.Contains(files, "sim/crash.go") || !slices.Contains(files, "sim/oracle/check_freeze.go") {
		t.Fatalf("the files of sim and sim/oracle were not found: %v", files)
	}
	known := map[string]Invariant{}
	for _, s := range invariantTable {
		known[constName(t, s.inv)] = s.inv
	}
	where := map[Invariant]map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join("..", "..", name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var arg ast.Expr
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "violate" || sel.Sel.Name == "Violate") && len(n.Args) > 0 {
					arg = n.Args[0]
				}
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Invariant" {
					arg = n.Value
				}
			}
			if arg == nil {
				return true
			}
			if sel, ok := arg.(*ast.SelectorExpr); ok { // oracle.RebuildsExactly in package sim
				arg = sel.Sel
			}
			id, ok := arg.(*ast.Ident)
			if !ok {
				if pos := fset.Position(arg.Pos()); !strings.HasSuffix(pos.Filename, "invariant.go") && !strings.HasSuffix(pos.Filename, "oracle.go") {
					t.Errorf("%s: a violation whose invariant is not a named constant", pos)
				}
				return true
			}
			inv, ok := known[id.Name]
			if !ok {
				if pos := fset.Position(arg.Pos()); id.Name != "inv" && id.Name != "v" {
					t.Errorf("%s: violation of %s, which is no Invariant constant", pos, id.Name)
				}
				return true
			}
			if where[inv] == nil {
				where[inv] = map[string]bool{}
			}
			where[inv][name] = true
			return true
		})
	}
	for _, s := range invariantTable {
		got := keys.Sorted(where[s.inv])
		if len(got) != 1 || got[0] != s.checker {
			t.Errorf("%s is reported from %v, want only %s", s.inv, got, s.checker)
		}
	}
}

// constName is the name of the constant that holds inv in invariant.go.
func constName(t *testing.T, inv Invariant) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "invariant.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != 1 {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Value == `"`+string(inv)+`"` {
			name = vs.Names[0].Name
		}
		return true
	})
	if name == "" {
		t.Fatalf("no constant for %s", inv)
	}
	return name
}

// TestSemanticsListsInvariants: docs/semantics.md's oracle table (the one
// copy; docs/oracle.md links to it) states every invariant as
// invariantTable does: its id, its statement and the file that checks it.
func TestSemanticsListsInvariants(t *testing.T) {
	for _, doc := range []string{"../../docs/semantics.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, inv := range Invariants() {
			row := fmt.Sprintf("| %s | %s | `%s` |", inv, inv.Statement(), inv.Checker())
			if !strings.Contains(text, row) {
				t.Errorf("%s lacks the row\n%s", doc, row)
			}
		}
	}
}
