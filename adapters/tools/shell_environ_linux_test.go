package tools

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestShellCannotReadEscapementEnviron: the environment policy is worth
// nothing if the shell can read escapement's own initial environment from
// /proc/<pid>/environ, which any same-user process can for a dumpable
// process. escapement (the test binary in its "shell" role, started with a
// key in its environment) runs a shell that greps every readable environ in
// /proc for the key. Root may read anything, so as root the role runs as
// the user nobody.
func TestShellCannotReadEscapementEnviron(t *testing.T) {
	const secret = "sk-environ-probe-7f3a9c2e41d8b605"
	exe, dir := os.Args[0], t.TempDir()
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		// nobody must reach the binary and the workspace.
		shared, err := os.MkdirTemp(othersCanReach(t, os.TempDir(), "/tmp"), "escapement-environ-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(shared) })
		exe, dir = filepath.Join(shared, "tools.test"), filepath.Join(shared, "ws")
		if err := copyFile(os.Args[0], exe); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		for path, mode := range map[string]os.FileMode{shared: 0o755, exe: 0o755, dir: 0o777} {
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
		}
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	self := exec.Command(exe, "-test.run=^$")
	self.Dir = dir
	self.Env = []string{"PATH=" + os.Getenv("PATH"), roleEnv + "=shell", "TOOLS_TEST_DIR=" + dir, "OPENAI_API_KEY=" + secret,
		`TOOLS_TEST_COMMAND=grep -a -h -o 'OPENAI_API_KEY=[a-z0-9-]*' /proc/[0-9]*/environ 2>/dev/null; echo "scanned as $(id -u)"`}
	self.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := self.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "scanned as ") {
		t.Fatalf("role: %v\n%s", err, out)
	}
	if strings.Contains(string(out), secret) {
		t.Errorf("the shell read the API key from /proc:\n%s", out)
	}
}

// othersCanReach returns the first of dirs that every user can reach
// (each directory on its path searchable by others): $TMPDIR may lie in a
// private directory (the mutation tester's scratch directory is 0700), where
// nobody could not start the copied binary.
func othersCanReach(t *testing.T, dirs ...string) string {
	t.Helper()
next:
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			continue
		}
		for p := abs; ; p = filepath.Dir(p) {
			if st, err := os.Stat(p); err != nil || !st.IsDir() || st.Mode().Perm()&0o001 == 0 {
				continue next
			}
			if p == filepath.Dir(p) {
				return abs
			}
		}
	}
	t.Fatalf("none of %q is reachable by every user", dirs)
	return ""
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
