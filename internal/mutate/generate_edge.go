package mutate

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"regexp"
	"strconv"
	"strings"
)

// The operators of this file plant the bugs an independent review of the
// live edge found that token flips miss (docs/development.md, "Mutation
// testing"): a side effect skipped while the caller is told it worked (an
// fsync, a close, a truncate), an error swallowed, an error path never
// taken, a case dropped from a classification, a redactor bypassed, a
// string searched from the wrong end, a slice cut one byte off, a condition
// missing one of its parts, a classifier answering the opposite, a note
// ("truncated: …") dropped from a text.

// sideEffectCalls are the calls whose only result is an error and whose
// point is what they do to the world: skipping one while reporting success
// is the bug (a forgotten fsync, a file never closed or truncated). A name
// holding "sync" (syncDir, logSync) counts too.
var sideEffectCalls = map[string]bool{
	"Sync": true, "Close": true, "Flush": true, "Truncate": true, "Chmod": true, "Chown": true,
	"Chtimes": true, "Remove": true, "RemoveAll": true, "Rename": true, "Link": true, "Symlink": true,
	"Mkdir": true, "MkdirAll": true, "WriteFile": true, "Kill": true, "Signal": true, "Setenv": true,
	"Unsetenv": true, "Lock": true, "Unlock": true, "Seek": true,
}

// redactorName matches the functions that keep secrets out of a text: a
// call of one is what skip-redact bypasses.
var redactorName = regexp.MustCompile(`(?i)redact|scrub|sanitiz`)

// indexSwaps are the search functions of strings and bytes that have a
// twin searching from the other end.
var indexSwaps = map[string]string{
	"Index": "LastIndex", "LastIndex": "Index",
	"IndexByte": "LastIndexByte", "LastIndexByte": "IndexByte",
	"IndexAny": "LastIndexAny", "LastIndexAny": "IndexAny",
	"IndexFunc": "LastIndexFunc", "LastIndexFunc": "IndexFunc",
}

var errorType = types.Universe.Lookup("error").Type()

func (g *generator) isError(e ast.Expr) bool {
	t := g.pkg.Info.TypeOf(e)
	return t != nil && types.Identical(t, errorType)
}

// lastIsError reports a call whose last result is an error.
func (g *generator) lastIsError(call *ast.CallExpr) bool {
	switch t := g.pkg.Info.TypeOf(call).(type) {
	case *types.Tuple:
		return t.Len() > 0 && types.Identical(t.At(t.Len()-1).Type(), errorType)
	case nil:
		return false
	default:
		return types.Identical(t, errorType)
	}
}

