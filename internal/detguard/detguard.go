// Package detguard is the determinism guard of issue #5: it type-checks Go
// packages and reports what would make the kernel or the simulator
// nondeterministic — reading the wall clock, global math/rand functions,
// goroutines, and ranging over a map (whose order Go randomises) unless the
// line, or the one above it, carries a "determinism:" comment saying why the
// order cannot reach an output. Only tests use it.
package detguard

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"sort"
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
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Pos, out[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Line < b.Line
	})
	return out, nil
}

func checkFile(fset *token.FileSet, info *types.Info, f *ast.File) []Finding {
	// A marker allow-lists the lines of its comment group and the line
	// right after it (a comment above the range, or at the end of its line).
	allowed := map[int]bool{}
	for _, cg := range f.Comments {
		if !strings.Contains(cg.Text(), AllowMarker) {
			continue
		}
		for l := fset.Position(cg.Pos()).Line; l <= fset.Position(cg.End()).Line+1; l++ {
			allowed[l] = true
		}
	}
	var out []Finding
	add := func(n ast.Node, rule, detail string) {
		out = append(out, Finding{Pos: fset.Position(n.Pos()), Rule: rule, Detail: detail})
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			add(n, "goroutine", "starts a goroutine")
		case *ast.CallExpr:
			fn := calleeFunc(info, n.Fun)
			if fn == nil || fn.Pkg() == nil {
				return true
			}
			if sig, ok := fn.Type().(*types.Signature); ok && sig.Recv() != nil {
				return true // methods (a seeded *rand.Rand's) are fine
			}
			switch fn.Pkg().Path() {
			case "time":
				if wallClock[fn.Name()] {
					add(n, "wallclock", "calls time."+fn.Name())
				}
			case "math/rand", "math/rand/v2":
				if !randConstructors[fn.Name()] {
					add(n, "globalrand", "calls the global "+fn.Pkg().Path()+"."+fn.Name())
				}
			}
		case *ast.RangeStmt:
			t := info.TypeOf(n.X)
			if t == nil {
				return true
			}
			if _, ok := t.Underlying().(*types.Map); ok && !allowed[fset.Position(n.Pos()).Line] {
				add(n, "maprange", fmt.Sprintf("ranges over a map (%s) without a %q comment saying why order cannot matter", t, AllowMarker))
			}
		}
		return true
	})
	return out
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
