//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/fakeopenai"
)

// TestApprovalTerminalPromptE2E: chat on a terminal shows each request —
// the agent's path, the tool, its arguments — and reads the answer as the
// next line (docs/live.md, "Approvals"): Ctrl-C while it waits cancels the
// turn (withdrawn: the model is not told it was denied); `n NOTE` denies
// with a note the model reads; `a` approves and grants the tool for the
// session, so the next turn's call runs without asking.
func TestApprovalTerminalPromptE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("done.", 2)
			return
		}
		args, _ := json.Marshal(map[string]string{"command": countCommand})
		_ = w.Call(0, fmt.Sprintf("call_%d", r.N), "shell", string(args), 4)
		_ = w.End("tool_calls")
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tty := openPTY(t)
	cmd := exec.Command(bin, "chat", "--ask", "shell", "--allow-shell", "--workspace", dir, "--session", filepath.Join(dir, "s.jsonl"))
	cmd.Dir = dir
	cmd.Env = binEnv(dir, "OPENAI_API_KEY="+testKey, "OPENAI_BASE_URL="+srv.BaseURL(), "TERM=dumb")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty.slave, tty.slave, tty.slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0} // Ctrl-C reaches it as from a shell
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	done := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(done) }() // owned: the cleanup waits for it
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	typed := func(s string) {
		t.Helper()
		if _, err := tty.master.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	asked := func(n int) {
		t.Helper()
		eventually(t, fmt.Sprintf("question %d", n), func() bool { return strings.Count(tty.out.String(), "approve? main wants to call shell") == n })
	}
	requests := func(n int) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d requests", n), func() bool { return len(srv.Requests()) == n })
	}

	typed("clean up\n")
	asked(1)
	if !strings.Contains(tty.out.String(), `arguments: {"command":"echo ran | tee -a count.txt"}`) {
		t.Fatalf("the question does not show the arguments:\n%s", tty.out.String())
	}
	typed("\x03") // Ctrl-C while the call waits
	eventually(t, "the withdrawal", func() bool { return strings.Contains(tty.out.String(), "shell withdrawn (call call_1)") })
	time.Sleep(100 * time.Millisecond) // a request after the cancel would come now
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests after the cancel, want 1", n)
	}

	typed("try again\n")
	asked(2)
	typed("n use make clean\n")
	requests(3)
	if got := lastTool(srv.Requests()[2]); !strings.Contains(got, `"status":"denied"`) || !strings.Contains(got, "use make clean") {
		t.Fatalf("the model read %s", got)
	}

	eventually(t, "the next prompt", func() bool { return strings.Count(tty.out.String(), "> ") >= 3 })
	typed("once more\n")
	asked(3)
	typed("a\n")
	requests(5)
	eventually(t, "the next prompt", func() bool { return strings.Count(tty.out.String(), "> ") >= 4 })
	typed("and again\n")
	requests(7)
	typed("\x04") // Ctrl-D
	select {
	case <-done:
		if waitErr != nil {
			t.Fatalf("chat: %v\n%s", waitErr, tty.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("chat did not end\n%s", tty.out.String())
	}
	out := tty.output(t)
	t.Logf("the terminal:\n%s", out)
	if n := strings.Count(out, "approve? main wants to call shell"); n != 3 {
		t.Errorf("asked %d times, want 3 (the grant covers the last call)\n%s", n, out)
	}
	if n := ranTimes(dir); n != 2 {
		t.Errorf("the command ran %d times, want 2\n%s", n, out)
	}
}

// lastTool is the content of a request's last tool message.
func lastTool(r fakeopenai.Request) string {
	for i := len(r.Body.Messages) - 1; i >= 0; i-- {
		if m := r.Body.Messages[i]; m.Role == "tool" {
			return m.Content
		}
	}
	return ""
}
