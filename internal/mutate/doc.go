// Package mutate is escapement's mutation tester: it plants one small,
// realistic bug at a time in a package's non-test source (Generate: boundary
// and negated comparisons, swapped boolean and arithmetic operators, removed
// negations, off-by-one literals, flipped booleans, dropped calls,
// assignments, returns, continues and breaks; and the edge's kinds of bug:
// a side-effect call such as an fsync skipped, an error swallowed, an error
// path skipped, a case value dropped, a redactor bypassed, Index read as
// LastIndex, a slice bound off by one, a condition's last part dropped, a
// bool result negated, a note dropped from a text) and runs test layers against
// each mutant separately (Run), so a report can say which layer caught
// which bug — for the kernel, whether the simulator's oracle catches it
// without the kernel's unit tests (see docs/development.md, "Mutation testing").
//
// A mutant never touches the working tree: the mutated file is written to a
// scratch directory and reaches every build through `go build -overlay`.
// Mutants are deterministic (their ids are file:line:col:operator); a run
// appends one JSON line per mutant and skips mutants already recorded, so
// it can be stopped and continued.
//
// The maintained Go mutation tools (go-gremlins/gremlins, gtramontina/ooze,
// avito-tech/go-mutesting) run one test command per mutant with a pass/fail
// verdict, and the latter two write mutants into the tree or a copy of it;
// none can tell which of several layers killed a mutant, which is the
// question here.
package mutate
