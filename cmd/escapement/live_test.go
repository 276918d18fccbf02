package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/internal/proctest"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

const testKey = "sk-e2e-DO-NOT-LEAK-4f9c2a7b"

// TestMain makes the environment the tests' own (hermeticEnv), and
// removes the binary the end-to-end tests built.
func TestMain(m *testing.M) {
	envDir, err := os.MkdirTemp("", "escapement-env-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	goEnv = hermeticEnv(envDir)
	code := m.Run()
	os.RemoveAll(envDir)
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// goEnv is the environment the tests were started with: go build's.
var goEnv []string

// built is the CLI binary, built once per test run (the end-to-end tests
// run the real binary: real signals, real process groups, real exit codes).
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// buildBinary returns the CLI binary, building it on first use.
func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	built.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			built.err = fmt.Errorf("the end-to-end tests build the binary and need go on PATH: %w", err)
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "escapement-bin-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "escapement")
		build := exec.Command(goBin, "build", "-o", built.bin, ".")
		build.Env = goEnv
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// syncBuffer is a bytes.Buffer safe for a copier goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a running binary.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan struct{}
	code   int
}

func startBinary(t *testing.T, bin string, srv *fakeopenai.Server, dir string, args ...string) *proc {
	t.Helper()
	return startBinaryEnv(t, bin, srv, dir, nil, args...)
}

// startBinaryEnv is startBinary with more environment variables.
func startBinaryEnv(t *testing.T, bin string, srv *fakeopenai.Server, dir string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = binEnv(dir, append([]string{"OPENAI_API_KEY=" + testKey, "OPENAI_BASE_URL=" + srv.BaseURL()}, env...)...)
	p := &proc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			p.code = 0
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
		default:
			p.code = -1
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits (generously) for the process to exit and returns its code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(30 * time.Second):
		t.Fatalf("process did not exit\nstdout: %s\nstderr: %s", p.stdout, p.stderr)
		return 0
	}
}

// eventually polls cond (generous bound: these wait for real processes).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readSession(t *testing.T, path string) []session.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []session.Record
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var r session.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("session line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

func checkNoUIText(t *testing.T, files ...string) {
	t.Helper()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ui := range kernel.UIStrings() {
			if bytes.Contains(data, []byte(ui)) {
				t.Errorf("%s contains the UI string %q (I12)", f, ui)
			}
		}
	}
}

