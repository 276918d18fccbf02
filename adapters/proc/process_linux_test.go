package proc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/internal/proctest"
	"go.uber.org/goleak"
)

// TestMain refuses to run the tests in a process started as a helper that
// init did not take for one (a broken helper check): its tests would start
// helpers that are this test binary again, each running the tests again —
// a fork bomb that outlives the test run, since each helper leads its own
// process group. Refused, the helper ends and Start says so.
func TestMain(m *testing.M) {
	if os.Args[0] == helperArg0 {
		os.Exit(125)
	}
	goleak.VerifyTestMain(m)
}

// hang bounds every wait below: it is never a timing assertion, only the
// point at which a test that would otherwise hang gives up.
const hang = 30 * time.Second

// escapee is shell text that starts a process in a new session (outside the
// command's process group), records its pid in FILE and waits until the
// record is complete, so the command can only end after the escape.
func escapee(file, sleep string) string {
	return `setsid sh -c 'echo $$ > ` + file + `; exec sleep ` + sleep + `' & while [ ! -s ` + file + ` ]; do sleep 0.01; done; `
}

type started struct {
	*Process
	dir string
	out *bytes.Buffer
}

func startScript(t *testing.T, ctx context.Context, script string, opt Options) started {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	p, err := Start(ctx, cmd, opt)
	if err != nil {
		t.Fatal(err)
	}
	return started{p, dir, out}
}

func (s started) pid(t *testing.T, name string) int {
	t.Helper()
	return proctest.WaitPIDFile(t, filepath.Join(s.dir, name), hang)
}

func (s started) wait(t *testing.T) Exit {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(hang):
		t.Fatalf("Wait still blocked after %v", hang)
	}
	exit, err := s.Wait()
	if err != nil {
		t.Fatalf("Wait: %v (output %q)", err, s.out)
	}
	return exit
}

// gone fails the test for every pid still running. Wait has returned, and
// it returns only after the helper reaped the whole tree, so there is
// nothing to wait for here.
func gone(t *testing.T, what string, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if proctest.Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("%s: process %d still running after Wait returned", what, pid)
		}
	}
}

// TestWaitKillsWhatTheCommandLeft: a background job (same group) and a
// setsid escapee (new session) are both killed when the command exits by
// itself, before Wait returns; Exit says how the command ended and counts
// the two.
func TestWaitKillsWhatTheCommandLeft(t *testing.T) {
	s := startScript(t, context.Background(), `sleep 7701 & echo $! > bg; `+escapee("escaped", "7702")+`exit 3`, Options{})
	bg, esc := s.pid(t, "bg"), s.pid(t, "escaped")
	exit := s.wait(t)
	if exit != (Exit{Code: 3, Leftover: 2}) || exit.String() != "exit status 3" {
		t.Errorf("exit %+v (%s), want status 3 with 2 left over", exit, exit)
	}
	gone(t, "background job", bg)
	gone(t, "setsid escapee", esc)
}

// TestCancelHardKillReachesEveryone: a group of several processes that all
// ignore SIGINT (bash and its background jobs), plus an escapee outside the
// group: after the grace, the hard kill reaches every one of them.
func TestCancelHardKillReachesEveryone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startScript(t, ctx, `trap '' INT; sleep 7711 & echo $! > a; sleep 7712 & echo $! > b; `+
		escapee("escaped", "7713")+`echo $$ > pid; wait`, Options{KillGrace: 100 * time.Millisecond})
	a, b, esc, leader := s.pid(t, "a"), s.pid(t, "b"), s.pid(t, "escaped"), s.pid(t, "pid")
	if m, _ := proctest.GroupMembers(leader); len(m) < 3 {
		t.Fatalf("group %d has %v, want bash and two sleeps", leader, m)
	}
	cancel()
	exit := s.wait(t)
	if !exit.Cancelled || !exit.Killed || exit.Signal != syscall.SIGKILL {
		t.Errorf("exit %+v, want cancelled and killed by SIGKILL", exit)
	}
	gone(t, "group member", leader, a, b)
	gone(t, "setsid escapee", esc)
}

// TestCancelInterruptsGroup: a command that stops on SIGINT is not killed;
// what it left running (an escapee) still is.
func TestCancelInterruptsGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The foreground child writes the pid file itself, so the SIGINT finds
	// bash waiting for it (and bash then ends by the same signal).
	s := startScript(t, ctx, escapee("escaped", "7721")+`sh -c 'echo $$ > pid; exec sleep 7722'`, Options{KillGrace: hang})
	esc, _ := s.pid(t, "escaped"), s.pid(t, "pid")
	cancel()
	exit := s.wait(t)
	if !exit.Cancelled || exit.Killed || exit.Signal != syscall.SIGINT || exit.Leftover != 1 {
		t.Errorf("exit %+v, want cancelled, ended by SIGINT, 1 left over", exit)
	}
	gone(t, "setsid escapee", esc)
}

// TestKillNow: Kill does not wait for a context or a grace.
func TestKillNow(t *testing.T) {
	s := startScript(t, context.Background(), `trap '' INT; `+escapee("escaped", "7731")+`echo $$ > pid; sleep 7732`, Options{})
	esc, _ := s.pid(t, "escaped"), s.pid(t, "pid")
	s.Kill()
	if exit := s.wait(t); !exit.Killed || exit.Cancelled || exit.Signal != syscall.SIGKILL {
		t.Errorf("exit %+v, want killed by SIGKILL", exit)
	}
	gone(t, "setsid escapee", esc)
	s.Kill() // a finished process: nothing happens
}

