package tools

import (
	"testing"
)

// TestShellExit reads how a command ended from what the shell tool
// itself writes: exit 0, another status, a signal, and a result that
// does not say (a cancelled command's).
func TestShellExit(t *testing.T) {
	b, _ := newBox(t, true)
	for cmd, want := range map[string]string{
		"echo hi":              "ok",
		"echo out; exit 3":     "exit 3",
		"kill -KILL $$":        "killed by signal killed",
		"sleep 5 & echo bg":    "ok",
		"echo 'exit status 9'": "ok",
	} {
		r := run(t, b, "shell", map[string]string{"command": cmd})
		if got := ShellExit(r.Content); got != want {
			t.Errorf("%q: ShellExit = %q, want %q\n%s", cmd, got, want, r.Content)
		}
	}
	if got := ShellExit("cancelled after 2s: SIGINT sent to the process group\n"); got != "" {
		t.Errorf("a cancelled command: %q", got)
	}
}
