package oracle

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/escapement/escapement/"

// published are the packages of this module the oracle may import: the
// kernel's and the state machine's public types (events, effects,
// lifecycle records, messages, limits, states), the span types, the
// scenario format, and two helpers.
var published = []string{
	module + "kernel",
	module + "kernel/spans",
	module + "fsm",
	module + "sim/scenario",
	module + "internal/keys",
	module + "internal/textcut",
}

// machinery are the identifiers of those packages that are the agent loop
// itself, or its own statement of the rules the oracle states apart: the
// kernel and its agents, its lifecycle log, its transcript validator and
// state encoding; the state machine's table; the span derivation the
// oracle holds to I25. The oracle judges the loop by what it publishes
// and by its own rules, never by these.
var machinery = map[string][]string{
	module + "kernel":       {"Kernel", "New", "MustNew", "AgentView", "Log", "ValidateTranscript", "FirstSight", "NewFirstSight", "Renamer"},
	module + "fsm":          {"Machine", "NewMachine", "Table", "Matrix"},
	module + "kernel/spans": {"Deriver", "New"},
}

// unpublished lists what a set of Go sources (file name → text) takes from
// outside what the simulator publishes: an import other than the
// standard library and the published packages, or a use of the
// machinery of one of those.
func unpublished(t *testing.T, files map[string]string) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f, err := parser.ParseFile(fset, name, files[name], 0)
		if err != nil {
			t.Fatal(err)
		}
		local := map[string]string{} // import name in this file → path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			switch {
			case slices.Contains(published, path):
			case !strings.Contains(first, "."): // the standard library
				continue
			default:
				out = append(out, name+": imports "+path)
				continue
			}
			n := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				n = imp.Name.Name
			}
			local[n] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if path, ok := local[x.Name]; ok && slices.Contains(machinery[path], sel.Sel.Name) {
				out = append(out, fset.Position(sel.Pos()).String()+": uses "+x.Name+"."+sel.Sel.Name)
			}
			return true
		})
	}
	return out
}

// TestOracleSeesOnlyWhatIsPublished: the oracle's code imports nothing
// but the standard library and the published packages, and uses none of
// their machinery (docs/semantics.md, "The oracle": it judges "never from
// kernel internals"), so what it may read of the agent loop is Tree and
// each step's event and effects.
func TestOracleSeesOnlyWhatIsPublished(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue // tests may hold the kernel's rules to the oracle's
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
	}
	if len(files) < 20 {
		t.Fatalf("only %d files read: the oracle's sources were not found", len(files))
	}
	for _, bad := range unpublished(t, files) {
		t.Error(bad)
	}
}

// TestImportRuleCatchesPlantedCode: unpublished reports an import of the
// engine, of a driver and of a third-party package, and each use of the
// machinery — under an import's own name or another — and nothing else.
func TestImportRuleCatchesPlantedCode(t *testing.T) {
	files := map[string]string{
		"a.go": `package oracle
import (
	"fmt"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/adapters/live"
)
var _ = fmt.Sprint(kernel.NoAgent, sim.Run, live.Driver{})
func f(c kernel.Config) { k, _ := kernel.New(c); _ = k.Step }
`,
		"b.go": `package oracle
import (
	f "github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel/spans"
	"go.yaml.in/yaml/v3"
)
var _ = f.Table()
var _ f.State = f.Idle
var _ = spans.New
var _ spans.Change
var _ = yaml.Node{}
`,
	}
	got := unpublished(t, files)
	want := []string{
		"a.go: imports github.com/escapement/escapement/sim",
		"a.go: imports github.com/escapement/escapement/adapters/live",
		"a.go:9:35: uses kernel.New",
		"b.go:7:9: uses f.Table",
		"b.go:9:9: uses spans.New",
		"b.go: imports go.yaml.in/yaml/v3",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("unpublished found\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