// TestParallelCommandsKillOnlyTheirOwn: when one of two running commands
// ends, only its own escapee is killed; the other's runs until its command
// ends. Each helper adopts only its own command's orphans.
func TestParallelCommandsKillOnlyTheirOwn(t *testing.T) {
	script := escapee("escaped", "7741") + `while [ ! -e go ]; do sleep 0.01; done`
	a := startScript(t, context.Background(), script, Options{})
	b := startScript(t, context.Background(), script, Options{})
	escA, escB := a.pid(t, "escaped"), b.pid(t, "escaped")
	if err := os.WriteFile(filepath.Join(a.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a.wait(t)
	gone(t, "first command's escapee", escA)
	if !proctest.Alive(escB) {
		t.Error("the second command's escapee was killed when the first command ended")
	}
	if err := os.WriteFile(filepath.Join(b.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.wait(t)
	gone(t, "second command's escapee", escB)
}

// TestUnrelatedChildUntouched: a child this process started itself, not
// through Start, is neither killed nor reaped behind os/exec's back.
func TestUnrelatedChildUntouched(t *testing.T) {
	own := exec.Command("sleep", "7751")
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	s := startScript(t, context.Background(), escapee("escaped", "7752")+`exit 0`, Options{})
	s.pid(t, "escaped")
	s.wait(t)
	if !proctest.Alive(own.Process.Pid) {
		t.Error("a process started outside proc was killed")
	}
	_ = own.Process.Kill()
	if err := own.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("os/exec's own wait: %v, want signal: killed", err)
	}
}

// TestDoubleForkWithClearedEnvironment: a daemon-style double fork in a new
// session with an empty environment (nothing to recognise it by) is still
// adopted and killed.
func TestDoubleForkWithClearedEnvironment(t *testing.T) {
	s := startScript(t, context.Background(),
		`setsid env -i /bin/sh -c '/bin/sh -c "echo \$\$ > escaped; exec sleep 7761" &'; while [ ! -s escaped ]; do sleep 0.01; done`, Options{})
	esc := s.pid(t, "escaped")
	// The middle process may not have exited yet when bash does: 1 or 2.
	if exit := s.wait(t); exit.Leftover < 1 || exit.Leftover > 2 {
		t.Errorf("exit %+v, want 1 or 2 left over", exit)
	}
	gone(t, "double-forked daemon", esc)
}

// TestOrphansReapedWhileRunning: orphans that exit while the command still
// runs are reaped at once by the helper that adopted them, not left as
// zombies until the end.
func TestOrphansReapedWhileRunning(t *testing.T) {
	s := startScript(t, context.Background(),
		`for i in 1 2 3 4 5 6 7 8; do (sh -c 'exit 0' &); done; echo $$ > pid; while [ ! -e go ]; do sleep 0.01; done`, Options{})
	helper := proctest.Parent(s.pid(t, "pid"))
	deadline := time.Now().Add(hang)
	for {
		live, zombies, err := proctest.Children(helper)
		if err != nil {
			t.Fatal(err)
		}
		if len(zombies) == 0 && len(live) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("helper %d still has children %v and zombies %v after %v", helper, live, zombies, hang)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s.wait(t)
}

// TestStdioAndEnvironmentThroughHelper: stdin, stdout, an extra file and
// the working directory reach the command as exec.Cmd would pass them; its
// environment is the policy's, without the helper's marker.
func TestStdioAndEnvironmentThroughHelper(t *testing.T) {
	dir := t.TempDir()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command("sh", "-c", `cat; pwd; echo extra >&3; env | sort`)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "A=1", "MY_TOKEN=x", "GH_TOKEN=y", APIKeyVar + "=sk"}
	cmd.Stdin = strings.NewReader("ping\n")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.ExtraFiles = []*os.File{w}
	p, err := Start(context.Background(), cmd, Options{Env: EnvPolicy{Pass: []string{"GH_TOKEN"}}})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	extra, _ := io.ReadAll(r)
	if exit, err := p.Wait(); err != nil || exit.Code != 0 {
		t.Fatalf("exit %+v, %v", exit, err)
	}
	got := out.String()
	for _, want := range []string{"ping\n" + dir + "\n", "A=1\n", "GH_TOKEN=y\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output %q lacks %q", got, want)
		}
	}
	for _, bad := range []string{"MY_TOKEN", APIKeyVar, helperEnv} {
		if strings.Contains(got, bad) {
			t.Errorf("output %q holds %s", got, bad)
		}
	}
	if string(extra) != "extra\n" {
		t.Errorf("extra file got %q", extra)
	}
}

func TestStartErrors(t *testing.T) {
	if _, err := Start(context.Background(), exec.Command("/nonexistent/prog"), Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing program: %v, want ErrNotExist", err)
	}
	if _, err := Start(context.Background(), exec.Command(t.TempDir()), Options{}); !errors.Is(err, syscall.EACCES) {
		t.Errorf("a directory as program: %v, want EACCES", err)
	}
	withAttr := exec.Command("true")
	withAttr.SysProcAttr = &syscall.SysProcAttr{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, tc := range []struct {
		cmd  *exec.Cmd
		opt  Options
		want string
	}{
		{withAttr, Options{}, "SysProcAttr must be nil"},
		{exec.CommandContext(ctx, "true"), Options{}, "Start's context cancels it"},
		{exec.Command("true"), Options{Env: EnvPolicy{Pass: []string{APIKeyVar}}}, "cannot be passed"},
	} {
		if _, err := Start(context.Background(), tc.cmd, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.cmd, err, tc.want)
		}
	}
}

// BenchmarkStart is the cost of the helper: `true` run through Start and
// Wait, against exec.Cmd.Run.
func BenchmarkStart(b *testing.B) {
	b.Run("exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proc", func(b *testing.B) {
		for b.Loop() {
			p, err := Start(context.Background(), exec.Command("true"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
