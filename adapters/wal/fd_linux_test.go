package wal

import (
	"os"
	"testing"

	"github.com/escapement/escapement/adapters/live"
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

// TestFailedResumeClosesTheLog: a Resume that fails after it opened the log
// for appending (here the driver refuses a configuration without a model)
// leaves no descriptor of the log open.
func TestFailedResumeClosesTheLog(t *testing.T) {
	path := logPath(t)
	if err := os.WriteFile(path, recordedLog(t), 0o600); err != nil {
		t.Fatal(err)
	}
	before := openFiles(t)
	for range 3 {
		if _, err := Resume(path, live.Config{Tools: newTools()}, nil); err == nil {
			t.Fatal("Resume without a model succeeded")
		}
	}
	if after := openFiles(t); after != before {
		t.Errorf("%d descriptors open after three failed resumes, %d before", after, before)
	}
}
