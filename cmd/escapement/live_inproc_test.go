package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/internal/proctest"
	"github.com/escapement/escapement/kernel"
)

// TestLiveUsageErrors: bad flags and bad files are usage errors (exit 2)
// that name the flag, the file and the line.
func TestLiveUsageErrors(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", dir)
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"type":"session","format":1}`+"\n"+`{"type":"message","message":{"role":"user","content":"hi"}}`+"\n"+`{"type":"turn_end","turn":1}`+"\n"+`{"type":"mystery"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	invalid := filepath.Join(dir, "invalid.jsonl")
	if err := os.WriteFile(invalid, []byte(`{"type":"session","format":1}`+"\n"+`{"type":"message","message":{"role":"user","content":"hi"}}`+"\n"+`{"type":"message","message":{"role":"assistant"}}`+"\n"+`{"type":"turn_end","turn":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "existing.jsonl")
	if err := os.WriteFile(existing, []byte(`{"type":"session","format":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"run"}, "run needs a PROMPT"},
		{[]string{"run", "a", "b"}, "accepts at most 1 arg(s)"},
		{[]string{"run", "  "}, "the prompt is empty"},
		{[]string{"run", "hi", "--grace", "0s"}, "--grace must be positive"},
		{[]string{"run", "hi", "--stall-timeout", "-1s"}, "--stall-timeout must be positive"},
		{[]string{"run", "hi", "--max-requests", "0"}, "--max-requests must be in 1.."},
		{[]string{"run", "hi", "--max-depth", "-1"}, "--max-depth must be in 0.."},
		{[]string{"run", "hi", "--turn-timeout", "soon"}, `invalid argument "soon" for "--turn-timeout"`},
		{[]string{"run", "hi", "--workspace", filepath.Join(dir, "nope")}, "--workspace: workspace"},
		{[]string{"run", "hi", "--base-url", "ftp://example"}, "--base-url/--model: openai: base URL"},
		{[]string{"run", "hi", "--session", existing}, "already holds a session"},
		{[]string{"run", "hi", "--tool-env", "OPENAI_API_KEY"}, "--tool-env: OPENAI_API_KEY cannot be passed to tools"},
		{[]string{"run", "hi", "--tool-env", "A=B"}, `--tool-env: "A=B" is not a variable name`},
		{[]string{"run", "hi", "--workspace", "/"}, "--workspace: "},
		{[]string{"run", "hi", "--trace", filepath.Join(dir, "no", "such", "dir", "t.jsonl")}, "--trace:"},
		{[]string{"chat", "--resume", bad}, bad + ":4: unknown record type \"mystery\""},
		{[]string{"chat", "--resume", invalid}, invalid + ":3: empty assistant message"},
		{[]string{"chat", "--resume", filepath.Join(dir, "missing.jsonl")}, "--resume: open"},
		{[]string{"chat", "--resume", existing, "--session", bad}, "--session and --resume name different files"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, stderr, tc.msg)
		}
	}
}

// TestRunInProcess runs `escapement run` in-process (under -race): a tool
// call, its activity on stderr, the answer on stdout, the session file.
func TestRunInProcess(t *testing.T) {
	srv := endpoint(t, listDirThenAnswer("The workspace holds "))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	sess := filepath.Join(t.TempDir(), "state", "s.jsonl")
	code, out, stderr := runCLI(t, "run", "what is here?", "--workspace", dir, "--session", sess, "--system", "sys")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	if out != "Looking.\nThe workspace holds notes.txt (5 bytes)\n" {
		t.Errorf("stdout %q", out)
	}
	if !strings.Contains(stderr, `[main] list_dir {"path":"."}`) || !strings.Contains(stderr, "[main] ← list_dir ok") {
		t.Errorf("stderr %q", stderr)
	}
	ls, err := session.Load(sess)
	if err != nil {
		t.Fatal(err)
	}
	if ls.Turns != 1 || len(ls.History) != 5 || ls.History[0].Content != "sys" || ls.History[4].Role != kernel.RoleAssistant {
		t.Errorf("session: %d turns, history %+v", ls.Turns, ls.History)
	}
	if srv.Requests()[0].Auth != "" {
		t.Error("an Authorization header was sent without a key")
	}
}

