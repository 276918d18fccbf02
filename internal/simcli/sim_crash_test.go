package simcli

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

// TestSimCrashAtExpectations: a crashed run judges its scenario's
// expectations as docs/semantics.md ("Expectations under a crash") reads
// them. f02 crashed twice mid-stream passes: the restarted request gets
// the reply it was getting and counts once. A crash that changed the story
// lists how, and sets aside the expectations the changed story misses; a
// crash that changed nothing sets none aside, so a wrong expectation fails
// the run as it does uncrashed.
func TestSimCrashAtExpectations(t *testing.T) {
	code, out, errb := runCLI(t, "sim", "../../scenarios/f02-cancel-reaches-descendants.yaml", "--crash-at", "3,7")
	if code != exitOK || !strings.Contains(out, "after step 3: main: request 2 is asked again after 2 chunk(s)") || strings.Contains(out, "changed ") {
		t.Fatalf("f02 --crash-at 3,7: exit %d\n%s%s", code, out, errb)
	}
	code, out, errb = runCLI(t, "sim", "../../scenarios/f02-cancel-reaches-descendants.yaml", "--crash-at", "3,7", "--json")
	if code != exitOK || !strings.Contains(out, `"main":1,`) || !strings.Contains(out, `"crashes":[{"after":3,"at":"220ms","changed":["main: request 2`) {
		t.Fatalf("f02 --crash-at 3,7 --json: exit %d\n%s%s", code, out, errb)
	}

	dir := t.TempDir()
	world := filepath.Join(dir, "w.yaml")
	for _, c := range []struct {
		limits, want string
		code         int
		out          []string
	}{
		// After step 1 the first request had shown nothing: asked again at
		// once, the run is the uncrashed one, and a wrong expectation fails.
		{"{}", "3", exitCheckFailed, []string{"after step 1: the recovery changed nothing; every expectation judged", "expect", "llm_requests.main: 2, want 3"}},
		{"{}", "2", exitOK, []string{"after step 1: the recovery changed nothing"}},
		// With max_requests 2 the restart spends the budget sooner: the turn
		// ends after one request as asked, and the expectation of two is
		// set aside, named with the change.
		{"{max_requests: 2}", "2", exitOK, []string{"after step 1: main: turn 1 ran out of max_requests with 1 request(s) asked again", "llm_requests.main: 1, want 2 (not judged: a crash changed the story)"}},
	} {
		src := "name: crash-story\nlimits: " + c.limits + "\nagents:\n  main:\n    - calls: [{tool: t, args: {n: 1}}]\n    - calls: [{tool: t, args: {n: 2}}]\n    - text: done\n" +
			"tools:\n  t: {duration: 1s, result: r}\ninputs:\n  - {at: 0s, submit: go}\nexpect:\n  llm_requests: {main: " + c.want + "}\n"
		if c.limits == "{}" {
			src = strings.Replace(src, "    - calls: [{tool: t, args: {n: 2}}]\n", "", 1)
		}
		if err := os.WriteFile(world, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errb := runCLI(t, "sim", world, "--crash-at", "1")
		ok := code == c.code
		for _, want := range c.out {
			ok = ok && strings.Contains(out, want)
		}
		if !ok {
			t.Errorf("limits %s, want %s requests: exit %d, want %d with %q\n%s%s", c.limits, c.want, code, c.code, c.out, out, errb)
		}
	}
}
