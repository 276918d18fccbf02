package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
)

// TestStaleLogKeptAside: a write-ahead log left at FILE.wal by a session
// that is gone (its file deleted, the name used again) is neither
// overwritten nor replayed: it is kept as FILE.wal.stale-<time>, byte for
// byte, the run says so, and the new session runs with a log of its own
// (removed again at its clean end).
func TestStaleLogKeptAside(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) { _ = w.Answer("hello", 2) })
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	const old = "the log of a session that is gone\n"
	if err := os.WriteFile(sess+session.LogSuffix, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errb := runCLI(t, "run", "hi", "--session", sess, "--workspace", dir)
	if code != exitOK || out != "hello\n" {
		t.Fatalf("exit %d, stdout %q\n%s", code, out, errb)
	}
	aside, _ := filepath.Glob(sess + session.LogSuffix + ".stale-*")
	if len(aside) != 1 {
		t.Fatalf("kept aside: %v", aside)
	}
	if b, _ := os.ReadFile(aside[0]); string(b) != old {
		t.Errorf("%s holds %q", aside[0], b)
	}
	if !strings.Contains(errb, sess+session.LogSuffix+" was left by an earlier session of that name; kept as "+aside[0]) {
		t.Errorf("stderr does not say where the old log went:\n%s", errb)
	}
	if _, err := os.Stat(sess + session.LogSuffix); err == nil {
		t.Errorf("a log is left after the clean end")
	}
}
