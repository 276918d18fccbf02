package simcli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bombYAML is a scenario of under a kilobyte that, with its limits raised
// to their ceilings, fans out sixteen ways eight deep.
const bombYAML = `name: bomb
limits: {max_depth: 8, max_children: 16, max_calls: 16, max_agents: 4194304, max_parallel_requests: 4194304}
agents:
  main:
    - calls: &fan [{delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go},
        {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go},
        {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go},
        {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go}, {delegate: h, prompt: go}]
  h:
    - calls: *fan
inputs:
  - {at: 0s, submit: boom}
`

// TestSimBudgetExitsTwo: a small scenario that asks for a huge tree, run
// or replayed from a trace's header, stops at the memory budget with exit 2
// and a message that says so and what the run held.
func TestSimBudgetExitsTwo(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bomb.yaml")
	if err := os.WriteFile(file, []byte(bombYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "sim", file, "--memory-budget", "8")
	if code != exitUsage || !strings.Contains(stderr, "memory budget") || !strings.Contains(stderr, "scenario bomb") {
		t.Fatalf("sim: exit %d, stderr %q; want exit 2 naming the budget", code, stderr)
	}
	// The same scenario in a trace's header: record it with its fan-out
	// cut short by a limit, then edit the limit back out of the header.
	small := strings.Replace(bombYAML, "max_agents: 4194304", "max_agents: 4", 1)
	if err := os.WriteFile(file, []byte(small), 0o600); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(dir, "trace.jsonl")
	if code, _, stderr := runCLI(t, "sim", file, "--trace", tr); code != exitOK {
		t.Fatalf("recording: exit %d %s", code, stderr)
	}
	data, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `max_agents: 4\n`, `max_agents: 4194304\n`, 1)
	if edited == string(data) {
		t.Fatal("the trace header does not embed the scenario's limits")
	}
	if err := os.WriteFile(tr, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "sim", "replay", tr, "--memory-budget", "8")
	if code != exitUsage || !strings.Contains(stderr, "memory budget") {
		t.Fatalf("replay: exit %d, stderr %q; want exit 2 naming the budget", code, stderr)
	}
	for _, bad := range []string{"0", "-3"} {
		if code, _, stderr := runCLI(t, "sim", file, "--memory-budget", bad); code != exitUsage || !strings.Contains(stderr, "--memory-budget") {
			t.Errorf("--memory-budget %s: exit %d %q", bad, code, stderr)
		}
	}
}

// TestSweepRefusesSeedOverflow: --from and --seeds whose last seed would
// pass the largest int are refused (exit 2), not wrapped to negative seeds.
func TestSweepRefusesSeedOverflow(t *testing.T) {
	code, _, stderr := runCLI(t, "sim", "sweep", "--from", "9223372036854775800", "--seeds", "10", "--jobs", "1")
	if code != exitUsage || !strings.Contains(stderr, "largest seed") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming the overflow", code, stderr)
	}
	if code, _, stderr := runCLI(t, "sim", "sweep", "--from", "9223372036854775800", "--seeds", "8", "--jobs", "1", "--out", t.TempDir()); code == exitUsage {
		t.Fatalf("the last seeds below the limit were refused: %s", stderr)
	}
}
