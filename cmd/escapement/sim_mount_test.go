package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestSimMounted: the simulator's commands (internal/simcli) run under the
// program's root as its own: a failed check exits 1, bad input 2 with the
// cause on stderr (redacted, and without the usage hint a mistyped command
// gets), a signal 130, and --log-level reaches them.
func TestSimMounted(t *testing.T) {
	const key = "sk-test-mounted-0123456789abcdef"
	t.Setenv("OPENAI_API_KEY", key)
	dir := t.TempDir()
	src, err := os.ReadFile("../../scenarios/cancel-single-child.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wrong := writeFile(t, dir, "wrong.yaml", strings.Replace(string(src), "slow: interrupted", "slow: completed", 1))
	if code, out, errb := runCLI(t, "sim", wrong); code != exitCheckFailed || !strings.Contains(out, "FAIL") {
		t.Errorf("a failed expectation: exit %d, want 1\n%s%s", code, out, errb)
	}
	missing := filepath.Join(dir, key, "x.yaml")
	code, _, errb := runCLI(t, "sim", missing)
	if code != exitUsage || !strings.Contains(errb, "escapement: ") || !strings.Contains(errb, "x.yaml") {
		t.Errorf("a missing file: exit %d, stderr %q; want 2 naming it", code, errb)
	}
	if strings.Contains(errb, key) || strings.Contains(errb, "--help") {
		t.Errorf("a missing file's message is not redacted, or carries the usage hint: %q", errb)
	}
	if code, _, errb := runCLI(t, "--log-level", "debug", "sim", "../../scenarios/cancel-single-child.yaml"); code != exitOK || !strings.Contains(errb, "scenario") || !strings.Contains(errb, "sha256=") {
		t.Errorf("--log-level debug: exit %d, stderr %q; want each scenario's debug line", code, errb)
	}
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGINT
	signals := func() (<-chan os.Signal, func()) { return sigs, func() {} }
	var out, eb bytes.Buffer
	exit := func(code int) { t.Errorf("hard exit %d in an in-process run", code) }
	code = runWith(context.Background(), []string{"sim", "sweep", "--seeds", "100000", "--jobs", "1", "--out", dir}, streams{in: strings.NewReader(""), out: &out, err: &eb}, exit, signals)
	if code != exitInterrupted || !strings.Contains(eb.String(), "interrupted") {
		t.Errorf("an interrupted sweep: exit %d, stderr %q; want 130", code, eb.String())
	}
}
