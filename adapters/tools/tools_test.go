package tools

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/proctest"
	"github.com/escapement/escapement/kernel"
)

func newBox(t *testing.T, shell bool) (*Box, string) {
	t.Helper()
	dir := t.TempDir()
	b, err := New(Config{Workspace: dir, AllowShell: shell, KillGrace: 300 * time.Millisecond, OutputLimit: 1024})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, b.Workspace()
}

func call(name string, args any) ports.Call {
	raw, ok := args.(string)
	if !ok {
		b, _ := json.Marshal(args)
		raw = string(b)
	}
	return ports.Call{ToolCall: kernel.ToolCall{ID: "c", Name: name, Arguments: raw}}
}

func run(t *testing.T, b *Box, name string, args any) ports.ToolResult {
	t.Helper()
	return b.Run(context.Background(), call(name, args))
}

func TestFiles(t *testing.T) {
	b, dir := newBox(t, false)
	if r := run(t, b, "write_file", map[string]string{"path": "src/a.go", "content": "package a\nfunc Hello() {}\n"}); r.Status != kernel.ToolOK || !strings.Contains(r.Content, "wrote 26 bytes to src/a.go") {
		t.Fatalf("write_file: %+v", r)
	}
	if r := run(t, b, "read_file", map[string]string{"path": "src/a.go"}); r.Content != "package a\nfunc Hello() {}\n" {
		t.Errorf("read_file: %+v", r)
	}
	// An absolute path inside the workspace is fine.
	if r := run(t, b, "read_file", map[string]string{"path": filepath.Join(dir, "src", "a.go")}); r.Status != kernel.ToolOK {
		t.Errorf("absolute path inside: %+v", r)
	}
	if r := run(t, b, "list_dir", map[string]string{"path": "."}); r.Content != "src/\n" {
		t.Errorf("list_dir: %q", r.Content)
	}
	if r := run(t, b, "list_dir", map[string]string{"path": "src"}); r.Content != "a.go (26 bytes)\n" {
		t.Errorf("list_dir src: %q", r.Content)
	}
	if r := run(t, b, "grep", map[string]string{"pattern": `func \w+`, "path": "."}); r.Content != "src/a.go:2: func Hello() {}\n" {
		t.Errorf("grep: %q", r.Content)
	}
	if r := run(t, b, "grep", map[string]string{"pattern": `nothing`, "path": "src/a.go"}); r.Content != "no matches\n" {
		t.Errorf("grep no match: %q", r.Content)
	}
	big := strings.Repeat("x", 5000)
	run(t, b, "write_file", map[string]string{"path": "big.txt", "content": big})
	if r := run(t, b, "read_file", map[string]string{"path": "big.txt"}); !strings.Contains(r.Content, "[truncated: big.txt is 5000 bytes; showing the first 1024]") {
		t.Errorf("read_file not capped: %d bytes", len(r.Content))
	}
}

