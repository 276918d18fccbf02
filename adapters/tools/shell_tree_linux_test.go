package tools

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/proctest"
	"github.com/escapement/escapement/kernel"
)

// hang bounds every wait in these tests: never a timing assertion, only the
// point at which a test that would otherwise hang gives up.
const hang = 30 * time.Second

// escapee is shell text that starts `sleep SECONDS` in a new session
// (setsid: outside the call's process group), records its pid in FILE and
// waits for the record, so the command cannot end before the escape.
func escapee(file, seconds string) string {
	return `setsid sh -c 'echo $$ > ` + file + `; exec sleep ` + seconds + `' & while [ ! -s ` + file + ` ]; do sleep 0.01; done; `
}

// goneNow fails for every pid still running. Run has returned, and on
// Linux it returns only after the call's helper reaped the whole tree, so
// there is nothing to wait for.
func goneNow(t *testing.T, what string, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if proctest.Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("%s: process %d still running after the call returned", what, pid)
		}
	}
}

func runAsync(b *Box, ctx context.Context, command string) <-chan ports.ToolResult {
	done := make(chan ports.ToolResult, 1)
	go func() { done <- b.Run(ctx, call("shell", map[string]string{"command": command})) }()
	return done
}

func result(t *testing.T, done <-chan ports.ToolResult) ports.ToolResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(hang):
		t.Fatalf("shell call still running after %v", hang)
		return ports.ToolResult{}
	}
}

// TestShellKillsSetsidChildOnExit: `setsid sleep 7781 & sleep 0.5` used to
// leave the sleep running under init. A process that left the group is
// killed when the command ends, and the result says so.
func TestShellKillsSetsidChildOnExit(t *testing.T) {
	b, dir := newBox(t, true)
	r := result(t, runAsync(b, context.Background(), escapee("escaped", "7781")+"echo done"))
	esc := proctest.WaitPIDFile(t, filepath.Join(dir, "escaped"), hang)
	goneNow(t, "setsid child", esc)
	if r.Status != kernel.ToolOK || !strings.HasPrefix(r.Content, "exit status 0 in ") ||
		!strings.Contains(r.Content, "; killed 1 process it left running\n") || !strings.Contains(r.Content, "done") {
		t.Errorf("result %+v", r)
	}
}

