package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimCrashAt: `escapement sim FILE --crash-at K --idempotent T`
// reproduces a crashed run of the crash property (docs/durable.md): the
// host crashes after step K and recovers from its log, the trace records
// it and replays byte for byte; a bad --crash-at is a usage error naming
// the flag.
func TestSimCrashAt(t *testing.T) {
	dir := t.TempDir()
	world := filepath.Join(dir, "w.yaml")
	src := "name: crash-demo\nagents:\n  main:\n    - calls: [{tool: slow, args: {n: 1}}]\n    - {text: done}\n" +
		"tools:\n  slow: {duration: 2s, result: slow result}\ninputs:\n  - {at: 0s, submit: go}\n"
	if err := os.WriteFile(world, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		idempotent string
		want       string
	}{{"", `"status":"lost"`}, {"slow", `"kind":"start_tool"`}} {
		tr := filepath.Join(dir, "t"+c.idempotent+".jsonl")
		args := []string{"sim", world, "--crash-at", "5", "--trace", tr}
		if c.idempotent != "" {
			args = append(args, "--idempotent", c.idempotent)
		}
		if code, out, errb := runCLI(t, args...); code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errb)
		}
		data, err := os.ReadFile(tr)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		at := -1
		for i, l := range lines {
			if strings.Contains(l, `"kind":"recover"`) {
				at = i
			}
		}
		if at < 0 || !strings.Contains(lines[at-1], "rebuilt from its 5 logged step(s)") || !strings.Contains(lines[at], c.want) {
			t.Fatalf("idempotent %q: no recovery after step 5 that answers %s:\n%s", c.idempotent, c.want, data)
		}
		if code, out, errb := runCLI(t, "sim", "replay", tr); code != exitOK || !strings.Contains(out, "reproduced") {
			t.Fatalf("replay: exit %d\n%s%s", code, out, errb)
		}
	}
	if code, _, errb := runCLI(t, "sim", world, "--crash-at", "4,2"); code != exitUsage || !strings.Contains(errb, "--crash-at") {
		t.Fatalf("a descending --crash-at: exit %d, stderr %s", code, errb)
	}
}
