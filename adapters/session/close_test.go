package session

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// switchWriter writes through until failing is set, then fails every
// write with errDisk.
type switchWriter struct {
	w       io.Writer
	failing *atomic.Bool
}

func (s switchWriter) Write(p []byte) (int, error) {
	if s.failing.Load() {
		return 0, errDisk
	}
	return s.w.Write(p)
}

// TestCloseReportsTheLogsEnd: a session whose write-ahead log cannot take
// its end line is closed with that error, named as the log's: the log is
// then kept for the next Resume, and the host must be told.
func TestCloseReportsTheLogsEnd(t *testing.T) {
	var failing atomic.Bool
	s, err := Create(filepath.Join(t.TempDir(), "s.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	err = s.Start(Config{Kernel: kernel.Config{Limits: kernel.DefaultLimits()},
		Model:   ports.ModelFunc(func(context.Context, ports.Request, ports.Sink) error { return nil }),
		Tools:   ports.ToolsFunc(func(context.Context, ports.Call) ports.ToolResult { return ports.ToolResult{} }),
		WrapLog: func(w io.Writer) io.Writer { return switchWriter{w, &failing} }})
	if err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	if err := s.Close(nil); !errors.Is(err, errDisk) || !strings.HasPrefix(err.Error(), "write-ahead log: ") {
		t.Fatalf("Close: %v, want the log's end failing, named as the log's", err)
	}
}
