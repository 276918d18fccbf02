//go:build unix

package mutate

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive lock on dir for this process (released when
// the returned function runs or the process dies): two runs trimming one
// build cache would delete each other's builds mid-compile.
func lockDir(dir string) (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".mutate-lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("build cache %s is in use by another mutate run (%w); give each run its own --gocache", dir, err)
	}
	return func() { f.Close() }, nil
}
