package mutate

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"time"
)

// outcome is how one command ended.
type outcome struct {
	exit     int // -1: did not start or was killed
	timedOut bool
	dur      time.Duration
	out      *capture
}

// command runs argv in the module root with a time limit. The command runs
// in its own process group, and the whole group is killed when the limit
// passes or ctx is cancelled: `go test` leaves its test binaries behind
// otherwise.
func (r *runner) command(ctx context.Context, limit time.Duration, tmp string, argv ...string) outcome {
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	c := &capture{}
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Dir = r.cfg.Root
	cmd.Env = r.env(tmp)
	cmd.Stdout, cmd.Stderr = c, c
	killRest := ownProcessGroup(cmd)
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err := cmd.Run()
	killRest()
	o := outcome{dur: time.Since(start), out: c}
	c.flush()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		o.exit, o.timedOut = -1, true
	case errors.As(err, &ee) && ee.Exited():
		o.exit = ee.ExitCode()
	default:
		o.exit = -1
		c.line("mutate: " + err.Error())
	}
	return o
}

// capture keeps what matters of a command's output without holding all of
// it (a timed-out `go test` prints every goroutine's stack): the first
// lines, the notable ones (failing tests, panics, FAIL lines) and the last.
type capture struct {
	partial      []byte
	first        []string
	notable      []string
	last         []string
	testTimedOut bool
	buildFailed  bool
}

const (
	captureFirst   = 40
	captureNotable = 16
	captureLast    = 20
	captureWidth   = 240
)

func (c *capture) Write(p []byte) (int, error) {
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		c.line(string(c.partial[:i]))
		c.partial = c.partial[i+1:]
	}
	if len(c.partial) > 64<<10 { // a line without end: keep its start
		c.line(string(c.partial[:captureWidth]))
		c.partial = c.partial[:0]
	}
	return len(p), nil
}

func (c *capture) flush() {
	if len(c.partial) > 0 {
		c.line(string(c.partial))
		c.partial = nil
	}
}

func (c *capture) line(l string) {
	l = strings.TrimRight(l, "\r")
	if len(l) > captureWidth {
		l = l[:captureWidth] + "…"
	}
	if strings.HasPrefix(l, "panic: test timed out after") {
		c.testTimedOut = true
	}
	if strings.Contains(l, "[build failed]") || strings.Contains(l, "[setup failed]") {
		c.buildFailed = true
	}
	if len(c.first) < captureFirst {
		c.first = append(c.first, l)
	}
	t := strings.TrimSpace(l)
	if len(c.notable) < captureNotable && (strings.HasPrefix(t, "--- FAIL:") || strings.HasPrefix(t, "panic:") ||
		strings.HasPrefix(t, "FAIL") || strings.Contains(t, " FAIL ") || strings.Contains(t, "violation") ||
		strings.HasPrefix(t, "escapement:")) {
		c.notable = append(c.notable, t)
	}
	c.last = append(c.last, l)
	if len(c.last) > captureLast {
		c.last = c.last[1:]
	}
}

// head is the first n lines.
func (c *capture) head(n int) string {
	return strings.Join(c.first[:min(n, len(c.first))], "\n")
}

// text is everything kept, for an error message.
func (c *capture) text() string {
	var b strings.Builder
	b.WriteString(strings.Join(c.first, "\n"))
	if len(c.last) > 0 && len(c.first) == captureFirst {
		b.WriteString("\n…\n")
		b.WriteString(strings.Join(c.last, "\n"))
	}
	return b.String()
}

// killedBy says what failed, in one line: the notable lines, else the last
// lines.
func (c *capture) killedBy() string {
	lines := c.notable
	if len(lines) == 0 {
		lines = c.last[max(0, len(c.last)-3):]
	}
	var parts []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "FAIL\t") && l != "FAIL" {
			parts = append(parts, l)
		}
	}
	if len(parts) == 0 {
		parts = lines
	}
	s := strings.Join(parts, " | ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}
