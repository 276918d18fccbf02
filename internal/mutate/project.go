package mutate

import (
	"path"
	"strconv"
)

// This file holds what is particular to escapement: which layers judge
// which packages, and which functions are printers.

// SimGoldenSkip is the `go test -skip` pattern of the tests under ./sim/...
// that compare recorded golden bytes (a trace hash, an expected printout)
// instead of checking behaviour: a mutant that changes such bytes is not
// caught by the oracle, so those tests must not count for the simulator
// layer. Today there are none there — every hash comparison under sim/
// compares two runs of the same build, which is the determinism invariant
// I6 — and TestSimGoldenTestsSkipped keeps this pattern in step with
// sim/'s tests. (The golden tests elsewhere, kernel/trace's
// TestWriterGolden and cmd/escapement's TestSimTable, are not in the
// simulator layer: the first is a unit test, the second not run at all for
// kernel mutants.)
const SimGoldenSkip = ""

// oracleDirs are the directories whose mutants are judged by the simulator
// layers and the unit tests separately.
var oracleDirs = []string{"kernel", "fsm"}

// SweepPlan is the sweep of the simulator layer.
type SweepPlan struct {
	Seeds, Depth int
}

// DefaultSweep is a 3,000-world sweep at depth 6 (about a second here).
var DefaultSweep = SweepPlan{Seeds: 3000, Depth: 6}

// ProjectProfiles returns the profile chooser for escapement.
//
//   - kernel/ and fsm/ (the "oracle" profile): the simulator layers — the
//     sim packages' tests (`go test ./sim/...`), the embedded scenario suite
//     (`escapement sim`) and a sweep (`escapement sim sweep`), with the
//     escapement binary built once per mutant — and, separately, the unit
//     tests (`go test ./kernel/... ./fsm/...`).
//   - every other package (the "package" profile): its own tests; for an
//     adapters/ package also cmd/escapement's, whose tests drive the
//     adapters through the CLI.
func ProjectProfiles(sweep SweepPlan) func(*Mutant) Profile {
	return func(m *Mutant) Profile {
		for _, d := range oracleDirs {
			if under(m.Dir, d) {
				return OracleProfile(sweep)
			}
		}
		return PackageProfile(m.Dir)
	}
}

// OracleProfile is the profile of kernel/ and fsm/ mutants.
func OracleProfile(sweep SweepPlan) Profile {
	simTest := []string{"./sim/..."}
	if SimGoldenSkip != "" {
		simTest = append([]string{"-skip", SimGoldenSkip}, simTest...)
	}
	return Profile{
		Name:   "oracle",
		Title:  "kernel/ and fsm/: the simulator layers versus the unit tests",
		Groups: []string{"sim", "unit"},
		Binary: "./cmd/escapement",
		Layers: []Layer{
			{Name: "sim-test", Group: "sim", GoTest: simTest},
			{Name: "sim-scenarios", Group: "sim", Exec: []string{"{bin}", "sim"}},
			{Name: "sim-sweep", Group: "sim", Exec: []string{"{bin}", "sim", "sweep",
				"--seeds", strconv.Itoa(sweep.Seeds), "--depth", strconv.Itoa(sweep.Depth),
				"--jobs", "{cpus}", "--out", "{tmp}/sweep-failures"}},
			{Name: "unit", Group: "unit", GoTest: []string{"./kernel/...", "./fsm/..."}},
		},
	}
}

// PackageProfile is the profile of a mutant in dir outside kernel/ and fsm/.
func PackageProfile(dir string) Profile {
	pkgs := []string{"./" + dir}
	if under(dir, "adapters") {
		pkgs = append(pkgs, "./cmd/escapement")
	}
	return Profile{
		Name:   "package",
		Title:  "adapters/, cmd/ and other packages: each package's tests",
		Groups: []string{"tests"},
		Layers: []Layer{{Name: "tests", Group: "tests", GoTest: pkgs}},
	}
}

// ProjectExclusions are escapement's printers: functions whose output is
// text for people and that no kernel decision reads.
func ProjectExclusions() Exclusions {
	return Exclusions{Funcs: map[string]string{
		"fsm.renderMermaid": "draws the README's diagram (checked against the README by cmd/escapement's tests)",
		"fsm.renderDOT":     "draws the table as Graphviz for `escapement fsm --format dot`",
		"fsm.renderTable":   "prints the table for `escapement fsm --format table`",
	}}
}

func under(dir, top string) bool {
	for d := dir; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		if d == top {
			return true
		}
	}
	return false
}