// TestLiveTraceReplaysInSimulator: record real, replay simulated. A live run
// (against the loopback server, with a tool call and a resumed history)
// writes a trace that `escapement sim replay` reproduces byte for byte from
// its recorded events alone.
func TestLiveTraceReplaysInSimulator(t *testing.T) {
	endpoint(t, listDirThenAnswer("Found "))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	sess := filepath.Join(t.TempDir(), "s.jsonl")
	tr1 := filepath.Join(t.TempDir(), "first.jsonl")
	if code, _, errb := runCLI(t, "run", "what is here?", "--workspace", dir, "--session", sess, "--trace", tr1); code != exitOK {
		t.Fatalf("run: exit %d %s", code, errb)
	}
	// A resumed session: its trace header carries the seeded history.
	tr2 := filepath.Join(t.TempDir(), "second.jsonl")
	code, _, errb := runCLIWithInput(t, "again\n", "chat", "--resume", sess, "--workspace", dir, "--trace", tr2)
	if code != exitOK {
		t.Fatalf("chat: exit %d %s", code, errb)
	}
	for _, tr := range []string{tr1, tr2} {
		code, out, errb := runCLI(t, "sim", "replay", tr)
		if code != exitOK || !strings.Contains(out, "live trace") || !strings.Contains(out, "reproduced") {
			t.Fatalf("replay %s: exit %d\n%s%s", tr, code, out, errb)
		}
	}
}

