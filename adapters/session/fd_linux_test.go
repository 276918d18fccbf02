package session

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// openFiles counts this process's open descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

var errDisk = errors.New("disk full")

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errDisk }

// TestFailedStartClosesItsFiles: a Start that fails after it opened the
// session file — its trace cannot be written, or its write-ahead log's
// header, or the kernel refuses its configuration once the log is open —
// leaves no descriptor open once the lock is released.
func TestFailedStartClosesItsFiles(t *testing.T) {
	model := ports.ModelFunc(func(context.Context, ports.Request, ports.Sink) error { return nil })
	tools := ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult { return ports.ToolResult{} })
	limits := kernel.Config{Limits: kernel.DefaultLimits()}
	refused := limits
	refused.LogCapacity = -1
	for name, cfg := range map[string]Config{
		"trace":  {Kernel: limits, Trace: failingWriter{}},
		"log":    {Kernel: limits, WrapLog: func(io.Writer) io.Writer { return failingWriter{} }},
		"kernel": {Kernel: refused},
	} {
		want := errDisk.Error()
		if name == "kernel" {
			want = "log capacity must be in"
		}
		dir := t.TempDir()
		before := openFiles(t)
		for i := range 3 {
			s, err := Create(filepath.Join(dir, name+string(rune('a'+i))+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Model, cfg.Tools = model, tools
			if err := s.Start(cfg); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: Start: %v, want %q", name, err, want)
			}
			s.Release()
		}
		if after := openFiles(t); after != before {
			t.Errorf("%s: %d descriptors open after three failed starts, %d before", name, after, before)
		}
	}
}
