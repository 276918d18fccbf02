package mutate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Operator names one kind of planted bug. The names are stable: they appear
// in the JSON Lines records and in the equivalent-mutant allow-list.
type Operator string

// The operators. Each models a bug a person writes, not an arbitrary edit.
const (
	// CondBoundary swaps < with <= and > with >= (an off-by-one comparison).
	CondBoundary Operator = "cond-boundary"
	// NegateCond swaps == with != (a test turned around).
	NegateCond Operator = "negate-cond"
	// BoolOp swaps && with || (a condition joined the wrong way).
	BoolOp Operator = "bool-op"
	// RemoveNot drops a ! (a condition read the wrong way round).
	RemoveNot Operator = "remove-not"
	// Arith swaps + with - and += with -= on numbers (never on strings).
	Arith Operator = "arith"
	// IncDec swaps ++ with -- .
	IncDec Operator = "incdec"
	// OffByOne turns a small integer literal n in a comparison into n+1.
	OffByOne Operator = "off-by-one"
	// FlipBool swaps the literals true and false.
	FlipBool Operator = "flip-bool"
	// RemoveCall drops a call statement (k.emit(...), k.stopTimer(...),
	// delete(m, k), ...): a side effect forgotten.
	RemoveCall Operator = "remove-call"
	// RemoveAppend drops an assignment x = append(x, ...): an element lost.
	RemoveAppend Operator = "remove-append"
	// RemoveAssign drops any other plain or compound assignment (not a :=
	// declaration, not one to _): a state update forgotten.
	RemoveAssign Operator = "remove-assign"
	// RemoveReturn drops a return statement inside an if body: an early exit
	// forgotten, so the code below it runs too.
	RemoveReturn Operator = "remove-return"
	// RemoveLoopCtl drops a continue or a break: a loop that goes on (or a
	// case that stops) where it should not.
	RemoveLoopCtl Operator = "remove-loopctl"

	// The operators below plant the kinds of bug an independent review of
	// the live edge found that the ones above miss (generate_edge.go).

	// SkipCall replaces a side-effect call whose only result is an error
	// (Sync, Close, Truncate, Rename, …, a name holding "sync") with nil:
	// the fsync forgotten while the caller is told it worked.
	SkipCall Operator = "skip-call"
	// IgnoreError sets err to nil right after the call that returned it: the
	// call made, its error swallowed.
	IgnoreError Operator = "ignore-error"
	// SkipErrCheck makes `if err != nil { … }` never run: the error path
	// skipped (a lone return in it is remove-return's).
	SkipErrCheck Operator = "skip-err-check"
	// DropCase removes one value from a case list: a classification
	// narrowed (a status no longer retried, an event no longer synced).
	DropCase Operator = "drop-case"
	// SkipRedact replaces a redactor's call with its argument: a secret
	// passed on unredacted.
	SkipRedact Operator = "skip-redact"
	// IndexSwap swaps strings/bytes Index and LastIndex (and their Byte,
	// Any and Func forms): a text parsed from the wrong end.
	IndexSwap Operator = "index-swap"
	// SliceBound cuts a slice one element short at either end (s[lo+1:],
	// s[:hi-1]): an offset off by one.
	SliceBound Operator = "slice-bound"
	// DropCond keeps one side of a && or ||: a condition missing a part.
	DropCond Operator = "drop-cond"
	// ReturnBool negates what a function returning one bool returns: a
	// classifier turned around.
	ReturnBool Operator = "return-bool"
	// DropSuffix keeps the left side of a string + and the first argument
	// of fmt.Sprintf("%s…", s, …): a note such as "[truncated: …]" lost.
	DropSuffix Operator = "drop-suffix"
)

// Operators lists every operator in the order reports print them.
func Operators() []Operator {
	return []Operator{CondBoundary, NegateCond, BoolOp, RemoveNot, Arith, IncDec, OffByOne, FlipBool,
		RemoveCall, RemoveAppend, RemoveAssign, RemoveReturn, RemoveLoopCtl,
		SkipCall, IgnoreError, SkipErrCheck, DropCase, SkipRedact, IndexSwap, SliceBound, DropCond, ReturnBool, DropSuffix}
}

// ParseOperator checks an operator name (for flags and the allow-list).
func ParseOperator(s string) (Operator, error) {
	for _, op := range Operators() {
		if string(op) == s {
			return op, nil
		}
	}
	names := make([]string, 0, len(Operators()))
	for _, op := range Operators() {
		names = append(names, string(op))
	}
	return "", fmt.Errorf("unknown operator %q (known: %s)", s, strings.Join(names, ", "))
}

// edit replaces src[Start:End] with Text.
type edit struct {
	Start, End int
	Text       string
}

// Mutant is one planted bug: a set of byte edits to one source file.
type Mutant struct {
	// File is the path relative to the module root, with forward slashes.
	File string
	// Abs is the file's absolute path (the key of the build overlay).
	Abs string
	// Pkg is the import path of the file's package.
	Pkg string
	// Dir is the package's directory relative to the module root ("." for
	// the root), with forward slashes.
	Dir       string
	Line, Col int
	Op        Operator
	Before    string // the source line before (trimmed)
	After     string // the same line after ("(removed)" for a removed statement)
	SrcSHA256 string // of the original file: a resumed run skips only mutants of unchanged files
	edits     []edit
	original  []byte
	funcName  string
}

// ID names the mutant uniquely and stably while its file does not change:
// file:line:col:operator.
func (m *Mutant) ID() string { return fmt.Sprintf("%s:%d:%d:%s", m.File, m.Line, m.Col, m.Op) }

// Key identifies the mutant in its file's version (see Record.Key).
func (m *Mutant) Key() string { return m.ID() + "@" + m.SrcSHA256 }

// Diff is the one-line form of the change.
func (m *Mutant) Diff() string { return m.Before + "  →  " + m.After }

// Func is the name of the function the mutant is in ("" at package level).
func (m *Mutant) Func() string { return m.funcName }

// Source returns the mutated file.
func (m *Mutant) Source() []byte { return applyEdits(m.original, m.edits) }

func applyEdits(src []byte, edits []edit) []byte {
	es := slices.Clone(edits)
	slices.SortFunc(es, func(a, b edit) int { return b.Start - a.Start }) // back to front: offsets stay valid
	out := slices.Clone(src)
	for _, e := range es {
		out = slices.Concat(out[:e.Start], []byte(e.Text), out[e.End:])
	}
	return out
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// lineAt returns the trimmed text of the line holding offset off.
func lineAt(src []byte, off int) string {
	start := off
	for start > 0 && src[start-1] != '\n' {
		start--
	}
	end := off
	for end < len(src) && src[end] != '\n' {
		end++
	}
	return strings.TrimSpace(string(src[start:end]))
}
