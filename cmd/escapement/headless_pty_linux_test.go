//go:build linux

package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/fakeopenai"
)

// terminalQueries are what a program writes to ask a terminal about
// itself and then waits for: its foreground and background colours (OSC 10
// and 11) and the cursor's position (DSR 6).
var terminalQueries = []string{"\x1b]10;?", "\x1b]11;?", "\x1b[6n"}

// TestNoTerminalQueries: on a pseudo-terminal that never answers (script,
// a CI runner's, an editor's), the binary asks the terminal nothing — no
// colour query, no cursor position report — so it has nothing to wait
// for: `script -qfc "escapement fsm" /dev/null` took 10 s while the
// logger's colour detection waited for an answer. The check is on the
// bytes the terminal got (deterministic); the 5 s bound, half the stall
// and far above the command's real time, only stops a stalled run.
func TestNoTerminalQueries(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("hello there", 4) })
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"fsm"},
		{"--log-level", "debug", "run", "hi", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir},
	} {
		tty := openPTY(t)
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = binEnv(dir, "TERM=xterm-256color", "COLORTERM=truecolor", "OPENAI_BASE_URL="+srv.BaseURL())
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty.slave, tty.slave, tty.slave
		// The terminal is its controlling terminal, its process group in
		// the foreground, as a shell's command's is (a program asks only
		// a terminal it is in the foreground of).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%v: %v", args, err)
			}
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Errorf("%v: still running 5s later on a terminal that does not answer", args)
		}
		out := tty.output(t)
		for _, q := range terminalQueries {
			if strings.Contains(out, q) {
				t.Errorf("%v asked the terminal %q:\n%q", args, q, out)
			}
		}
		if len(args) > 1 && (!strings.Contains(out, "DEBU") || !strings.Contains(out, "continue this session")) {
			t.Errorf("%v: the debug log or the run's end is missing:\n%q", args, out)
		}
	}
}
