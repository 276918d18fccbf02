package session

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultPath is where a new session goes when its host names no file
// (the CLI without --session): a file named by the time and the process
// under $XDG_STATE_HOME/escapement/sessions (~/.local/state when unset).
func DefaultPath() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no --session given and no home directory for the default: %w", err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	name := time.Now().UTC().Format("20060102-150405") + "-" + strconv.Itoa(os.Getpid()) + ".jsonl"
	return filepath.Join(dir, "escapement", "sessions", name), nil
}
