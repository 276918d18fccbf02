package session

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
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
// header — leaves no descriptor open once the lock is released.
func TestFailedStartClosesItsFiles(t *testing.T) {
	model := ports.ModelFunc(func(context.Context, ports.Request, ports.Sink) error { return nil })
	tools := ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult { return ports.ToolResult{} })
	for name, cfg := range map[string]Config{
		"trace": {Trace: failingWriter{}},
		"log":   {WrapLog: func(io.Writer) io.Writer { return failingWriter{} }},
	} {
		dir := t.TempDir()
		before := openFiles(t)
		for i := range 3 {
			s, err := Create(filepath.Join(dir, name+string(rune('a'+i))+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Kernel, cfg.Model, cfg.Tools = kernel.Config{Limits: kernel.DefaultLimits()}, model, tools
			if err := s.Start(cfg); !errors.Is(err, errDisk) {
				t.Fatalf("%s: Start: %v, want the disk's error", name, err)
			}
			s.Release()
		}
		if after := openFiles(t); after != before {
			t.Errorf("%s: %d descriptors open after three failed starts, %d before", name, after, before)
		}
	}
}
