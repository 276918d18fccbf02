package tools

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// shell runs `bash -c command` in the workspace through proc.Start: its own
// process group, stdin closed, the environment filtered by the policy. On
// cancel the group gets SIGINT, and the hard kill after KillGrace (F3);
// when the command ends, whatever it left running is killed too — on Linux
// also what left the group — so nothing outlives its tool call.
func (b *Box) shell(ctx context.Context, command string) ports.ToolResult {
	started := time.Now()
	pr, pw, err := os.Pipe()
	if err != nil {
		return ports.ToolResult{Status: kernel.ToolError, Content: "error: shell: " + err.Error()}
	}
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = b.real
	cmd.Stdin = nil // /dev/null: a tool must never wait for the user's terminal
	cmd.Stdout, cmd.Stderr = pw, pw
	p, err := proc.Start(ctx, cmd, proc.Options{Env: b.env, KillGrace: b.cfg.KillGrace})
	pw.Close() // the children hold the write end now
	if err != nil {
		pr.Close()
		return ports.ToolResult{Status: kernel.ToolError, Content: "error: shell: " + err.Error()}
	}
	b.track(p, true)
	defer b.track(p, false)

	out := &headTail{limit: b.cfg.OutputLimit}
	drained := make(chan struct{})
	go func() { // owned: drain waits for it before shell returns
		defer close(drained)
		_, _ = io.Copy(out, pr)
	}()
	exit, waitErr := p.Wait()
	// On Linux the whole tree is gone and the pipe at its end. Elsewhere a
	// process that left the group may still hold it: bound the drain, and
	// after a cancel keep it short (what the group wrote is in the pipe
	// already, and the kernel's grace for this call is running).
	limit := b.cfg.DrainLimit
	if exit.Cancelled {
		limit = min(limit, cancelledDrain)
	}
	drain(pr, drained, limit)
	elapsed := time.Since(started).Round(time.Millisecond)

	var sb strings.Builder
	status := kernel.ToolOK
	switch {
	case exit.Cancelled:
		status = kernel.ToolCancelled
		fmt.Fprintf(&sb, "cancelled after %v: SIGINT sent to the process group", elapsed)
		if exit.Killed {
			fmt.Fprintf(&sb, ", SIGKILL after %v", b.cfg.KillGrace)
		}
	case waitErr != nil:
		fmt.Fprintf(&sb, "error: %v after %v", waitErr, elapsed)
	default:
		fmt.Fprintf(&sb, "%s in %v", exit, elapsed)
	}
	switch exit.Leftover {
	case 0:
	case 1:
		sb.WriteString("; killed 1 process it left running")
	default:
		fmt.Fprintf(&sb, "; killed %d processes it left running", exit.Leftover)
	}
	sb.WriteString("\n")
	if text := out.String(); text != "" {
		sb.WriteString("output:\n")
		sb.WriteString(text)
		if !strings.HasSuffix(text, "\n") {
			sb.WriteString("\n")
		}
	} else {
		sb.WriteString("(no output)\n")
	}
	return ports.ToolResult{Status: status, Content: sb.String()}
}

// cancelledDrain bounds the output drain of a cancelled shell.
const cancelledDrain = 100 * time.Millisecond

// drain waits for the copy into the output to end (drained closes at the
// pipe's end) for at most limit, then stops it, and closes the pipe.
func drain(pr *os.File, drained <-chan struct{}, limit time.Duration) {
	timer := time.NewTimer(limit)
	select {
	case <-drained:
		timer.Stop()
	case <-timer.C:
		_ = pr.SetReadDeadline(time.Now())
		<-drained
	}
	pr.Close()
}

// track registers a running shell (running) or forgets it. A shell that
// registers after KillAll is killed at once: it was still starting when
// KillAll looked, or came later.
func (b *Box) track(p *proc.Process, running bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !running {
		delete(b.running, p)
		return
	}
	b.running[p] = struct{}{}
	if b.killedAll {
		p.Kill()
	}
}

// KillAll starts the hard kill of every running shell at once (on Linux,
// each call's helper then kills its whole tree, even after this process
// has exited), and of every shell that starts after it. The CLI calls it on
// a hard exit (a second Ctrl-C), which does not wait for the kernel's
// graceful cancel.
func (b *Box) KillAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.killedAll = true
	for p := range b.running {
		p.Kill()
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

// ShellExit is how the shell's command ended, read from the first line of
// the result the shell tool writes ("exit status 3 in 12ms", "killed by
// signal killed in 2s"): "ok" for exit status 0, "exit N", "killed by
// signal NAME"; "" for a result that does not start so (a cancelled or a
// failed start). A user's display shows it: the call itself succeeded
// whatever the command's status, which the model reads.
func ShellExit(result string) string {
	first, _, _ := strings.Cut(result, "\n")
	first, _, _ = strings.Cut(first, " in ")
	switch code, ok := strings.CutPrefix(first, "exit status "); {
	case ok && code == "0":
		return "ok"
	case ok:
		return "exit " + code
	case strings.HasPrefix(first, "killed by signal "):
		return first
	}
	return ""
}
