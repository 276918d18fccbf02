package mutate

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Package is a type-checked package whose files can be mutated.
type Package struct {
	Path  string // import path
	Dir   string // relative to the module root, forward slashes ("." for the root)
	Fset  *token.FileSet
	Files []*File
	Info  *types.Info
	// syntax is every file the compiler builds (generated ones included)
	// and imports the packages they import, for type-checking a mutant.
	syntax  []*ast.File
	imports map[string]*types.Package
}

// File is one non-test, non-generated source file of a Package.
type File struct {
	Rel string // relative to the module root, forward slashes
	Abs string
	Src []byte
	AST *ast.File
}

// Load type-checks the packages matching patterns in the module at root.
// Only the files the current platform builds are loaded (a file excluded by
// a build constraint never reaches a test, so its mutants could only
// survive); test files and generated files (the "// Code generated ... DO
// NOT EDIT." header) are left out.
func Load(root string, patterns ...string) ([]*Package, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedCompiledGoFiles |
			packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo,
		Dir: abs,
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("load %v: %w", patterns, err)
	}
	var out []*Package
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("package %s: %v", p.PkgPath, p.Errors[0])
		}
		if len(p.Syntax) == 0 {
			continue
		}
		pkg := &Package{Path: p.PkgPath, Fset: p.Fset, Info: p.TypesInfo, syntax: p.Syntax, imports: map[string]*types.Package{}}
		for _, imp := range p.Types.Imports() {
			pkg.imports[imp.Path()] = imp
		}
		for _, f := range p.Syntax {
			name := p.Fset.File(f.Pos()).Name()
			if strings.HasSuffix(name, "_test.go") || ast.IsGenerated(f) {
				continue
			}
			rel, err := filepath.Rel(abs, name)
			if err != nil || strings.HasPrefix(rel, "..") {
				return nil, fmt.Errorf("%s is outside the module at %s", name, abs)
			}
			src, err := os.ReadFile(name)
			if err != nil {
				return nil, err
			}
			pkg.Files = append(pkg.Files, &File{Rel: filepath.ToSlash(rel), Abs: name, Src: src, AST: f})
			pkg.Dir = filepath.ToSlash(filepath.Dir(rel))
		}
		if len(pkg.Files) > 0 {
			slices.SortFunc(pkg.Files, func(a, b *File) int { return strings.Compare(a.Rel, b.Rel) })
			out = append(out, pkg)
		}
	}
	slices.SortFunc(out, func(a, b *Package) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// Exclusions says what the generator leaves alone, and why. The zero value
// excludes nothing beyond the fixed rules (see Generate).
type Exclusions struct {
	// Funcs are functions whose bodies are not mutated, keyed by
	// "pkgname.Func" or "pkgname.Type.Method", each with its reason.
	Funcs map[string]string
}

// Generate returns every mutant of the package's files, in source order
// (file, offset, operator). It is deterministic: the same source gives the
// same mutants with the same IDs.
//
// Fixed exclusions, none of which hides a decision the code makes:
//   - String, GoString, Describe and Error methods: printers of values for
//     people (logs, panics, error text), not behaviour;
//   - the arguments of panic, fmt.Errorf, fmt.Sprintf and errors.New: the
//     text of a message (the condition that decides to panic or to fail is
//     still mutated, and so is the call that reports the error);
//   - calls into log, log/slog and charmbracelet/log, and their arguments:
//     log lines;
//   - const declarations: compile-time constants, not logic;
//   - removing a panic call: an assertion that never fires in a correct run.
//
// The mutants of the operators that replace an expression by a part of it
// (typeChecked) are type-checked and kept only when they compile: dropping
// an operand can leave a variable unused.
func Generate(p *Package, ex Exclusions) []*Mutant {
	var out []*Mutant
	for _, f := range p.Files {
		g := &generator{pkg: p, file: f, ex: ex, tf: p.Fset.File(f.AST.Pos())}
		for _, d := range f.AST.Decls {
			g.decl(d)
		}
		for _, m := range g.out {
			if !typeChecked[m.Op] || p.compiles(f, m) {
				out = append(out, m)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *Mutant) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.edits[0].Start, b.edits[0].Start),
			cmp.Compare(slices.Index(Operators(), a.Op), slices.Index(Operators(), b.Op)))
	})
	return slices.CompactFunc(out, func(a, b *Mutant) bool { return a.ID() == b.ID() })
}

