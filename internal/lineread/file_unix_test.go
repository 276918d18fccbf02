//go:build unix

package lineread

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openDescriptors counts this process's open descriptors (the entries of
// /dev/fd, less the one the listing itself opens).
func openDescriptors(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/dev/fd")
	if err != nil {
		t.Skipf("cannot list descriptors: %v", err)
	}
	return len(fds)
}

// TestFileInputBeyondSelectLimit: standard input on a descriptor select(2)
// cannot watch (FD_SETSIZE or above, as in a process that holds many
// files) is refused with the reason, and the wake-up pipe made for it is
// closed again: nothing leaks.
func TestFileInputBeyondSelectLimit(t *testing.T) {
	r, w := pipe(t)
	defer w.Close()
	high, err := unix.FcntlInt(r.Fd(), unix.F_DUPFD_CLOEXEC, unix.FD_SETSIZE+10)
	if err != nil {
		t.Skipf("no descriptor above FD_SETSIZE: %v", err)
	}
	in := os.NewFile(uintptr(high), "stdin")
	defer in.Close()
	before := openDescriptors(t)
	for range 3 {
		fi, err := newFileInput(in)
		if err == nil || !strings.Contains(err.Error(), "beyond select's limit") {
			t.Fatalf("newFileInput: %v, %v; want a refusal naming select's limit", fi, err)
		}
	}
	if after := openDescriptors(t); after != before {
		t.Errorf("%d descriptors open after three refusals, %d before", after, before)
	}
}
