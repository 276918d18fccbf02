// Package detguard is the determinism guard (docs/semantics.md,
// "Determinism"): it type-checks Go packages and reports what would make
// the kernel or the simulator nondeterministic — reading the wall clock, global math/rand functions,
// goroutines, and ranging over a map or its maps.Keys/Values/All (whose
// order Go randomises) unless a comment starting "determinism:" says why the
// order cannot reach an output — at the end of the range's line, or in the
// comment group right above it. Only tests use it.
package detguard

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Finding is one rule broken at one place.
type Finding struct {
	Pos    token.Position
	Rule   string // wallclock | globalrand | goroutine | maprange
	Detail string
}

func (f Finding) String() string { return fmt.Sprintf("%s: %s: %s", f.Pos, f.Rule, f.Detail) }

// AllowMarker is the comment that allow-lists one map range, with a reason.
const AllowMarker = "determinism:"

var wallClock = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true,
	"AfterFunc": true, "NewTimer": true, "NewTicker": true, "Tick": true,
}

// randConstructors are the math/rand functions that build a seeded source
// rather than use the global one.
var randConstructors = map[string]bool{
	"New": true, "NewSource": true, "NewPCG": true, "NewChaCha8": true, "NewZipf": true,
}

// Check loads the packages matching patterns (non-test files) from dir and
// reports every finding, sorted by position.
func Check(dir string, patterns ...string) ([]Finding, error) {
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir:  dir,
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("load %v: %w", patterns, err)
	}
	var out []Finding
	for _, p := range pkgs {
		for _, e := range p.Errors {
			return nil, fmt.Errorf("package %s: %v", p.PkgPath, e)
		}
		for _, f := range p.Syntax {
			out = append(out, checkFile(p.Fset, p.TypesInfo, f)...)
		}
	}
	sortFindings(out)
	return out, nil
}

// sortFindings orders findings totally: file, line, column, rule, detail.
func sortFindings(fs []Finding) { slices.SortStableFunc(fs, compareFindings) }

func compareFindings(a, b Finding) int {
	return cmp.Or(
		strings.Compare(a.Pos.Filename, b.Pos.Filename),
		cmp.Compare(a.Pos.Line, b.Pos.Line),
		cmp.Compare(a.Pos.Column, b.Pos.Column),
		strings.Compare(a.Rule, b.Rule),
		strings.Compare(a.Detail, b.Detail),
	)
}

func checkFile(fset *token.FileSet, info *types.Info, f *ast.File) []Finding {
	allowed := allowedLines(fset, f)
	var out []Finding
	add := func(n ast.Node, rule, detail string) {
		out = append(out, Finding{Pos: fset.Position(n.Pos()), Rule: rule, Detail: detail})
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			add(n, "goroutine", "starts a goroutine")
		case *ast.Ident:
			// Every use of a banned function, called or taken as a value
			// (f := time.Now), is an identifier resolving to it.
			fn, _ := info.Uses[n].(*types.Func)
			if fn == nil || fn.Pkg() == nil {
				return true
			}
			if sig, ok := fn.Type().(*types.Signature); ok && sig.Recv() != nil {
				return true // methods (a seeded *rand.Rand's) are fine
			}
			switch fn.Pkg().Path() {
			case "time":
				if wallClock[fn.Name()] {
					add(n, "wallclock", "uses time."+fn.Name())
				}
			case "math/rand", "math/rand/v2":
				if !randConstructors[fn.Name()] {
					add(n, "globalrand", "uses the global "+fn.Pkg().Path()+"."+fn.Name())
				}
			}
		case *ast.RangeStmt:
			t := info.TypeOf(n.X)
			if t == nil {
				return true
			}
			if allowed[fset.Position(n.Pos()).Line] {
				return true
			}
			if _, ok := t.Underlying().(*types.Map); ok {
				add(n, "maprange", fmt.Sprintf("ranges over a map (%s) without a %q comment saying why order cannot matter", t, AllowMarker))
			} else if it := mapIterator(info, n.X); it != "" {
				add(n, "maprange", fmt.Sprintf("ranges over %s of a map without a %q comment saying why order cannot matter", it, AllowMarker))
			}
		}
		return true
	})
	return out
}

// allowedLines is the set of lines a marker allow-lists. A comment starting
// with the marker and a non-empty reason allows its own line when code
// shares that line (a trailing comment), else only the line right after its
// comment group (a comment above the range).
func allowedLines(fset *token.FileSet, f *ast.File) map[int]bool {
	code := map[int]bool{} // lines holding a token other than a comment
	ast.Inspect(f, func(n ast.Node) bool {
		switch n.(type) {
		case nil, *ast.File:
			return true
		case *ast.CommentGroup, *ast.Comment:
			return false
		}
		code[fset.Position(n.Pos()).Line] = true
		code[fset.Position(n.End()-1).Line] = true
		return true
	})
	allowed := map[int]bool{}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			if !isMarker(c.Text) {
				continue
			}
			if l := fset.Position(c.Pos()).Line; code[l] {
				allowed[l] = true
			} else {
				allowed[fset.Position(cg.End()).Line+1] = true
			}
		}
	}
	return allowed
}

// isMarker reports whether a comment's text starts with AllowMarker and
// gives a reason.
func isMarker(comment string) bool {
	text, ok := strings.CutPrefix(comment, "//")
	if !ok {
		text = strings.TrimSuffix(strings.TrimPrefix(comment, "/*"), "*/")
	}
	reason, ok := strings.CutPrefix(strings.TrimSpace(text), AllowMarker)
	return ok && strings.TrimSpace(reason) != ""
}

// mapIterator names the maps.Keys, maps.Values or maps.All call x is, if it
// is one ("" if not): ranging over it is ranging over the map.
func mapIterator(info *types.Info, x ast.Expr) string {
	call, ok := ast.Unparen(x).(*ast.CallExpr)
	if !ok {
		return ""
	}
	fn := calleeFunc(info, call.Fun)
	if fn == nil || fn.Pkg() == nil {
		return ""
	}
	switch fn.Pkg().Path() + "." + fn.Name() {
	case "maps.Keys", "maps.Values", "maps.All":
		return "maps." + fn.Name()
	case "slices.Collect":
		// Collecting keeps the map's order (slices.Sorted would not).
		if len(call.Args) == 1 {
			if inner := mapIterator(info, call.Args[0]); inner != "" {
				return "slices.Collect(" + inner + ")"
			}
		}
	}
	return ""
}

// calleeFunc resolves the function a call expression calls, if static.
func calleeFunc(info *types.Info, fun ast.Expr) *types.Func {
	switch e := fun.(type) {
	case *ast.Ident:
		f, _ := info.Uses[e].(*types.Func)
		return f
	case *ast.SelectorExpr:
		f, _ := info.Uses[e.Sel].(*types.Func)
		return f
	case *ast.IndexExpr:
		return calleeFunc(info, e.X)
	}
	return nil
}