// TestEscapesRefused: "..", absolute paths elsewhere and symlinks out of the
// workspace are refused with an error that says which, for every file tool.
func TestEscapesRefused(t *testing.T) {
	b, dir := newBox(t, false)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("TOPSECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(dir, filepath.Join(outside, "secret"))
	for _, tc := range []struct {
		tool string
		args map[string]string
		how  string
	}{
		{"read_file", map[string]string{"path": "../secret"}, "(..)"},
		{"read_file", map[string]string{"path": rel}, "(..)"},
		{"read_file", map[string]string{"path": "a/../../x"}, "(..)"},
		{"read_file", map[string]string{"path": "/etc/passwd"}, "(absolute path)"},
		{"read_file", map[string]string{"path": filepath.Join(outside, "secret")}, "(absolute path)"},
		{"read_file", map[string]string{"path": "out/secret"}, "(symlink)"},
		{"read_file", map[string]string{"path": "link"}, "(symlink)"},
		{"write_file", map[string]string{"path": "out/new", "content": "x"}, "(symlink)"},
		{"write_file", map[string]string{"path": "../new", "content": "x"}, "(..)"},
		{"write_file", map[string]string{"path": "/tmp/new", "content": "x"}, "(absolute path)"},
		{"list_dir", map[string]string{"path": ".."}, "(..)"},
		{"list_dir", map[string]string{"path": "out"}, "(symlink)"},
		{"list_dir", map[string]string{"path": "/"}, "(absolute path)"},
		{"grep", map[string]string{"pattern": "SECRET", "path": "out"}, "(symlink)"},
		{"grep", map[string]string{"pattern": "SECRET", "path": ".."}, "(..)"},
	} {
		r := run(t, b, tc.tool, tc.args)
		if r.Status != kernel.ToolError || !strings.Contains(r.Content, "leaves the workspace "+tc.how) || strings.Contains(r.Content, "TOPSECRET") {
			t.Errorf("%s %v: %+v; want a refusal mentioning %s", tc.tool, tc.args, r, tc.how)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Error("a write escaped the workspace")
	}
	// grep over the whole workspace does not follow the symlinks out.
	if r := run(t, b, "grep", map[string]string{"pattern": "SECRET", "path": "."}); strings.Contains(r.Content, "TOPSECRET") {
		t.Errorf("grep followed a symlink out: %q", r.Content)
	}
}

func TestBadCallsAreErrorResults(t *testing.T) {
	b, _ := newBox(t, false)
	for _, tc := range []struct {
		name, args, want string
	}{
		{"rm_rf", `{}`, `unknown tool "rm_rf" (available: read_file, write_file, list_dir, grep)`},
		{"read_file", `{"path": 3}`, `arguments must be {"path": string}`},
		{"read_file", `{}`, `arguments must be {"path": string}; got {}`},
		{"read_file", `not json`, `arguments must be {"path": string}`},
		{"write_file", `{"path":"a"}`, `{"path": string, "content": string}`},
		{"grep", `{"pattern":"("}`, `bad pattern`},
		{"read_file", `{"path":"missing.txt"}`, `missing.txt: no such file or directory`},
		{"shell", `{"command":"echo hi"}`, `shell is disabled; the user can enable it with --allow-shell`},
	} {
		r := run(t, b, tc.name, tc.args)
		if r.Status != kernel.ToolError || !strings.Contains(r.Content, tc.want) {
			t.Errorf("%s %s: %+v; want error containing %q", tc.name, tc.args, r, tc.want)
		}
	}
	for _, s := range b.Specs() {
		if s.Name == "shell" {
			t.Error("shell is published while disabled")
		}
		if !json.Valid(s.Parameters) {
			t.Errorf("%s: invalid schema", s.Name)
		}
	}
}

func TestShell(t *testing.T) {
	b, _ := newBox(t, true)
	r := run(t, b, "shell", map[string]string{"command": "echo out; echo err >&2; exit 3"})
	if r.Status != kernel.ToolOK || !strings.HasPrefix(r.Content, "exit status 3 in ") || !strings.Contains(r.Content, "out\nerr\n") {
		t.Errorf("shell: %+v", r)
	}
	r = run(t, b, "shell", map[string]string{"command": "head -c 5000 /dev/zero | tr '\\0' a; echo END"})
	if !strings.Contains(r.Content, "bytes of output not shown") || !strings.HasSuffix(r.Content, "END\n") {
		t.Errorf("output not capped head+tail: %d bytes", len(r.Content))
	}
	r = run(t, b, "shell", map[string]string{"command": "cat; echo done"})
	if !strings.Contains(r.Content, "done") {
		t.Errorf("stdin not closed: %+v", r)
	}
	// A background job left behind is killed with its group when the
	// command ends: nothing outlives its tool call.
	r = run(t, b, "shell", map[string]string{"command": "sleep 30 & echo $$"})
	pgid := lastInt(t, r.Content)
	// SIGKILL was sent before Run returned; its delivery is asynchronous,
	// so allow the kernel a (generous) moment to finish the group off.
	if _, err := proctest.WaitGroupGone(pgid, 5*time.Second); err != nil {
		t.Fatalf("background job outlived its tool call: %v", err)
	}
}

func lastInt(t *testing.T, s string) int {
	t.Helper()
	f := strings.Fields(s)
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		t.Fatalf("no pid in %q", s)
	}
	return n
}

// TestShellCancel: a cancelled shell's whole process group gets SIGINT; a
// group that ignores it is SIGKILLed after the kill grace; either way the
// group is gone when Run returns, and the result says cancelled (F3).
func TestShellCancel(t *testing.T) {
	for _, tc := range []struct {
		name, command string
		killed        bool
	}{
		// The foreground child writes the pid file (its parent's pid, the
		// group's leader), so the SIGINT finds bash waiting for it: bash
		// exits after a child killed by SIGINT. Written by bash itself
		// before the fork, a SIGINT that lands between the two can be
		// deferred by bash, and the group then needs the SIGKILL.
		{"polite", "sh -c 'echo $PPID > pid; exec sleep 30'; echo never", false},
		{"stubborn", "trap '' INT; echo $$ > pid; sleep 30 & sleep 30; echo never", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, dir := newBox(t, true)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan ports.ToolResult, 1)
			go func() { done <- b.Run(ctx, call("shell", map[string]string{"command": tc.command})) }()
			pgid := proctest.WaitPIDFile(t, filepath.Join(dir, "pid"), 5*time.Second)
			if m, _ := proctest.GroupMembers(pgid); len(m) == 0 {
				t.Fatalf("group %d not running", pgid)
			}
			cancel()
			r := <-done
			if r.Status != kernel.ToolCancelled || !strings.Contains(r.Content, "SIGINT sent to the process group") ||
				strings.Contains(r.Content, "SIGKILL") != tc.killed || strings.Contains(r.Content, "never") {
				t.Errorf("result %+v", r)
			}
			// SIGKILL was sent to the group before Run returned; delivery is
			// asynchronous, so give the members a generous moment to die.
			if _, err := proctest.WaitGroupGone(pgid, 5*time.Second); err != nil {
				t.Fatalf("after Run returned: %v", err)
			}
		})
	}
}

