package tools

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/escapement/escapement/kernel"
)

// TestWorkspaceRefused: `--workspace /` used to be accepted, and with it
// read_file("proc/self/environ"): the API key. The filesystem root and the
// kernel's pseudo-filesystems (and anything under them, also reached
// through a symlink) are refused with the reason.
func TestWorkspaceRefused(t *testing.T) {
	link := filepath.Join(t.TempDir(), "root")
	if err := os.Symlink("/", link); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"/":    "refused: the filesystem root would expose every file the user can read to the file tools, on Linux /proc/self/environ too",
		link:   "refused: the filesystem root",
		"/dev": "refused: /dev is a kernel pseudo-filesystem",
	}
	if runtime.GOOS == "linux" {
		cases["/proc"] = "refused: /proc is a kernel pseudo-filesystem"
		cases["/proc/self"] = "refused: /proc is a kernel pseudo-filesystem"
		cases["/sys/kernel"] = "refused: /sys is a kernel pseudo-filesystem"
	}
	for ws, want := range cases {
		b, err := New(Config{Workspace: ws})
		if err == nil {
			b.Close()
			t.Errorf("workspace %s accepted", ws)
			continue
		}
		if !strings.HasPrefix(err.Error(), "workspace "+ws+": ") || !strings.Contains(err.Error(), want) {
			t.Errorf("workspace %s: %v, want %q", ws, err, want)
		}
	}
	// A directory whose name merely starts like one is fine.
	dir := filepath.Join(t.TempDir(), "proc")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{Workspace: dir})
	if err != nil {
		t.Fatalf("workspace %s: %v", dir, err)
	}
	b.Close()
}

// TestPassEnvRefusesAPIKey: the API key cannot be passed to tools, and
// PassEnv holds names only.
func TestPassEnvRefusesAPIKey(t *testing.T) {
	for pass, want := range map[string]string{
		"OPENAI_API_KEY": "tool environment: OPENAI_API_KEY cannot be passed to tools",
		"GH_TOKEN=x":     `tool environment: "GH_TOKEN=x" is not a variable name`,
	} {
		b, err := New(Config{Workspace: t.TempDir(), AllowShell: true, PassEnv: []string{"GH_TOKEN", pass}})
		if err == nil {
			b.Close()
			t.Errorf("PassEnv %q accepted", pass)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("PassEnv %q: %v, want %q", pass, err, want)
		}
	}
}

// TestDotDotPrefixedNamesStayInside: names that merely start with two dots
// ("..cache", "...", "a/..b") are inside the workspace, relative or
// absolute; only a ".." path element leaves it.
func TestDotDotPrefixedNamesStayInside(t *testing.T) {
	b, dir := newBox(t, false)
	for _, p := range []string{"..cache/x", "...", "a/..b/c", "a/../..x"} {
		if r := run(t, b, "write_file", map[string]string{"path": p, "content": "in " + p}); r.Status != kernel.ToolOK {
			t.Errorf("write_file %s: %+v", p, r)
		}
		if r := run(t, b, "read_file", map[string]string{"path": filepath.Join(dir, p)}); r.Content != "in "+p {
			t.Errorf("read_file absolute %s: %+v", p, r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "..cache", "x")); err != nil {
		t.Errorf("..cache/x not written inside the workspace: %v", err)
	}
	if r := run(t, b, "list_dir", map[string]string{"path": "..cache"}); r.Content != "x (12 bytes)\n" {
		t.Errorf("list_dir ..cache: %+v", r)
	}
	if r := run(t, b, "grep", map[string]string{"pattern": "in", "path": "..cache"}); r.Content != "..cache/x:1: in ..cache/x\n" {
		t.Errorf("grep ..cache: %+v", r)
	}
}