// TestRunInterruptE2E is F1 in the real world: `escapement run` against a
// slow stream, SIGINT after the first tokens → exit 130, the partial text on
// stdout, the connection closed on the server's side, and no further request.
func TestRunInterruptE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Forever(ctx, "tok ", 20*time.Millisecond)
	})
	t.Cleanup(srv.Close) // after the binary is killed (cleanups run last-in first-out)
	dir := t.TempDir()
	sess, tr := filepath.Join(dir, "s.jsonl"), filepath.Join(dir, "t.jsonl")
	p := startBinary(t, bin, srv, dir, "run", "count for me", "--session", sess, "--trace", tr)
	eventually(t, "the first tokens on stdout", func() bool { return strings.Contains(p.stdout.String(), "tok tok ") })
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d, want 130\nstderr: %s", code, p.stderr)
	}
	out := p.stdout.String()
	if !strings.HasPrefix(out, "tok tok ") {
		t.Errorf("stdout %q lacks the partial text", out)
	}
	if !strings.Contains(p.stderr.String(), kernel.UIInterrupted) {
		t.Errorf("stderr lacks the UI text: %s", p.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want exactly 1 (no request after the interrupt, F1)", len(reqs))
	}
	// The process has exited, so its socket is closed; the handler saw it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.WaitFor(ctx, func(rs []fakeopenai.Request) bool { return !rs[0].Closed.IsZero() }); err != nil {
		t.Error("the server never saw the connection close")
	}
	// The session has the partial answer (flagged), the marker, and the
	// turn's end; no UI text anywhere in the files.
	recs := readSession(t, sess)
	last := recs[len(recs)-1]
	if last.Type != "turn_end" || last.Outcome != kernel.OutcomeInterrupted || last.Reason != kernel.ReasonUserCancel {
		t.Errorf("last session record %+v", last)
	}
	var partial, marker bool
	for _, r := range recs {
		if r.Message != nil {
			partial = partial || (r.Message.Partial && strings.HasPrefix(r.Message.Content, "tok tok "))
			marker = marker || r.Message.Marker
		}
	}
	if !partial || !marker {
		t.Errorf("session lacks the partial text (%v) or the marker (%v)", partial, marker)
	}
	checkNoUIText(t, sess, tr)
	f, err := os.Open(tr)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	sc.Scan()
	h, err := trace.ReadHeader(sc.Bytes())
	if err != nil || h.Source != "live" || h.Limits != kernel.DefaultLimits() {
		t.Errorf("trace header %+v (%v)", h, err)
	}
	var lastRec trace.Record
	for sc.Scan() {
		if lastRec, err = trace.ReadRecord(sc.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	if lastRec.Type != "end" {
		t.Errorf("trace does not end with an end record: %+v", lastRec)
	}
}

// TestRunInterruptShellE2E: the interrupt arrives while a shell tool runs a
// `sleep 30` that ignores SIGINT: the whole process group is gone within
// the grace period (SIGINT, then SIGKILL), the run exits 130, and no request
// follows the interrupt.
func TestRunInterruptShellE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text("Running it.")
		args, _ := json.Marshal(map[string]string{"command": "trap '' INT; echo $$ > pid; sleep 30 & sleep 30"})
		_ = w.Call(0, "call_sh", "shell", string(args), 9)
		_ = w.End("tool_calls")
	})
	t.Cleanup(srv.Close) // after the binary is killed (cleanups run last-in first-out)
	dir := t.TempDir()
	const grace = 4 * time.Second // the stubborn shell dies at KillGrace = grace/2: 2s of slack on a loaded machine
	p := startBinary(t, bin, srv, dir, "run", "sleep", "--allow-shell", "--workspace", dir,
		"--grace", grace.String(), "--session", filepath.Join(dir, "s.jsonl"))
	pgid := proctest.WaitPIDFile(t, filepath.Join(dir, "pid"), 20*time.Second)
	eventually(t, "both sleeps running", func() bool {
		m, _ := proctest.GroupMembers(pgid)
		return len(m) >= 3 // bash and two sleeps
	})
	sigAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	goneAt, err := proctest.WaitGroupGone(pgid, 20*time.Second)
	if err != nil {
		t.Fatalf("after SIGINT: %v", err)
	}
	if code := p.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d, want 130\nstderr: %s", code, p.stderr)
	}
	t.Logf("SIGINT → process group gone: %v; grace %v", goneAt.Sub(sigAt), grace)
	if d := goneAt.Sub(sigAt); d > grace {
		t.Errorf("the process group outlived the grace period: gone %v after SIGINT", d)
	}
	if m, _ := proctest.GroupMembers(pgid); len(m) != 0 {
		t.Errorf("process group %d has %v after exit", pgid, m)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1 (F1)", n)
	}
	if !strings.Contains(p.stderr.String(), "[main] shell ") || !strings.Contains(p.stderr.String(), kernel.UIInterrupted) {
		t.Errorf("stderr: %s", p.stderr)
	}
	if !strings.Contains(p.stdout.String(), "Running it.") {
		t.Errorf("stdout %q", p.stdout)
	}
}

// TestRunSecondInterruptE2E: a second Ctrl-C while the tree is still
// settling (a shell ignoring SIGINT, a grace so long that the first Ctrl-C
// alone could not end the run within the test) exits at once with 130, and
// the shell's process group is killed rather than left behind.
func TestRunSecondInterruptE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		args, _ := json.Marshal(map[string]string{"command": "trap '' INT; echo $$ > pid; sleep 60"})
		_ = w.Call(0, "call_sh", "shell", string(args), 50)
		_ = w.End("tool_calls")
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "run", "sleep", "--allow-shell", "--workspace", dir,
		"--grace", "10m", "--session", filepath.Join(dir, "s.jsonl"))
	pgid := proctest.WaitPIDFile(t, filepath.Join(dir, "pid"), 20*time.Second)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The first interrupt is handled (the call is answered cancelled; the
	// shell gets SIGINT and ignores it: it would end by itself after a
	// minute, and SIGKILL would follow only after 5 minutes, grace/2)
	// before the second is sent: two signals sent at once can arrive as one.
	eventually(t, "the first interrupt's cancel", func() bool {
		return strings.Contains(p.stderr.String(), "← shell cancelled (user_cancel)")
	})
	select {
	case <-p.done:
		t.Fatalf("exited after the first Ctrl-C (code %d); the shell ignores SIGINT and sleeps a minute", p.code)
	default:
	}
	secondAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	const bound = 5 * time.Second // generous: the hard exit does not wait for anything
	select {
	case <-p.done:
	case <-time.After(bound):
		t.Fatalf("still running %v after the second Ctrl-C\nstderr: %s", bound, p.stderr)
	}
	t.Logf("second Ctrl-C → exit: %v", time.Since(secondAt))
	if p.code != exitInterrupted {
		t.Fatalf("exit %d, want 130\nstderr: %s", p.code, p.stderr)
	}
	if _, err := proctest.WaitGroupGone(pgid, bound); err != nil {
		t.Fatalf("after the hard exit: %v", err)
	}
}