// TestShellDrainBounded: when something outside the call's tree still
// holds the output pipe (possible on macOS, where a process that left the
// group survives the call), the drain stops at its limit instead of
// holding the call until that process exits.
func TestShellDrainBounded(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close() // the holder that never closes, until the test ends
	out := &headTail{limit: 1024}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		_, _ = io.Copy(out, pr)
	}()
	returned := make(chan struct{})
	go func() {
		drain(pr, drained, 50*time.Millisecond)
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(30 * time.Second):
		t.Fatal("drain still waiting for the pipe's holder after 30s")
	}
}

// TestSpecialFilesRefused: a FIFO in the workspace is refused at once by
// every file tool, instead of blocking the call (and with it the driver,
// which waits for every tool) until a writer or reader appears.
func TestSpecialFilesRefused(t *testing.T) {
	b, dir := newBox(t, false)
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, c := range []struct {
		tool string
		args map[string]string
	}{
		{"read_file", map[string]string{"path": "pipe"}},
		{"write_file", map[string]string{"path": "pipe", "content": "x"}},
		{"list_dir", map[string]string{"path": "pipe"}},
	} {
		done := make(chan ports.ToolResult, 1)
		go func() { done <- run(t, b, c.tool, c.args) }()
		select {
		case r := <-done:
			if r.Status != kernel.ToolError || !strings.Contains(r.Content, "pipe") {
				t.Errorf("%s on a FIFO: %+v, want an error naming it", c.tool, r)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s on a FIFO still blocked after 5s", c.tool)
		}
	}
}

// TestIdempotentToolsOnlyRead: the tools a recovery may run again are
// published tools, and none of them writes or runs a command.
func TestIdempotentToolsOnlyRead(t *testing.T) {
	b, _ := newBox(t, true)
	published := map[string]bool{}
	for _, s := range b.Specs() {
		published[s.Name] = true
	}
	for _, name := range b.Idempotent() {
		if !published[name] || name == "write_file" || name == "shell" || name == "delegate" {
			t.Errorf("%s is marked idempotent", name)
		}
	}
}

// TestWrongKindOfPathSaysSo: a file tool given the wrong kind of path (a
// directory to read or write, a file to list) fails with an error that
// names the path and says what it is, and changes nothing.
func TestWrongKindOfPathSaysSo(t *testing.T) {
	b, dir := newBox(t, false)
	if err := os.MkdirAll(filepath.Join(dir, "src", "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("A"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tool string
		args map[string]string
		want string
	}{
		{"read_file", map[string]string{"path": "src"}, "src is a directory (use list_dir)"},
		{"write_file", map[string]string{"path": "src", "content": "x"}, "src: is a directory"},
		{"list_dir", map[string]string{"path": "a.txt"}, "a.txt is not a directory (use read_file)"},
	} {
		r := run(t, b, tc.tool, tc.args)
		if r.Status != kernel.ToolError || !strings.Contains(r.Content, tc.want) {
			t.Errorf("%s %v: %+v; want an error saying %q", tc.tool, tc.args, r, tc.want)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "src", "keep")); err != nil || !st.IsDir() {
		t.Errorf("the directory changed: %v", err)
	}
}

// TestListEmptyDirectorySaysSo: listing a directory with nothing in it says
// so, rather than answering with no text at all.
func TestListEmptyDirectorySaysSo(t *testing.T) {
	b, dir := newBox(t, false)
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := run(t, b, "list_dir", map[string]string{"path": "empty"}); r.Status != kernel.ToolOK || r.Content != "(empty directory)" {
		t.Errorf("list_dir of an empty directory: %+v", r)
	}
}
