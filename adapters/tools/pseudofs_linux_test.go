package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escapement/escapement/kernel"
	"golang.org/x/sys/unix"
)

// TestPseudoFSInsideWorkspaceRefused: a procfs mounted inside the workspace
// (a chroot being built) holds files that look regular, among them every
// process's environ; the file tools refuse them. Needs the right to mount
// (root in a VM or a privileged container); skipped otherwise.
func TestPseudoFSInsideWorkspaceRefused(t *testing.T) {
	b, dir := newBox(t, false)
	mnt := filepath.Join(dir, "proc")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("proc", mnt, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.Skipf("cannot mount procfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	for _, c := range []struct{ tool, path string }{
		{"read_file", "proc/self/environ"},
		{"read_file", "proc/1/cmdline"},
		{"list_dir", "proc/self"},
		{"grep", "proc/self/environ"},
	} {
		r := run(t, b, c.tool, map[string]string{"path": c.path, "pattern": "PATH"})
		if r.Status != kernel.ToolError || !strings.Contains(r.Content, "refused: "+c.path+" is on procfs, a kernel pseudo-filesystem") {
			t.Errorf("%s %s: %.200q", c.tool, c.path, r.Content)
		}
	}
	// grep over the workspace skips the mount whole instead of walking
	// (and refusing) its tens of thousands of files one by one.
	if r := run(t, b, "grep", map[string]string{"path": ".", "pattern": "PATH"}); r.Content != "no matches\n[1 unreadable file or directory skipped]\n" {
		t.Errorf("grep .: %.200q", r.Content)
	}
}