// TestAPIKeyNeverPrinted: a run with --json --trace (and debug logs) that
// uses a tool, meets a 429 whose body echoes the key, a run whose 401
// echoes it, and a run whose shell echoes $OPENAI_API_KEY: the key is in no
// output and no file, and never reaches the shell (so neither the model):
// the shell gets no secret-looking variable but the one --tool-env names.
func TestAPIKeyNeverPrinted(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		key := strings.TrimPrefix(r.Auth, "Bearer ")
		switch {
		case r.Body.FirstUser() == "shell" && r.Body.Last().Role == "tool":
			_ = w.Answer("seen", 4)
		case r.Body.FirstUser() == "shell":
			args, _ := json.Marshal(map[string]string{"command": `echo "key=$OPENAI_API_KEY tok=$MY_TOKEN pass=$PASSED_TOKEN"`})
			_ = w.Call(0, "c1", "shell", string(args), 8)
			_ = w.End("tool_calls")
		case r.Body.FirstUser() == "unauthorized":
			w.Status(401, `{"error":{"message":"Incorrect API key provided: `+key+`","type":"invalid_request_error"}}`)
		case r.N == 1:
			_ = w.Call(0, "c1", "list_dir", `{"path":"."}`, 4)
			_ = w.End("tool_calls")
		case r.N == 2:
			w.Status(429, `{"error":{"message":"slow down, `+key+`"}}`, "Retry-After", "0.01")
		default:
			_ = w.Answer("all good", 3)
		}
	})
	t.Cleanup(srv.Close) // after the binary is killed (cleanups run last-in first-out)
	dir := t.TempDir()
	files := func(name string) (string, string) {
		return filepath.Join(dir, name+"-session.jsonl"), filepath.Join(dir, name+"-trace.jsonl")
	}
	s1, t1 := files("ok")
	p := startBinary(t, bin, srv, dir, "--log-level", "debug", "run", "look around", "--json", "--trace", t1, "--session", s1, "--workspace", dir)
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	s2, t2 := files("unauth")
	q := startBinary(t, bin, srv, dir, "--log-level", "debug", "run", "unauthorized", "--json", "--trace", t2, "--session", s2)
	if code := q.wait(t); code != exitCheckFailed {
		t.Fatalf("401 run: exit %d, want 1\nstderr: %s", code, q.stderr)
	}
	if got := srv.Requests()[0].Auth; got != "Bearer "+testKey {
		t.Fatalf("the key was not sent: %q", got)
	}
	s3, t3 := files("shell")
	sh := startBinaryEnv(t, bin, srv, dir, []string{"MY_TOKEN=my-token-value", "PASSED_TOKEN=passed-value"},
		"--log-level", "debug", "run", "shell", "--allow-shell", "--tool-env", "PASSED_TOKEN", "--json", "--trace", t3, "--session", s3, "--workspace", dir)
	if code := sh.wait(t); code != exitOK {
		t.Fatalf("shell run: exit %d\nstderr: %s", code, sh.stderr)
	}
	var toolResult string
	for _, r := range srv.Requests() {
		if r.Body.FirstUser() == "shell" && r.Body.Last().Role == "tool" {
			toolResult = r.Body.Last().Content
		}
	}
	if !strings.Contains(toolResult, "key= tok= pass=passed-value") {
		t.Errorf("the shell's environment: its output reached the model as %q; want no key, no MY_TOKEN, PASSED_TOKEN passed", toolResult)
	}
	outputs := map[string]string{"stdout": p.stdout.String(), "stderr": p.stderr.String(), "401 stdout": q.stdout.String(), "401 stderr": q.stderr.String(),
		"shell stdout": sh.stdout.String(), "shell stderr": sh.stderr.String(), "shell tool result": toolResult}
	for _, f := range []string{s1, t1, s2, t2, s3, t3} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		outputs[f] = string(b)
	}
	for name, text := range outputs {
		if strings.Contains(text, testKey) {
			t.Errorf("%s contains the API key", name)
		}
	}
	// The echoed key was there to leak: the redaction is what stopped it.
	if !strings.Contains(outputs[t2], "[redacted]") || !strings.Contains(outputs["stderr"], "retry") {
		t.Errorf("expected the redacted 401 in the trace and a retry on stderr\ntrace: %s\nstderr: %s", outputs[t2], outputs["stderr"])
	}
	// --json: stdout is the protocol's events only, each a valid line.
	if _, ok := lastOf(jsonRun(t, outputs["stdout"]), protocol.TypeTurnEnded, "main"); !ok {
		t.Error("no turn_ended event on stdout")
	}
}

