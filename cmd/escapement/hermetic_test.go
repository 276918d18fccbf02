package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/config"
	"github.com/escapement/escapement/internal/fakeopenai"
)

// testSwitches are the ESCAPEMENT_ variables that steer the tests (COMMON
// to every developer's run), not the CLI: hermeticEnv keeps them.
var testSwitches = map[string]bool{"ESCAPEMENT_REQUIRE_MCP_E2E": true, requireJQ: true}

// hermeticEnv makes the test process's environment the tests' own before
// any test runs. An in-process run reads its configuration
// (adapters/config, docs/config.md) from $XDG_CONFIG_HOME, else
// ~/.config; every flag from its ESCAPEMENT_ variable; the model and the
// endpoint from OPENAI_MODEL and OPENAI_BASE_URL; the span export from
// OTEL_ variables (docs/otel.md); and writes a session without --session
// under $XDG_STATE_HOME. A developer's own settings would change what the
// tests run — or break them: a key in their config.yaml that this build
// does not know is refused at its line. So every such variable is
// cleared (but testSwitches), and the XDG directories point into dir. A
// test sets what it needs with t.Setenv; a binary it starts gets binEnv.
// It returns the environment as it was, for what must see it (go build
// reads its own configuration under $XDG_CONFIG_HOME).
func hermeticEnv(dir string) (was []string) {
	was = os.Environ()
	for _, kv := range was {
		name, _, _ := strings.Cut(kv, "=")
		if developers(name) {
			os.Unsetenv(name)
		}
	}
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	return was
}

// developers says variable name is one of the settings a developer's
// environment could hold for escapement.
func developers(name string) bool {
	switch {
	case testSwitches[name]:
		return false
	case strings.HasPrefix(name, config.EnvPrefix), strings.HasPrefix(name, "OTEL_"):
		return true
	}
	return name == "OPENAI_API_KEY" || name == "OPENAI_MODEL" || name == "OPENAI_BASE_URL"
}

// binEnv is the whole environment of a binary a test starts: PATH, and
// HOME and the XDG directories in dir — nothing of the developer's (no
// configuration file, no ESCAPEMENT_, OPENAI_ or OTEL_ variable) — then
// more (a later value of a variable wins).
func binEnv(dir string, more ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir,
		"XDG_CONFIG_HOME=" + filepath.Join(dir, ".config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state")}, more...)
}

// TestInProcessRunIsTheTests: an in-process run sees the tests' settings
// only: its configuration shows no file read and every setting at its
// default, and a run asks the loopback server for the default model.
// TestHermeticEnv runs it in a test process with a developer's settings.
func TestInProcessRunIsTheTests(t *testing.T) {
	code, out, errb := runCLI(t, "config", "show")
	if code != exitOK {
		t.Fatalf("config show: exit %d\n%s", code, errb)
	}
	userFile := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "escapement", "config.yaml")
	if !strings.Contains(out, userFile+" (not found)") {
		t.Errorf("config show reads another user file than the tests' %s:\n%s", userFile, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if (strings.Contains(line, " env ") || strings.Contains(line, " user ")) && !strings.Contains(line, "(not set)") { // the key's variable, unset
			t.Errorf("a setting from outside the tests: %s", line)
		}
	}
	srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("hi", 2) })
	dir := t.TempDir()
	code, _, errb = runCLI(t, "run", "hello", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
	if code != exitOK || len(srv.Requests()) != 1 || srv.Requests()[0].Body.Model != "gpt-4o-mini" {
		t.Errorf("run: exit %d, requests %d\n%s", code, len(srv.Requests()), errb)
	}
	if strings.Contains(strings.ToLower(errb), "otlp") || strings.Contains(errb, "span") {
		t.Errorf("the run exported spans:\n%s", errb)
	}
}

// TestHermeticEnv: the tests are the tests' whatever the developer has
// set. TestInProcessRunIsTheTests runs in a test process whose HOME holds
// a config.yaml with a key no build knows, and whose environment sets
// ESCAPEMENT_MAX_DEPTH to a word, ESCAPEMENT_MODEL and OPENAI_MODEL, and
// an OTLP endpoint nobody listens on — each of which would fail it — and
// it passes. (Without hermeticEnv in TestMain it fails: the file's key is
// refused at its line, exit 2.)
func TestHermeticEnv(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the test binary")
	}
	home := t.TempDir()
	putFile(t, filepath.Join(home, ".config", "escapement", "config.yaml"), "model: user-model\nno_such_key: 1\n")
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "XDG_CONFIG_HOME" && name != "XDG_STATE_HOME" && name != "HOME" {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInProcessRunIsTheTests$", "-test.count=1", "-test.v")
	cmd.Env = append(env, "HOME="+home, "ESCAPEMENT_MAX_DEPTH=deep", "ESCAPEMENT_MODEL=env-model", "OPENAI_MODEL=dev-model",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9", "OTEL_TRACES_EXPORTER=otlp")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestInProcessRunIsTheTests") {
		t.Errorf("with a developer's settings: %v\n%s", err, out)
	}
}
