package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// shell runs `bash -c command` in the workspace, in its own process group
// with stdin closed. On cancel the whole group gets SIGINT, and SIGKILL
// after KillGrace (F3); when the command ends, whatever it left running in
// its group is killed too, so nothing outlives its tool call.
func (b *Box) shell(ctx context.Context, command string) live.ToolResult {
	started := time.Now()
	pr, pw, err := os.Pipe()
	if err != nil {
		return live.ToolResult{Status: kernel.ToolError, Content: "error: shell: " + err.Error()}
	}
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = b.real
	cmd.Stdin = nil // /dev/null: a tool must never wait for the user's terminal
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = shellProcAttr()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return live.ToolResult{Status: kernel.ToolError, Content: "error: shell: " + err.Error()}
	}
	pw.Close() // the children hold the write end now
	pgid := cmd.Process.Pid
	b.track(pgid, true)
	defer b.track(pgid, false)

	out := &headTail{limit: b.cfg.OutputLimit}
	drained := make(chan struct{})
	go func() { // owned: shell waits for it below before returning
		defer close(drained)
		_, _ = io.Copy(out, pr)
	}()
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }() // owned: received from below

	var (
		waitErr   error
		cancelled bool
		killed    bool
	)
	select {
	case waitErr = <-waited:
	case <-ctx.Done():
		cancelled = true
		_ = syscall.Kill(-pgid, syscall.SIGINT)
		grace := time.NewTimer(b.cfg.KillGrace)
		select {
		case waitErr = <-waited:
			grace.Stop()
		case <-grace.C:
			killed = true
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			waitErr = <-waited
		}
	}
	// The leader has exited; reap the rest of its group (background jobs).
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	// A process that left the group (setsid) may still hold the pipe: bound
	// the drain, then stop reading. After a cancel the bound is short: what
	// the group wrote is already in the pipe, and the kernel's grace for
	// this call is running (KillGrace took half of it).
	limit := b.cfg.DrainLimit
	if cancelled {
		limit = min(limit, cancelledDrain)
	}
	drain := time.NewTimer(limit)
	select {
	case <-drained:
		drain.Stop()
	case <-drain.C:
		_ = pr.SetReadDeadline(time.Now())
		<-drained
	}
	pr.Close()
	elapsed := time.Since(started).Round(time.Millisecond)

	var sb strings.Builder
	status := kernel.ToolOK
	switch {
	case cancelled:
		status = kernel.ToolCancelled
		fmt.Fprintf(&sb, "cancelled after %v: SIGINT sent to the process group", elapsed)
		if killed {
			fmt.Fprintf(&sb, ", SIGKILL after %v", b.cfg.KillGrace)
		}
		sb.WriteString("\n")
	default:
		fmt.Fprintf(&sb, "%s in %v\n", exitText(waitErr), elapsed)
	}
	if text := out.String(); text != "" {
		sb.WriteString("output:\n")
		sb.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			sb.WriteString("\n")
		}
	} else {
		sb.WriteString("(no output)\n")
	}
	return live.ToolResult{Status: status, Content: sb.String()}
}

// cancelledDrain bounds the output drain of a cancelled shell.
const cancelledDrain = 100 * time.Millisecond

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "killed by signal " + ws.Signal().String()
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	return "error: " + err.Error()
}

func (b *Box) track(pgid int, running bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if running {
		b.groups[pgid] = struct{}{}
	} else {
		delete(b.groups, pgid)
	}
}

// KillAll sends SIGKILL to every running shell's process group at once. The
// CLI calls it on a hard exit (a second Ctrl-C), which does not wait for the
// kernel's graceful cancel.
func (b *Box) KillAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for pgid := range b.groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// headTail keeps the first and last halves of an over-long output and
// counts what it dropped in between: errors tend to be at the end, context
// at the start. It has no lock: only the copying goroutine writes, and
// String is called after that goroutine has ended (shell waits for drained).
type headTail struct {
	limit   int
	head    []byte
	tail    []byte
	dropped int64
}

func (h *headTail) Write(p []byte) (int, error) {
	n := len(p)
	half := h.limit / 2
	if room := half - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	h.tail = append(h.tail, p...)
	if over := len(h.tail) - (h.limit - half); over > 0 {
		h.dropped += int64(over)
		h.tail = append(h.tail[:0], h.tail[over:]...)
	}
	return n, nil
}

func (h *headTail) String() string {
	if h.dropped == 0 {
		return string(h.head) + string(h.tail)
	}
	// The seams are byte offsets: runes split there go with the dropped part.
	head, tail := textcut.TrimPartialEnd(h.head), textcut.TrimPartialStart(h.tail)
	dropped := h.dropped + int64(len(h.head)-len(head)+len(h.tail)-len(tail))
	return fmt.Sprintf("%s\n[… %d bytes of output not shown …]\n%s", head, dropped, tail)
}