type generator struct {
	pkg  *Package
	file *File
	ex   Exclusions
	tf   *token.File
	fn   string
	// fnType is the signature of the declared function being walked.
	fnType *ast.FuncType
	out    []*Mutant
	// stack holds the nodes from the declaration down to the current one.
	stack []ast.Node
}

func (g *generator) off(p token.Pos) int { return g.tf.Offset(p) }

func (g *generator) add(op Operator, at token.Pos, edits ...edit) {
	src := g.file.Src
	pos := g.tf.Position(at)
	after := lineAt(applyEdits(src, edits), edits[0].Start)
	m := &Mutant{
		File: g.file.Rel, Abs: g.file.Abs, Pkg: g.pkg.Path, Dir: g.pkg.Dir,
		Line: pos.Line, Col: pos.Column, Op: op,
		Before: lineAt(src, g.off(at)), After: after,
		SrcSHA256: sha256Hex(src), edits: edits, original: src, funcName: g.fn,
	}
	g.out = append(g.out, m)
}

// replace adds a mutant that replaces the n bytes at pos with text.
func (g *generator) replace(op Operator, pos token.Pos, n int, text string) {
	o := g.off(pos)
	g.add(op, pos, edit{o, o + n, text})
}

// remove adds a mutant that disables statement s. It is wrapped in
// `if false { ... }` rather than cut, so every name it uses stays used and
// the mutant compiles whenever dropping the statement would.
func (g *generator) remove(op Operator, s ast.Stmt) {
	start, end := g.off(s.Pos()), g.off(s.End())
	m := edit{start, end, "if false { " + string(g.file.Src[start:end]) + " }"}
	g.add(op, s.Pos(), m)
	g.out[len(g.out)-1].After = "(removed)"
}

