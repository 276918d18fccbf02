package main

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim/scenario"
)

// wallTime matches the summary's wall clock, whatever its unit (36ms,
// 1.521s under the race detector, 1m2.5s).
var wallTime = regexp.MustCompile(`events in [0-9.hmsµn]+$`)

// TestSimTableGolden: `escapement sim` prints a readable per-scenario table of
// the embedded suite. Run with -update to rewrite the golden file; only
// commit the change if you understand what caused it.
func TestSimTableGolden(t *testing.T) {
	code, out, errb := runCLI(t, "sim")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	got := wallTime.ReplaceAllString(strings.TrimRight(out, "\n"), "events in (wall time)") + "\n"
	const golden = "testdata/sim_table.golden"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("sim table changed; run `go test ./cmd/escapement -update` if intended.\n got:\n%s\nwant:\n%s", got, want)
	}
}

func TestSimJSON(t *testing.T) {
	code, out, _ := runCLI(t, "sim", "--json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	n := 0
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %d not JSON: %v", n+1, err)
		}
		for _, k := range []string{"name", "passed", "violations", "outcomes", "llm_requests", "quiescent_at", "events", "trace_sha256"} {
			if _, ok := r[k]; !ok {
				t.Fatalf("line %d lacks %q: %s", n+1, k, sc.Text())
			}
		}
		if r["passed"] != true {
			t.Fatalf("%v failed", r["name"])
		}
		if _, ok := r["outcomes"].(map[string]any)["main"]; !ok {
			t.Fatalf("outcomes lack main: %v", r["outcomes"])
		}
		n++
	}
	if want := suiteSize(t); n != want {
		t.Fatalf("%d scenarios, the suite has %d", n, want)
	}
}

// suiteSize is how many scenarios the embedded suite holds.
func suiteSize(t *testing.T) int {
	t.Helper()
	files, err := fs.Glob(scenarios.FS, "*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded suite: %d files, %v", len(files), err)
	}
	return len(files)
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSimExitCodes(t *testing.T) {
	dir := t.TempDir()
	failing := writeFile(t, dir, "failing.yaml", "name: wrong-expectation\nagents:\n  main:\n    - text: hello\ninputs:\n  - {at: 0s, submit: hi}\nexpect:\n  outcomes: {main: interrupted}\n")
	code, out, _ := runCLI(t, "sim", failing)
	if code != exitCheckFailed || !strings.Contains(out, "FAIL") || !strings.Contains(out, "outcomes.main: completed, want interrupted") {
		t.Fatalf("failing expectation: exit %d\n%s", code, out)
	}
	bad := writeFile(t, dir, "bad.yaml", "name: bad\nagents:\n  main:\n    - calls: [{delegate: ghost, prompt: x}]\n")
	code, _, errb := runCLI(t, "sim", bad)
	if code != exitUsage || !strings.Contains(errb, "bad.yaml:4:") || !strings.Contains(errb, `unknown script "ghost"`) {
		t.Fatalf("bad file: exit %d stderr %q", code, errb)
	}
	code, _, errb = runCLI(t, "sim", filepath.Join(dir, "missing.yaml"))
	if code != exitUsage || !strings.Contains(errb, "missing.yaml") {
		t.Fatalf("missing file: exit %d stderr %q", code, errb)
	}
}

func TestSimTraceReplayPerfetto(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "run.jsonl")
	pf := filepath.Join(dir, "run.json")
	code, _, errb := runCLI(t, "sim", "../../scenarios/f02-cancel-reaches-descendants.yaml", "--trace", tr, "--perfetto", pf)
	if code != exitOK {
		t.Fatalf("exit %d %s", code, errb)
	}
	var doc map[string]any
	raw, _ := os.ReadFile(pf)
	if err := json.Unmarshal(raw, &doc); err != nil || doc["traceEvents"] == nil {
		t.Fatalf("perfetto file: %v", err)
	}
	code, out, _ := runCLI(t, "sim", "replay", tr)
	if code != exitOK || !strings.Contains(out, "reproduced") {
		t.Fatalf("replay: exit %d %s", code, out)
	}
	data, _ := os.ReadFile(tr)
	altered := strings.Replace(string(data), `"text":"The "`, `"text":"A "`, 1)
	if altered == string(data) {
		t.Fatal("nothing to alter")
	}
	bad := writeFile(t, dir, "altered.jsonl", altered)
	code, out, _ = runCLI(t, "sim", "replay", bad)
	if code != exitCheckFailed || !strings.Contains(out, "differs at line") || !strings.Contains(out, `"text":"A "`) {
		t.Fatalf("altered replay: exit %d %s", code, out)
	}
	code, _, errb = runCLI(t, "sim", "replay", writeFile(t, dir, "junk.jsonl", "junk\n"))
	if code != exitUsage || errb == "" {
		t.Fatalf("junk replay: exit %d", code)
	}
	// Several scenarios: --trace names a directory.
	tdir := filepath.Join(dir, "traces")
	if code, _, _ := runCLI(t, "sim", "--trace", tdir); code != exitOK {
		t.Fatal("suite with trace dir failed")
	}
	if files, _ := filepath.Glob(filepath.Join(tdir, "*.jsonl")); len(files) != suiteSize(t) {
		t.Fatalf("%d trace files, the suite has %d scenarios", len(files), suiteSize(t))
	}
}

// TestSimRefusesNonRegularFiles: `escapement sim /dev/zero` and `sim
// replay /dev/zero` are refused at once (they used to read until memory
// ran out), so is a FIFO named like a scenario (given directly or found in
// a directory: it used to hang the open forever), and a file past the
// size limit; each exits 2 naming the file.
func TestSimRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifoDir := filepath.Join(dir, "suite")
	if err := os.Mkdir(fifoDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fifoDir, "a.yaml", "name: a\nagents:\n  main:\n    - text: hello\ninputs:\n  - {at: 0s, submit: hi}\n")
	fifo := filepath.Join(fifoDir, "b.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	big := writeFile(t, dir, "big.yaml", "name: big\n#"+strings.Repeat("x", scenario.MaxScenarioBytes)+"\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "/dev/zero"}, "/dev/zero: not a regular file (a character device)"},
		{[]string{"sim", "replay", "/dev/zero"}, "/dev/zero: not a regular file (a character device)"},
		{[]string{"sim", fifo}, fifo + ": not a regular file (a FIFO)"},
		{[]string{"sim", fifoDir}, fifo + ": not a regular file (a FIFO)"},
		{[]string{"sim", "replay", fifo}, fifo + ": not a regular file (a FIFO)"},
		{[]string{"sim", big}, big + ": file too large"},
	} {
		code, _, errb := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 with %q", tc.args, code, errb, tc.want)
		}
	}
}

// TestSimDuplicateNamesAcrossPaths: two files given apart with one name
// are refused at the second file's name line.
func TestSimDuplicateNamesAcrossPaths(t *testing.T) {
	dir := t.TempDir()
	const body = "agents:\n  main:\n    - text: hello\ninputs:\n  - {at: 0s, submit: hi}\n"
	a := writeFile(t, dir, "a.yaml", "name: same\n"+body)
	b := writeFile(t, dir, "b.yaml", "# a comment\nname: same\n"+body)
	code, _, errb := runCLI(t, "sim", a, b)
	if code != exitUsage || !strings.Contains(errb, b+":2:7: name: \"same\" is already used by "+a) {
		t.Fatalf("exit %d, stderr %q", code, errb)
	}
}