// TestChatE2E drives `escapement chat` through its stdin: a turn, an
// interjection that cuts a running stream, a /cancel, and then --resume in
// a new process (after a simulated crash mid-turn) continuing the history.
func TestChatE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		last := r.Body.Last()
		if last.Role == "user" && strings.HasPrefix(last.Content, "slow") {
			w.Forever(ctx, "slowly ", 20*time.Millisecond)
			return
		}
		_ = w.Answer(fmt.Sprintf("answer to %q (%d messages)", last.Content, len(r.Body.Messages)), 5)
	})
	t.Cleanup(srv.Close) // after the binary is killed (cleanups run last-in first-out)
	dir := t.TempDir()
	sess := filepath.Join(dir, "chat.jsonl")
	p := startBinary(t, bin, srv, dir, "chat", "--session", sess, "--system", "be terse", "--while-busy", "interject")
	say := func(line string) {
		t.Helper()
		if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	// The prompt ("> " on stderr) is printed at the start and after every
	// turn: waiting for it orders the lines after the turns, so the next
	// line starts a turn rather than interjecting.
	prompts := func(n int) func() bool {
		return func() bool { return strings.Count(p.stderr.String(), "> ") >= n }
	}
	say("hello")
	eventually(t, "the first answer", func() bool { return strings.Contains(p.stdout.String(), `answer to "hello" (2 messages)`) })
	eventually(t, "the prompt after the first turn", prompts(2))
	say("slow one")
	eventually(t, "the slow stream", func() bool { return strings.Contains(p.stdout.String(), "slowly slowly ") })
	say("interjected")
	eventually(t, "the answer to the interjection", func() bool {
		return strings.Contains(p.stdout.String(), `answer to "interjected"`)
	})
	eventually(t, "the prompt after the second turn", prompts(3))
	say("slow two")
	eventually(t, "the second slow stream", func() bool { return len(srv.Requests()) == 4 && strings.Count(p.stdout.String(), "slowly") > 4 })
	say("/cancel")
	eventually(t, "the UI text", func() bool { return strings.Contains(p.stderr.String(), kernel.UIInterrupted) })
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 || reqs[1].Closed.IsZero() || reqs[3].Closed.IsZero() {
		t.Fatalf("%d requests; the slow streams' connections closed: %v %v", len(reqs), !reqs[1].Closed.IsZero(), !reqs[3].Closed.IsZero())
	}
	// The interjection restarted the request with the partial text and the
	// user's line: system, hello, answer, slow one, partial, interjected.
	if m := reqs[2].Body.Messages; len(m) != 6 || m[4].Role != "assistant" || !strings.HasPrefix(m[4].Content, "slowly") || m[5].Content != "interjected" {
		t.Errorf("request after the interjection: %+v", m)
	}
	recs := readSession(t, sess)
	var ends []kernel.Outcome
	for _, r := range recs {
		if r.Type == "turn_end" {
			ends = append(ends, r.Outcome)
		}
	}
	if fmt.Sprint(ends) != "[completed completed interrupted]" {
		t.Errorf("turn ends %v", ends)
	}
	checkNoUIText(t, sess)

	// A crash in the middle of a turn: a message without its turn_end and
	// a torn line. Resuming drops both and continues from the last turn.
	f, err := os.OpenFile(sess, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "%s\n{\"type\":\"mess", `{"type":"message","message":{"role":"user","content":"lost in the crash"}}`)
	f.Close()
	q := startBinary(t, bin, srv, dir, "chat", "--resume", sess, "--system", "be terse")
	if _, err := io.WriteString(q.stdin, "again\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the resumed answer", func() bool { return strings.Contains(q.stdout.String(), `answer to "again"`) })
	q.stdin.Close()
	if code := q.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, q.stderr)
	}
	if !strings.Contains(q.stderr.String(), "dropped 1 message(s) of a turn that never finished") {
		t.Errorf("resume stderr: %s", q.stderr)
	}
	m := srv.Requests()[4].Body.Messages
	var contents []string
	for _, x := range m {
		contents = append(contents, x.Role+":"+clip(x.Content, 12))
	}
	if len(m) != 11 || m[0].Content != "be terse" || m[len(m)-1].Content != "again" || strings.Contains(fmt.Sprint(contents), "lost in the crash") ||
		!strings.HasPrefix(m[len(m)-2].Content, kernel.MarkerPrefix) {
		t.Errorf("resumed request: %v", contents)
	}
	if _, err := session.Load(sess); err != nil {
		t.Errorf("the session does not load after the resumed run: %v", err)
	}
}