// calleeName is the last identifier of a call's function expression
// (f, x.f, x.y.f), "" for anything else.
func calleeName(call *ast.CallExpr) string {
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// pkgFunc reports the package path and name of a package-level function
// call (strings.Index), "" when it is not one.
func (g *generator) pkgFunc(call *ast.CallExpr) (path, name string) {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return "", ""
	}
	fn, ok := g.pkg.Info.Uses[sel.Sel].(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Type().(*types.Signature).Recv() != nil {
		return "", ""
	}
	return fn.Pkg().Path(), fn.Name()
}

func (g *generator) text(n ast.Node) string {
	return string(g.file.Src[g.off(n.Pos()):g.off(n.End())])
}

// replaceNode adds a mutant that replaces node n's text with text, named
// at position at.
func (g *generator) replaceNode(op Operator, at token.Pos, n ast.Node, text string) {
	g.add(op, at, edit{g.off(n.Pos()), g.off(n.End()), text})
}

// parent is the node holding the current one (nil at the top).
func (g *generator) parent() ast.Node {
	if len(g.stack) == 0 {
		return nil
	}
	return g.stack[len(g.stack)-1]
}

// callEdge adds the mutants of a call: skip-call, skip-redact, index-swap
// and drop-suffix of a Sprintf.
func (g *generator) callEdge(call *ast.CallExpr) {
	g.skipCall(call)
	g.skipRedact(call)
	if path, name := g.pkgFunc(call); path == "strings" || path == "bytes" {
		if to, ok := indexSwaps[name]; ok {
			sel := ast.Unparen(call.Fun).(*ast.SelectorExpr).Sel
			g.replace(IndexSwap, sel.Pos(), len(sel.Name), to)
		}
	}
}

// skipCall: a side-effect call whose only result is an error, used as a
// value, replaced by a function that does not make it and returns nil. The
// call stays in the text (under `if false`) so every name it uses stays
// used. A call statement is remove-call's; a deferred one is left alone
// (a leak no test sees).
func (g *generator) skipCall(call *ast.CallExpr) {
	name := calleeName(call)
	if !sideEffectCalls[name] && !strings.Contains(strings.ToLower(name), "sync") || !g.isError(call) {
		return
	}
	switch p := g.parent().(type) {
	case *ast.ExprStmt, *ast.DeferStmt, *ast.GoStmt:
		return
	case *ast.AssignStmt:
		if g.allBlank(p.Lhs) {
			return // remove-call drops `_ = x.Close()`
		}
	}
	g.replaceNode(SkipCall, call.Pos(), call, "func() error { if false { return "+g.text(call)+" }; return nil }()")
}

// skipRedact: a call of a redactor replaced by its argument of the same
// type (the text, or the writer, passed on as it was).
func (g *generator) skipRedact(call *ast.CallExpr) {
	if !redactorName.MatchString(calleeName(call)) {
		return
	}
	t := g.pkg.Info.TypeOf(call)
	if t == nil {
		return
	}
	for _, a := range call.Args {
		if at := g.pkg.Info.TypeOf(a); at != nil && types.Identical(at, t) {
			g.replaceNode(SkipRedact, call.Pos(), call, g.text(a))
			return
		}
	}
}

// sprintfNote: fmt.Sprintf("%s…", s, …) replaced by s — the text without
// the note after it (a "[truncated: …]" line, a suffix). Sprintf is
// otherwise message text and left alone (messageOrLog).
func (g *generator) sprintfNote(call *ast.CallExpr) {
	if path, name := g.pkgFunc(call); path != "fmt" || name != "Sprintf" || len(call.Args) < 2 {
		return
	}
	lit, ok := ast.Unparen(call.Args[0]).(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return
	}
	format, err := strconv.Unquote(lit.Value)
	if err != nil || !strings.HasPrefix(format, "%s") || format == "%s" {
		return
	}
	if b, ok := g.pkg.Info.TypeOf(call.Args[1]).Underlying().(*types.Basic); !ok || b.Kind() != types.String {
		return
	}
	g.replaceNode(DropSuffix, call.Args[1].Pos(), call, g.text(call.Args[1]))
}

func (g *generator) allBlank(lhs []ast.Expr) bool {
	for _, l := range lhs {
		if id, ok := l.(*ast.Ident); !ok || id.Name != "_" {
			return false
		}
	}
	return true
}

// ignoreError: `…, err := f(…)` (or `=`) followed by `err = nil` on the
// same line — the call made, its error dropped. Left out where the next
// statement is `if err != nil`: skipping that check is remove-return's or
// skip-err-check's mutant already.
func (g *generator) ignoreError(n *ast.AssignStmt) {
	if len(n.Rhs) != 1 || (n.Tok != token.DEFINE && n.Tok != token.ASSIGN) || !g.removable(n) {
		return
	}
	call, ok := ast.Unparen(n.Rhs[0]).(*ast.CallExpr)
	if !ok || !g.lastIsError(call) || g.messageOrLog(call) {
		return
	}
	id, ok := n.Lhs[len(n.Lhs)-1].(*ast.Ident)
	if !ok || id.Name == "_" || !g.isError(id) {
		return
	}
	if next := g.nextStmt(n); next != nil {
		if ifs, ok := next.(*ast.IfStmt); ok && ifs.Init == nil && g.errCheckOf(ifs.Cond) == id.Name {
			return
		}
	}
	end := g.off(n.End())
	g.add(IgnoreError, n.Pos(), edit{end, end, "; " + id.Name + " = nil"})
}

// nextStmt is the statement after s in its list (nil if last).
func (g *generator) nextStmt(s ast.Stmt) ast.Stmt {
	var list []ast.Stmt
	switch p := g.parent().(type) {
	case *ast.BlockStmt:
		list = p.List
	case *ast.CaseClause:
		list = p.Body
	case *ast.CommClause:
		list = p.Body
	}
	for i, x := range list {
		if x == s && i+1 < len(list) {
			return list[i+1]
		}
	}
	return nil
}

// errCheckOf returns the name of the error variable cond tests against
// nil (`err != nil`), "" if cond is not such a test.
func (g *generator) errCheckOf(cond ast.Expr) string {
	b, ok := ast.Unparen(cond).(*ast.BinaryExpr)
	if !ok || b.Op != token.NEQ || !g.isError(b.X) {
		return ""
	}
	if nilID, ok := ast.Unparen(b.Y).(*ast.Ident); !ok || nilID.Name != "nil" {
		return ""
	}
	if id, ok := ast.Unparen(b.X).(*ast.Ident); ok {
		return id.Name
	}
	return g.text(b.X)
}

// skipErrCheck: `if err != nil { … }` whose body never runs. A body that
// is one return is left to remove-return, which makes the same bug.
func (g *generator) skipErrCheck(n *ast.IfStmt) {
	if g.errCheckOf(n.Cond) == "" {
		return
	}
	if len(n.Body.List) == 1 && n.Else == nil {
		if _, ok := n.Body.List[0].(*ast.ReturnStmt); ok {
			return
		}
	}
	at := g.off(n.Cond.Pos())
	g.add(SkipErrCheck, n.Cond.Pos(), edit{at, at, "false && "})
}

// dropCase: one value removed from a case list of two or more (a status
// no longer retried, an event no longer synced). A type switch that binds
// a variable is left alone: the variable's type would change.
func (g *generator) dropCase(c *ast.CaseClause) {
	if len(c.List) < 2 || len(g.stack) < 2 {
		return
	}
	if ts, ok := g.stack[len(g.stack)-2].(*ast.TypeSwitchStmt); ok {
		if _, binds := ts.Assign.(*ast.AssignStmt); binds {
			return
		}
	}
	for i, v := range c.List {
		var e edit
		if i+1 < len(c.List) {
			e = edit{g.off(v.Pos()), g.off(c.List[i+1].Pos()), ""}
		} else {
			e = edit{g.off(c.List[i-1].End()), g.off(v.End()), ""}
		}
		g.add(DropCase, v.Pos(), e)
	}
}

// sliceBound: s[lo:hi] cut one element off at either end — lo+1, hi-1 (an
// offset off by one). A literal 0 bound is left alone: s[0+1:] is the
// same as any other s[1:], and s[:0-1] does not compile.
func (g *generator) sliceBound(n *ast.SliceExpr) {
	if n.Slice3 {
		return
	}
	if n.Low != nil {
		if lit, ok := ast.Unparen(n.Low).(*ast.BasicLit); !ok || lit.Value != "0" {
			g.replaceNode(SliceBound, n.Low.Pos(), n.Low, g.operand(n.Low)+"+1")
		}
	}
	if lit, ok := ast.Unparen(n.High).(*ast.BasicLit); n.High != nil && (!ok || lit.Value != "0") {
		g.replaceNode(SliceBound, n.High.Pos(), n.High, g.operand(n.High)+"-1")
	}
}

// operand is e's text, parenthesised unless it binds tighter than + and -.
func (g *generator) operand(e ast.Expr) string {
	switch e.(type) {
	case *ast.BinaryExpr:
		return "(" + g.text(e) + ")"
	}
	return g.text(e)
}

// dropCond: the right side of a && or || dropped — a condition that
// forgot its last part (`ok && v != ""` read as `ok`, one of the transient
// statuses left out of an ||). Dropping the left side would mostly repeat
// what the other operators plant on it.
func (g *generator) dropCond(n *ast.BinaryExpr) {
	if n.Op != token.LAND && n.Op != token.LOR {
		return
	}
	g.replaceNode(DropCond, n.Y.Pos(), n, g.text(n.X))
}

// dropSuffix: `s + fmt.Sprintf(…)` keeps only s — the note computed for
// the end of a text ("[truncated: …]") forgotten. Other concatenations are
// names and message text, which the fixed exclusions leave alone too.
func (g *generator) dropSuffix(n *ast.BinaryExpr) {
	if n.Op != token.ADD {
		return
	}
	call, ok := ast.Unparen(n.Y).(*ast.CallExpr)
	if !ok {
		return
	}
	if path, name := g.pkgFunc(call); path != "fmt" || name != "Sprintf" {
		return
	}
	g.replaceNode(DropSuffix, n.OpPos, n, g.text(n.X))
}

// returnBool: a function returning one bool answers the opposite — a
// classifier turned around. Literal results are flip-bool's.
func (g *generator) returnBool(n *ast.ReturnStmt) {
	if len(n.Results) != 1 || !g.returnsOneBool() {
		return
	}
	r := n.Results[0]
	if id, ok := ast.Unparen(r).(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
		return
	}
	text := g.text(r)
	switch ast.Unparen(r).(type) {
	case *ast.Ident, *ast.CallExpr, *ast.SelectorExpr, *ast.IndexExpr, *ast.ParenExpr:
		text = "!" + text
	default:
		text = "!(" + text + ")"
	}
	g.replaceNode(ReturnBool, r.Pos(), r, text)
}

// returnsOneBool reports whether the innermost function around the current
// node returns exactly one bool.
func (g *generator) returnsOneBool() bool {
	ft := g.fnType
	for i := len(g.stack) - 1; i >= 0; i-- {
		if lit, ok := g.stack[i].(*ast.FuncLit); ok {
			ft = lit.Type
			break
		}
	}
	if ft == nil || ft.Results == nil || ft.Results.NumFields() != 1 {
		return false
	}
	b, ok := g.pkg.Info.TypeOf(ft.Results.List[0].Type).Underlying().(*types.Basic)
	return ok && b.Kind() == types.Bool
}

// typeChecked are the operators whose mutants can fail to compile (a name
// used only in the dropped part is then unused): Generate keeps only those
// that type-check.
var typeChecked = map[Operator]bool{DropCond: true, SkipRedact: true, DropSuffix: true, SliceBound: true}

// compiles type-checks the package with f replaced by the mutant.
func (p *Package) compiles(f *File, m *Mutant) bool { return p.compilesErr(f, m) == nil }

func (p *Package) compilesErr(f *File, m *Mutant) error {
	mf, err := parser.ParseFile(p.Fset, f.Abs, m.Source(), parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	files := make([]*ast.File, 0, len(p.syntax))
	for _, s := range p.syntax {
		if s == f.AST {
			s = mf
		}
		files = append(files, s)
	}
	conf := types.Config{
		Importer: importerFunc(func(path string) (*types.Package, error) {
			if imp, ok := p.imports[path]; ok {
				return imp, nil
			}
			return nil, fmt.Errorf("%s is not imported by %s", path, p.Path)
		}),
		Error: func(error) {}, // collect nothing: the first error decides
	}
	_, err = conf.Check(p.Path, p.Fset, files, nil)
	return err
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