// TestChatCtrlCInProcess drives chat's Ctrl-C handling in-process through an
// injected signal source and exit: a Ctrl-C cancels the running turn and
// returns to the prompt, one while idle only says how to quit, and a second
// one while a cancelled turn settles (a shell ignoring SIGINT, a 10m grace)
// kills the shell's group and exits 130 at once — through the injected exit,
// which leaves the test binary running. chat returns with its stdin still
// open: the reader it owns is stopped and joined.
func TestChatCtrlCInProcess(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		switch last := r.Body.Last(); {
		case last.Role == "user" && strings.HasPrefix(last.Content, "slow"):
			w.Forever(ctx, "tok ", 10*time.Millisecond)
		case last.Role == "user" && strings.HasPrefix(last.Content, "shell"):
			args, _ := json.Marshal(map[string]string{"command": "trap '' INT; echo $$ > pid; sleep 60"})
			_ = w.Call(0, "call_sh", "shell", string(args), 5)
			_ = w.End("tool_calls")
		default:
			_ = w.Answer("done", 2)
		}
	})
	dir := t.TempDir()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdinR.Close(); stdinW.Close() })
	say := func(line string) {
		t.Helper()
		if _, err := stdinW.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	sigs := make(chan os.Signal)
	interrupt := func() {
		t.Helper()
		select {
		case sigs <- os.Interrupt:
		case <-time.After(5 * time.Second):
			t.Fatal("chat did not take the interrupt")
		}
	}
	exits := make(chan int, 2)
	out, errb := &syncBuffer{}, &syncBuffer{}
	code := make(chan int, 1)
	go func() { // owned: the test receives from code before it ends
		code <- runWith(context.Background(),
			[]string{"chat", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir, "--allow-shell", "--grace", "10m"},
			streams{in: stdinR, out: out, err: errb},
			func(c int) { exits <- c },
			func() (<-chan os.Signal, func()) { return sigs, func() {} })
	}()
	t.Cleanup(func() {
		select {
		case <-code:
		case <-time.After(30 * time.Second):
			t.Errorf("chat never returned\nstderr: %s", errb)
		}
	})
	prompts := func(n int) func() bool {
		return func() bool { return strings.Count(errb.String(), "> ") >= n }
	}

	// 1. Ctrl-C cancels a streaming turn and returns to the prompt.
	say("slow please")
	eventually(t, "the stream", func() bool { return strings.Contains(out.String(), "tok tok ") })
	interrupt()
	eventually(t, "the prompt after the cancelled turn", prompts(2))
	if !strings.Contains(errb.String(), kernel.UIInterrupted) {
		t.Errorf("stderr lacks the UI text: %s", errb)
	}
	// 2. Ctrl-C while idle only explains.
	interrupt()
	eventually(t, "the idle hint", func() bool { return strings.Contains(errb.String(), "no turn is running") })
	// 3. A turn that settles slowly: the first Ctrl-C cancels it, the second
	// exits at once.
	say("shell please")
	pgid := proctest.WaitPIDFile(t, filepath.Join(dir, "pid"), 20*time.Second)
	interrupt()
	time.Sleep(200 * time.Millisecond)
	select {
	case c := <-exits:
		t.Fatalf("exit %d after the first Ctrl-C of the turn", c)
	case c := <-code:
		t.Fatalf("chat returned %d after the first Ctrl-C of the turn\nstderr: %s", c, errb)
	default:
	}
	secondAt := time.Now()
	interrupt()
	select {
	case c := <-exits:
		if c != exitInterrupted {
			t.Errorf("hard exit %d, want 130", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no hard exit 5s after the second Ctrl-C\nstderr: %s", errb)
	}
	select {
	case c := <-code:
		if c != exitInterrupted {
			t.Errorf("chat returned %d, want 130\nstderr: %s", c, errb)
		}
		code <- c // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatalf("chat did not return 10s after the hard exit (stdin is still open)\nstderr: %s", errb)
	}
	t.Logf("second Ctrl-C → chat returned: %v", time.Since(secondAt))
	if _, err := proctest.WaitGroupGone(pgid, 5*time.Second); err != nil {
		t.Errorf("after the hard exit: %v", err)
	}
	if len(exits) != 0 {
		t.Errorf("more than one hard exit")
	}
}

// TestSessionWriteFailureSaidOnce: when the session file fails mid-run (a
// disk that fills up after the header), the user is told once that the run
// goes on without a transcript (not once per streamed token), and the run
// ends with exit 1 naming the error.
func TestSessionWriteFailureSaidOnce(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer(strings.Repeat("word ", 40), 40)
	})
	var out, errb bytes.Buffer
	dir := t.TempDir()
	fillsUp := func(a *app) {
		a.wrapSession = func(w io.Writer) io.Writer { return &fullDisk{w: w, room: 1} }
	}
	code := runWith(context.Background(), []string{"run", "a prompt", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir},
		streams{in: strings.NewReader(""), out: &out, err: &errb}, func(c int) { t.Errorf("hard exit %d", c) }, noSignals, fillsUp)
	stderr := errb.String()
	if code != exitCheckFailed {
		t.Errorf("exit %d, want 1\nstderr: %s", code, stderr)
	}
	if out.String() != strings.Repeat("word ", 40)+"\n" {
		t.Errorf("the answer did not go on: stdout %q", out.String())
	}
	const full = "no space left on device"
	if n := strings.Count(stderr, "without a transcript"); n != 1 {
		t.Errorf("told %d times that the session goes on without a transcript, want once\nstderr: %s", n, stderr)
	}
	// Once when it happened, once as the run's final error.
	if n := strings.Count(stderr, full); n != 2 {
		t.Errorf("%q %d times on stderr, want 2\nstderr: %s", full, n, stderr)
	}
}

// fullDisk lets room writes through, then fails every write with ENOSPC.
type fullDisk struct {
	w    io.Writer
	room int
}

func (f *fullDisk) Write(p []byte) (int, error) {
	if f.room == 0 {
		return 0, syscall.ENOSPC
	}
	f.room--
	return f.w.Write(p)
}