func (g *generator) decl(d ast.Decl) {
	switch d := d.(type) {
	case *ast.GenDecl:
		if d.Tok == token.CONST || d.Tok == token.IMPORT {
			return
		}
		g.fn, g.fnType = "", nil
		g.walk(d)
	case *ast.FuncDecl:
		if d.Body == nil {
			return
		}
		name := d.Name.Name
		if d.Recv != nil && len(d.Recv.List) == 1 {
			recv := d.Recv.List[0].Type
			if s, ok := recv.(*ast.StarExpr); ok {
				recv = s.X
			}
			if ix, ok := recv.(*ast.IndexExpr); ok {
				recv = ix.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
			if printerMethod(d) {
				return
			}
		}
		if _, skip := g.ex.Funcs[g.pkgName()+"."+name]; skip {
			return
		}
		g.fn, g.fnType = name, d.Type
		g.walk(d.Body)
	}
}

func (g *generator) pkgName() string { return g.file.AST.Name.Name }

// printerMethod reports a String, GoString, Describe or Error method that
// returns one string.
func printerMethod(d *ast.FuncDecl) bool {
	switch d.Name.Name {
	case "String", "GoString", "Describe", "Error":
	default:
		return false
	}
	res := d.Type.Results
	if res == nil || len(res.List) != 1 || len(res.List[0].Names) > 1 {
		return false
	}
	id, ok := res.List[0].Type.(*ast.Ident)
	return ok && id.Name == "string"
}

func (g *generator) walk(root ast.Node) {
	ast.Inspect(root, func(n ast.Node) bool {
		if n == nil {
			g.stack = g.stack[:len(g.stack)-1]
			return true
		}
		if !g.visit(n) {
			return false
		}
		g.stack = append(g.stack, n)
		return true
	})
}

// visit adds the mutants of node n and reports whether to descend into it.
func (g *generator) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.GenDecl:
		return n.Tok != token.CONST
	case *ast.FuncLit:
		return true
	case *ast.CallExpr:
		g.sprintfNote(n)
		if g.messageOrLog(n) {
			return false
		}
		g.callEdge(n)
	case *ast.BinaryExpr:
		g.binary(n)
		g.dropCond(n)
		g.dropSuffix(n)
	case *ast.IfStmt:
		g.skipErrCheck(n)
	case *ast.CaseClause:
		g.dropCase(n)
	case *ast.SliceExpr:
		g.sliceBound(n)
	case *ast.UnaryExpr:
		if n.Op == token.NOT {
			g.replace(RemoveNot, n.OpPos, 1, "")
		}
	case *ast.Ident:
		if n.Name == "true" || n.Name == "false" {
			if obj := g.pkg.Info.Uses[n]; obj != nil && obj == types.Universe.Lookup(n.Name) {
				flip := map[string]string{"true": "false", "false": "true"}[n.Name]
				g.replace(FlipBool, n.Pos(), len(n.Name), flip)
			}
		}
	case *ast.IncDecStmt:
		g.replace(IncDec, n.TokPos, 2, map[token.Token]string{token.INC: "--", token.DEC: "++"}[n.Tok])
	case *ast.AssignStmt:
		g.assign(n)
		g.ignoreError(n)
	case *ast.ExprStmt:
		if call, ok := ast.Unparen(n.X).(*ast.CallExpr); ok && g.removable(n) && !g.isBuiltin(call, "panic") && !g.messageOrLog(call) {
			g.remove(RemoveCall, n)
		}
	case *ast.ReturnStmt:
		if g.removable(n) && g.inIfBody() {
			g.remove(RemoveReturn, n)
		}
		g.returnBool(n)
	case *ast.BranchStmt:
		if (n.Tok == token.CONTINUE || n.Tok == token.BREAK) && g.removable(n) && !g.trailingSwitchBreak(n) {
			g.remove(RemoveLoopCtl, n)
		}
	}
	return true
}

var swaps = map[token.Token]struct {
	op Operator
	to token.Token
}{
	token.LSS: {CondBoundary, token.LEQ}, token.LEQ: {CondBoundary, token.LSS},
	token.GTR: {CondBoundary, token.GEQ}, token.GEQ: {CondBoundary, token.GTR},
	token.EQL: {NegateCond, token.NEQ}, token.NEQ: {NegateCond, token.EQL},
	token.LAND: {BoolOp, token.LOR}, token.LOR: {BoolOp, token.LAND},
	token.ADD: {Arith, token.SUB}, token.SUB: {Arith, token.ADD},
}

// maxOffByOne bounds the literals OffByOne touches: small counts and
// indexes, where an off-by-one is a plausible slip.
const maxOffByOne = 16

func (g *generator) binary(n *ast.BinaryExpr) {
	if s, ok := swaps[n.Op]; ok {
		if s.op != Arith || g.numeric(n) {
			g.replace(s.op, n.OpPos, len(n.Op.String()), s.to.String())
		}
	}
	switch n.Op {
	case token.LSS, token.LEQ, token.GTR, token.GEQ, token.EQL, token.NEQ:
		for _, side := range []ast.Expr{n.X, n.Y} {
			lit, ok := ast.Unparen(side).(*ast.BasicLit)
			if !ok || lit.Kind != token.INT {
				continue
			}
			v, err := strconv.ParseInt(lit.Value, 0, 64)
			if err != nil || v < 0 || v > maxOffByOne {
				continue
			}
			g.replace(OffByOne, lit.Pos(), len(lit.Value), strconv.FormatInt(v+1, 10))
		}
	}
}

func (g *generator) numeric(e ast.Expr) bool {
	t := g.pkg.Info.TypeOf(e)
	if t == nil {
		return false
	}
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsNumeric != 0
}

