//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/fakeopenai"
	"golang.org/x/sys/unix"
)

// pty is a pseudo-terminal whose slave side a command writes to, as to a
// user's terminal; what it writes is read from the master side.
type pty struct {
	master, slave *os.File
	out           syncBuffer
	done          chan struct{}
}

func openPTY(t *testing.T) *pty {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open the slave: %v", err)
	}
	p := &pty{master: m, slave: s, done: make(chan struct{})}
	go func() { // owned: output waits for it (the slave's close ends it)
		defer close(p.done)
		_, _ = io.Copy(&p.out, m)
	}()
	t.Cleanup(func() {
		s.Close()
		<-p.done
		m.Close()
	})
	return p
}

// output closes the slave side and returns everything written to it.
func (p *pty) output(t *testing.T) string {
	t.Helper()
	p.slave.Close()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output never ended")
	}
	return p.out.String()
}

// startCLIOut is startCLI with stdout the file out.
func startCLIOut(t *testing.T, args []string, out *os.File) *cli {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &cli{t: t, stdin: w, sigs: make(chan os.Signal), exits: make(chan int, 4), out: &syncBuffer{}, errb: &syncBuffer{}, code: make(chan int, 1)}
	go func() { // owned: wait, or the cleanup below, receives from code
		c.code <- runWith(context.Background(), args, streams{in: r, out: out, err: c.errb},
			func(code int) { c.exits <- code },
			func() (<-chan os.Signal, func()) { return c.sigs, func() {} })
	}()
	t.Cleanup(func() {
		w.Close()
		if c.result == nil {
			select {
			case <-c.code:
			case <-time.After(30 * time.Second):
				t.Errorf("%v never returned", args)
			}
		}
		r.Close()
	})
	return c
}

// TestTerminalStdoutEscaped: on a terminal, the answer's control
// characters other than newline and tab are shown escaped; with --json,
// stdout is exact JSON whose text decodes to the answer's bytes.
func TestTerminalStdoutEscaped(t *testing.T) {
	const answer = "line one " + hostileText + "\n\ttabbed line two\n"
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer(answer, 7) })
	for _, jsonOut := range []bool{false, true} {
		dir := t.TempDir()
		args := []string{"run", "go", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir}
		if jsonOut {
			args = append(args, "--json")
		}
		tty := openPTY(t)
		c := startCLIOut(t, args, tty.slave)
		if code := c.wait(30 * time.Second); code != exitOK {
			t.Fatalf("json %v: exit %d\nstderr: %q", jsonOut, code, c.errb)
		}
		out := tty.output(t)
		if raw := rawControls(out, true); len(raw) > 0 && !jsonOut {
			t.Errorf("the terminal got raw controls %q:\n%q", raw, out)
		}
		if !jsonOut {
			mustHave(t, strings.ReplaceAll(out, "\r\n", "\n"), `line one \x1b[2J\x1b]0;pwned\x07 \u009b31m \u202eevil\rforged`+"\n\ttabbed line two\n")
			continue
		}
		var text strings.Builder
		for _, ev := range jsonRun(t, out) {
			if ev.Type == protocol.TypeDelta && ev.Agent == "main" {
				text.WriteString(ev.Text)
			}
		}
		if text.String() != answer {
			t.Errorf("--json on a terminal: the deltas hold %q, want %q", text.String(), answer)
		}
	}
}