// TestResumeEmptySessionKeepsSystem: a session quit before its first turn
// holds no message; resuming it with --system writes the system prompt
// first, as a new session would, so a later resume still has it.
func TestResumeEmptySessionKeepsSystem(t *testing.T) {
	srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("hi", 1)
	})
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	if code, _, errb := runCLIWithInput(t, "/quit\n", "chat", "--session", sess, "--system", "be terse", "--workspace", dir); code != exitOK {
		t.Fatalf("new chat: exit %d %s", code, errb)
	}
	if ls, err := session.Load(sess); err != nil || len(ls.History) != 0 {
		t.Fatalf("the quit session: %+v, %v; want no messages", ls, err)
	}
	if code, _, errb := runCLIWithInput(t, "hello\n", "chat", "--resume", sess, "--system", "be terse", "--workspace", dir); code != exitOK {
		t.Fatalf("resumed chat: exit %d %s", code, errb)
	}
	ls, err := session.Load(sess)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.History) != 3 || ls.History[0].Role != kernel.RoleSystem || ls.History[0].Content != "be terse" || ls.History[1].Content != "hello" {
		t.Fatalf("session history %+v, want the system prompt, hello, the answer", ls.History)
	}
	// Resumed without --system, the prompt comes from the file.
	if code, _, errb := runCLIWithInput(t, "again\n", "chat", "--resume", sess, "--workspace", dir); code != exitOK {
		t.Fatalf("second resume: exit %d %s", code, errb)
	}
	reqs := srv.Requests()
	if m := reqs[len(reqs)-1].Body.Messages; len(m) != 4 || m[0].Role != "system" || m[0].Content != "be terse" {
		t.Errorf("request after the second resume: %+v", m)
	}
}

// endpoint serves h as the OpenAI-compatible endpoint of the in-process runs
// of this test (OPENAI_BASE_URL, no key).
func endpoint(t *testing.T, h fakeopenai.Handler) *fakeopenai.Server {
	t.Helper()
	srv := fakeopenai.New(h)
	t.Cleanup(srv.Close)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	t.Setenv("OPENAI_API_KEY", "")
	return srv
}

// listDirThenAnswer asks for list_dir after "Looking.\n", then answers the
// tool's result prefixed with answer.
func listDirThenAnswer(answer string) fakeopenai.Handler {
	return func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer(answer+r.Body.Last().Content, 3)
			return
		}
		_ = w.Text("Looking.\n")
		_ = w.Call(0, "c1", "list_dir", `{"path":"."}`, 3)
		_ = w.End("tool_calls")
	}
}

// TestChatSIGTERMEnds: SIGTERM asks chat to end, not just its turn. While a
// turn streams it cancels the turn and exits 130 once the turn has ended;
// while idle it exits 130 at once (a Ctrl-C there only explains).
func TestChatSIGTERMEnds(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Forever(ctx, "tok ", 10*time.Millisecond)
	})
	for _, busy := range []bool{true, false} {
		dir := t.TempDir()
		stdinR, stdinW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		sigs := make(chan os.Signal)
		out, errb := &syncBuffer{}, &syncBuffer{}
		code := make(chan int, 1)
		go func() { // owned: received from code below
			code <- runWith(context.Background(),
				[]string{"chat", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir},
				streams{in: stdinR, out: out, err: errb},
				func(c int) { t.Errorf("hard exit %d", c) },
				func() (<-chan os.Signal, func()) { return sigs, func() {} })
		}()
		eventually(t, "the prompt", func() bool { return strings.Contains(errb.String(), "> ") })
		if busy {
			if _, err := stdinW.WriteString("go on\n"); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the stream", func() bool { return strings.Contains(out.String(), "tok tok ") })
		}
		select {
		case sigs <- syscall.SIGTERM:
		case <-time.After(5 * time.Second):
			t.Fatal("chat did not take SIGTERM")
		}
		select {
		case c := <-code:
			if c != exitInterrupted {
				t.Errorf("busy=%v: exit %d, want %d\n%s", busy, c, exitInterrupted, errb)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("busy=%v: chat still running 20s after SIGTERM\n%s", busy, errb)
		}
		stdinR.Close()
		stdinW.Close()
	}
}
