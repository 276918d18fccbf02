package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxCommandLines bounds the command's non-test Go lines: cmd/escapement
// holds flags, signals, terminal I/O and wiring, and what a program could
// reuse lives in a package (adapters/session, adapters/agent, the
// simulator's command line in internal/simcli, internal/...).
const maxCommandLines = 2000

// commandBudget is the bound the command is held to today, below
// maxCommandLines: the live commands' budget, which the whole command
// keeps now that the simulator's commands live in internal/simcli. The
// room between the two is not room to grow.
const commandBudget = 1800

// TestCommandIsWiring: the command's non-test Go files — every one of
// them — hold fewer than maxCommandLines lines, and fewer than
// commandBudget.
func TestCommandIsWiring(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	counted, nfiles := 0, 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		counted += bytes.Count(b, []byte("\n"))
		nfiles++
	}
	if nfiles < 5 || counted == 0 {
		t.Fatalf("counted %d lines in %d files: the test does not see the command's sources", counted, nfiles)
	}
	if counted >= maxCommandLines {
		t.Errorf("cmd/escapement holds %d non-test lines; the bound is %d: move what is not flags, signals, terminal I/O or wiring into a package", counted, maxCommandLines)
	}
	if counted >= commandBudget {
		t.Errorf("cmd/escapement holds %d non-test lines; its budget is %d: move what is not flags, signals, terminal I/O or wiring into a package", counted, commandBudget)
	}
	t.Logf("%d non-test lines in %d files", counted, nfiles)
}