func (g *generator) assign(n *ast.AssignStmt) {
	switch n.Tok {
	case token.DEFINE:
		return
	case token.ADD_ASSIGN, token.SUB_ASSIGN:
		if len(n.Lhs) == 1 && g.numeric(n.Lhs[0]) {
			to := map[token.Token]string{token.ADD_ASSIGN: "-=", token.SUB_ASSIGN: "+="}[n.Tok]
			g.replace(Arith, n.TokPos, 2, to)
		}
	}
	if !g.removable(n) {
		return
	}
	blank := true
	for _, l := range n.Lhs {
		if id, ok := l.(*ast.Ident); !ok || id.Name != "_" {
			blank = false
		}
	}
	if blank {
		// `_ = x.Close()`: a call whose result is dropped on purpose; the
		// call itself can still be forgotten.
		if call, ok := ast.Unparen(n.Rhs[0]).(*ast.CallExpr); ok && len(n.Rhs) == 1 && !g.messageOrLog(call) {
			g.remove(RemoveCall, n)
		}
		return
	}
	if len(n.Rhs) == 1 {
		if call, ok := ast.Unparen(n.Rhs[0]).(*ast.CallExpr); ok && g.isBuiltin(call, "append") {
			g.remove(RemoveAppend, n)
			return
		}
	}
	g.remove(RemoveAssign, n)
}

// removable reports a statement that sits directly in a statement list (a
// block or a case body), not in a for/if/switch header.
func (g *generator) removable(s ast.Stmt) bool {
	if len(g.stack) == 0 {
		return false
	}
	var list []ast.Stmt
	switch p := g.stack[len(g.stack)-1].(type) {
	case *ast.BlockStmt:
		list = p.List
	case *ast.CaseClause:
		list = p.Body
	case *ast.CommClause:
		list = p.Body
	case *ast.LabeledStmt:
		return false
	}
	return slices.Contains(list, s)
}

// inIfBody reports whether the current statement's block is an if's body
// (or its else block).
func (g *generator) inIfBody() bool {
	if len(g.stack) < 2 {
		return false
	}
	blk, ok := g.stack[len(g.stack)-1].(*ast.BlockStmt)
	if !ok {
		return false
	}
	ifs, ok := g.stack[len(g.stack)-2].(*ast.IfStmt)
	return ok && (ifs.Body == blk || ifs.Else == blk)
}

// trailingSwitchBreak reports an unlabeled break that ends a switch or
// select case: dropping it changes nothing (the case ends there anyway).
func (g *generator) trailingSwitchBreak(b *ast.BranchStmt) bool {
	if b.Tok != token.BREAK || b.Label != nil || len(g.stack) == 0 {
		return false
	}
	var body []ast.Stmt
	switch c := g.stack[len(g.stack)-1].(type) {
	case *ast.CaseClause:
		body = c.Body
	case *ast.CommClause:
		body = c.Body
	default:
		return false
	}
	return len(body) > 0 && body[len(body)-1] == b
}

func (g *generator) isBuiltin(call *ast.CallExpr, name string) bool {
	id, ok := ast.Unparen(call.Fun).(*ast.Ident)
	if !ok || id.Name != name {
		return false
	}
	_, builtin := g.pkg.Info.Uses[id].(*types.Builtin)
	return builtin
}

// messageOrLog reports a call that only makes message text (panic,
// fmt.Errorf, fmt.Sprintf, errors.New) or writes a log line.
func (g *generator) messageOrLog(call *ast.CallExpr) bool {
	if g.isBuiltin(call, "panic") {
		return true
	}
	var obj types.Object
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		obj = g.pkg.Info.Uses[f.Sel]
	case *ast.Ident:
		obj = g.pkg.Info.Uses[f]
	}
	fn, ok := obj.(*types.Func)
	if !ok || fn.Pkg() == nil {
		return false
	}
	switch fn.Pkg().Path() {
	case "fmt":
		return fn.Name() == "Errorf" || fn.Name() == "Sprintf"
	case "errors":
		return fn.Name() == "New"
	case "log", "log/slog", "github.com/charmbracelet/log":
		return true
	}
	return false
}