// TestShellKillsSetsidChildOnCancel: the same on cancel, after a polite
// SIGINT that ends the command itself.
func TestShellKillsSetsidChildOnCancel(t *testing.T) {
	b, dir := newBox(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(b, ctx, escapee("escaped", "7782")+"sh -c 'echo $$ > pid; exec sleep 7783'")
	esc := proctest.WaitPIDFile(t, filepath.Join(dir, "escaped"), hang)
	proctest.WaitPIDFile(t, filepath.Join(dir, "pid"), hang)
	cancel()
	r := result(t, done)
	goneNow(t, "setsid child", esc)
	if r.Status != kernel.ToolCancelled || strings.Contains(r.Content, "SIGKILL") {
		t.Errorf("result %+v, want cancelled by SIGINT alone", r)
	}
}

// TestShellHardKillReachesWholeGroup: bash and two background sleeps (a
// group of three: `&` jobs of a non-interactive shell ignore SIGINT, and
// the trap makes bash ignore it too) and an escapee outside the group all
// outlast the SIGINT; the hard kill after the grace reaches every one.
func TestShellHardKillReachesWholeGroup(t *testing.T) {
	b, dir := newBox(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(b, ctx, `trap '' INT; sleep 7784 & echo $! > a; sleep 7785 & echo $! > b; `+
		escapee("escaped", "7786")+`echo $$ > pid; wait`)
	pids := map[string]int{}
	for _, f := range []string{"a", "b", "escaped", "pid"} {
		pids[f] = proctest.WaitPIDFile(t, filepath.Join(dir, f), hang)
	}
	if m, _ := proctest.GroupMembers(pids["pid"]); len(m) != 3 {
		t.Fatalf("group %d has %v, want bash and two sleeps", pids["pid"], m)
	}
	cancel()
	r := result(t, done)
	goneNow(t, "group member", pids["pid"], pids["a"], pids["b"])
	goneNow(t, "setsid child", pids["escaped"])
	if r.Status != kernel.ToolCancelled || !strings.Contains(r.Content, "SIGINT sent to the process group, SIGKILL after 300ms") {
		t.Errorf("result %+v", r)
	}
}

// TestParallelShellsKillOnlyTheirOwn: two calls run at once; when the first
// ends, its escapee is killed and the second's is not, until the second
// call ends too.
func TestParallelShellsKillOnlyTheirOwn(t *testing.T) {
	b, dir := newBox(t, true)
	second := runAsync(b, context.Background(), escapee("escaped2", "7787")+`while [ ! -e go2 ]; do sleep 0.01; done`)
	esc2 := proctest.WaitPIDFile(t, filepath.Join(dir, "escaped2"), hang)
	result(t, runAsync(b, context.Background(), escapee("escaped1", "7788")+"echo first"))
	goneNow(t, "the first call's escapee", proctest.WaitPIDFile(t, filepath.Join(dir, "escaped1"), hang))
	if !proctest.Alive(esc2) {
		t.Fatal("the first call's end killed the second call's escapee")
	}
	if err := os.WriteFile(filepath.Join(dir, "go2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	result(t, second)
	goneNow(t, "the second call's escapee", esc2)
}

// TestShellTreeDiesWithEscapement: when escapement itself is killed with
// SIGKILL mid-call, the call's whole tree dies with it, the setsid
// escapee included (the helper's parent-death signal).
func TestShellTreeDiesWithEscapement(t *testing.T) {
	dir := t.TempDir()
	self := exec.Command(os.Args[0], "-test.run=^$")
	self.Env = append(os.Environ(), roleEnv+"=shell", "TOOLS_TEST_DIR="+dir,
		"TOOLS_TEST_COMMAND="+escapee("escaped", "7789")+"echo $$ > pid; sleep 7790")
	if err := self.Start(); err != nil {
		t.Fatal(err)
	}
	esc := proctest.WaitPIDFile(t, filepath.Join(dir, "escaped"), hang)
	leader := proctest.WaitPIDFile(t, filepath.Join(dir, "pid"), hang)
	if err := self.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = self.Wait()
	// The tree dies asynchronously after its parent: wait, bounded.
	for _, pid := range []int{leader, esc} {
		if err := proctest.WaitGone(pid, hang); err != nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Error(err)
		}
	}
}

// TestShellKillsEveryLeftover: two processes that left the group are both
// killed when the command ends, and the result counts them.
func TestShellKillsEveryLeftover(t *testing.T) {
	b, dir := newBox(t, true)
	r := result(t, runAsync(b, context.Background(), escapee("escaped1", "7789")+escapee("escaped2", "7790")+"echo done"))
	goneNow(t, "setsid child",
		proctest.WaitPIDFile(t, filepath.Join(dir, "escaped1"), hang),
		proctest.WaitPIDFile(t, filepath.Join(dir, "escaped2"), hang))
	if r.Status != kernel.ToolOK || !strings.Contains(r.Content, "; killed 2 processes it left running\n") || !strings.Contains(r.Content, "done") {
		t.Errorf("result %+v", r)
	}
}

// TestKillAllReachesRunningShells: KillAll (the CLI's hard exit) kills
// every running call's tree at once, without a cancel and without waiting
// for the grace: a command that ignores SIGINT ends, and so does what it
// started.
func TestKillAllReachesRunningShells(t *testing.T) {
	b, dir := newBox(t, true)
	done := runAsync(b, context.Background(), `trap '' INT; sleep 7791 & echo $! > a; echo $$ > pid; wait`)
	pids := []int{proctest.WaitPIDFile(t, filepath.Join(dir, "a"), hang), proctest.WaitPIDFile(t, filepath.Join(dir, "pid"), hang)}
	b.KillAll()
	r := result(t, done)
	goneNow(t, "the killed call's process", pids...)
	if r.Status != kernel.ToolOK || !strings.HasPrefix(r.Content, "killed by signal killed in ") {
		t.Errorf("result %+v", r)
	}
}

// TestKillAllReachesStartingShells: a shell call KillAll did not find
// running — it was still starting (its process had begun but was not yet
// registered), or came later — is killed as soon as it runs: KillAll is
// the hard exit, and nothing may outlive it.
func TestKillAllReachesStartingShells(t *testing.T) {
	b, _ := newBox(t, true)
	b.KillAll()
	r := result(t, runAsync(b, context.Background(), `trap '' INT; sleep 7792 & wait`))
	if r.Status != kernel.ToolOK || !strings.HasPrefix(r.Content, "killed by signal killed in ") {
		t.Errorf("result %+v", r)
	}
}
