package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/fakeopenai"
)

// holdAtDelta passes writes through to w until one holds a delta record
// (a streamed chunk written ahead of its step): that write is held until
// release is closed, with the kernel's goroutine inside it.
type holdAtDelta struct {
	w       io.Writer
	held    chan struct{}
	release <-chan struct{}
	once    sync.Once
}

func (h *holdAtDelta) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`{"type":"delta",`)) {
		h.once.Do(func() { close(h.held) })
		<-h.release
	}
	return h.w.Write(p)
}

// TestStuckDriverFailsTheExit: a chat ended (/exit) while the kernel's
// goroutine is stuck outside the kernel — here in a write to the log that
// never returns — exits after grace + 1 s without it, saying so, and with
// status 1: what the run wrote may lack its last steps.
func TestStuckDriverFailsTheExit(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("hello there", 3) })
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // at the end: the abandoned goroutine then finishes its write
	hold := &holdAtDelta{held: make(chan struct{}), release: release}
	dir := t.TempDir()
	c := startCLI(t, []string{"chat", "--grace", "200ms", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir},
		func(a *app) { a.wrapLog = func(w io.Writer) io.Writer { hold.w = w; return hold } })
	c.say("hi")
	select {
	case <-hold.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("the first chunk was never written to the log\nstderr: %s", c.errb)
	}
	c.say("/exit")
	if code := c.wait(30 * time.Second); code != exitCheckFailed || !strings.Contains(c.errb.String(), "did not stop within") {
		t.Fatalf("exit %d, want 1 saying the tree did not stop\nstderr: %s", code, c.errb)
	}
}
