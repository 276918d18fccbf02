package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
)

// TestVersion: `escapement version` says escapement's version, the
// protocol's and the toolchain's; --version the first.
func TestVersion(t *testing.T) {
	code, out, errb := runCLI(t, "version")
	if code != exitOK || !regexp.MustCompile(`^escapement \S+\nprotocol `+strconv.Itoa(protocol.Version)+`\ngo\S+ \S+/\S+\n$`).MatchString(out) {
		t.Errorf("version: exit %d %q %q", code, out, errb)
	}
	first, _, _ := strings.Cut(out, "\n")
	if code, out, _ := runCLI(t, "--version"); code != exitOK || out != first+"\n" {
		t.Errorf("--version: exit %d %q, want %q", code, out, first)
	}
}

// TestPromptFromStdin: with no PROMPT and stdin not a terminal, run reads
// its prompt from stdin (`printf 'hi' | escapement run`), as it does for
// `run -`; empty stdin is a usage error, and so is `-` with --resume and
// nothing on stdin.
func TestPromptFromStdin(t *testing.T) {
	srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("got "+r.Body.Last().Content, 4)
	})
	dir := t.TempDir()
	for i, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"hi", []string{"run"}, "hi"},
		{"from stdin\nwith two lines\n\n", []string{"run", "-"}, "from stdin\nwith two lines"},
	} {
		args := append(tc.args, "--session", filepath.Join(dir, string(rune('a'+i))+".jsonl"), "--workspace", dir)
		code, out, errb := runCLIWithInput(t, tc.stdin, args...)
		reqs := srv.Requests()
		if code != exitOK || len(reqs) == 0 || reqs[len(reqs)-1].Body.Last().Content != tc.want || out != "got "+tc.want+"\n" {
			t.Errorf("%q | %v: exit %d, stdout %q\n%s", tc.stdin, tc.args, code, out, errb)
		}
	}
	n := len(srv.Requests())
	for _, args := range [][]string{{"run", "--session", filepath.Join(dir, "e.jsonl")}, {"run", "-", "--session", filepath.Join(dir, "e.jsonl")}, {"run", "-", "--resume", filepath.Join(dir, "a.jsonl")}} {
		if code, _, errb := runCLIWithInput(t, " \n", append(args, "--workspace", dir)...); code != exitUsage || !strings.Contains(errb, "stdin was empty") {
			t.Errorf("%v with empty stdin: exit %d %s", args, code, errb)
		}
	}
	if len(srv.Requests()) != n {
		t.Error("an empty prompt reached the model")
	}
}

// lookThenAnswer says "Let me look.", lists the workspace, then answers.
func lookThenAnswer(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("The answer.", 4)
			return
		}
		_ = w.Text("Let me look.")
		_ = w.Call(0, "c1", "list_dir", `{"path":"."}`, 4)
		_ = w.End("tool_calls")
	})
}

// TestFinalAnswerOnly: --final-only prints the turn's final answer alone;
// -o FILE writes it to FILE (0600), a file that was there kept as
// FILE.~1~; a turn that does not complete leaves FILE as it was.
func TestFinalAnswerOnly(t *testing.T) {
	lookThenAnswer(t)
	dir := t.TempDir()
	code, out, errb := runCLI(t, "run", "look", "--final-only", "--session", filepath.Join(dir, "a.jsonl"), "--workspace", dir)
	if code != exitOK || out != "The answer.\n" {
		t.Errorf("--final-only: exit %d, stdout %q\n%s", code, out, errb)
	}
	file := filepath.Join(dir, "answer.txt")
	if err := os.WriteFile(file, []byte("my notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errb = runCLI(t, "run", "look", "-o", file, "--session", filepath.Join(dir, "b.jsonl"), "--workspace", dir)
	if code != exitOK || out != "Let me look.\nThe answer.\n" || !strings.Contains(errb, "kept as "+file+".~1~") {
		t.Errorf("-o: exit %d, stdout %q\n%s", code, out, errb)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "The answer.\n" {
		t.Errorf("%s holds %q %v", file, b, err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v %v, want 0600", file, st.Mode(), err)
	}
	if b, _ := os.ReadFile(file + ".~1~"); string(b) != "my notes\n" {
		t.Errorf("the earlier file was not kept: %q", b)
	}
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(500, `{"error":{"message":"down"}}`)
	})
	code, _, errb = runCLI(t, "run", "look", "-o", file, "--session", filepath.Join(dir, "c.jsonl"), "--workspace", dir)
	if b, _ := os.ReadFile(file); code != exitCheckFailed || string(b) != "The answer.\n" || !strings.Contains(errb, "not written: no turn completed") {
		t.Errorf("a failed turn: exit %d, file %q\n%s", code, b, errb)
	}
	for _, bad := range [][]string{{"-o", dir}, {"-o", filepath.Join(dir, "no", "such.txt")}, {"--final-only", "--json"}, {"-o", filepath.Join(dir, "d.jsonl")}} {
		if code, _, errb := runCLI(t, append([]string{"run", "x", "--session", filepath.Join(dir, "d.jsonl"), "--workspace", dir}, bad...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want 2\n%s", bad, code, errb)
		}
	}
}

// TestClosedStdoutIsAShutdown: `run … | head -c 10` — the reader of
// stdout goes away mid-answer. The run is shut down as by SIGTERM (the
// process is not killed by SIGPIPE mid-turn) and exits 141; the session
// is closed cleanly (no write-ahead log is left) and the next --resume
// finds nothing to recover.
func TestClosedStdoutIsAShutdown(t *testing.T) {
	bin := buildBinary(t)
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Content == "again" {
			_ = w.Answer("fine", 2)
			return
		}
		w.Forever(ctx, "tok ", 5*time.Millisecond)
	})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	cmd := exec.Command(bin, "run", "count forever", "--session", sess, "--workspace", dir)
	cmd.Env = binEnv(dir, "OPENAI_BASE_URL="+srv.BaseURL())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(stdout, make([]byte, 10)); err != nil { // head -c 10
		t.Fatal(err)
	}
	stdout.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("still running 30s after stdout closed\n%s", &stderr)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitBrokenPipe {
		t.Fatalf("exit %v (%s), want status 141\n%s", err, cmd.ProcessState, &stderr)
	}
	if _, err := os.Stat(sess + session.LogSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the write-ahead log is left behind: %v", err)
	}
	if recs := readSession(t, sess); recs[len(recs)-1].Type != "turn_end" || recs[len(recs)-1].Reason.String() != "shutdown" {
		t.Errorf("last session record %+v, want the turn's end (shutdown)", recs[len(recs)-1])
	}
	mustHave(t, stderr.String(), "stdout was closed; the run was shut down and its session closed cleanly")

	p := startBinary(t, bin, srv, dir, "run", "again", "--resume", sess, "--workspace", dir)
	if code := p.wait(t); code != exitOK || p.stdout.String() != "fine\n" {
		t.Errorf("resume: exit %d, stdout %q\n%s", code, p.stdout, p.stderr)
	}
	for _, crash := range []string{"recover", "crash", "unfinished", "write-ahead"} {
		if strings.Contains(strings.ToLower(p.stderr.String()), crash) {
			t.Errorf("the resume speaks of a crash (%q):\n%s", crash, p.stderr)
		}
	}
}

// TestResultOnShutdown: a run shut down (SIGTERM) still ends --json with
// its result.
func TestResultOnShutdown(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Forever(ctx, "tok ", 10*time.Millisecond)
	})
	dir := t.TempDir()
	c := startCLI(t, []string{"run", "count", "--json", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir})
	eventually(t, "the stream", func() bool { return strings.Contains(c.out.String(), `"type":"delta"`) })
	c.signal(os.Interrupt)
	if code := c.wait(20 * time.Second); code != exitInterrupted {
		t.Fatalf("exit %d", code)
	}
	evs := jsonRun(t, c.out.String())
	if res := evs[len(evs)-1]; res.Outcome != "interrupted" || res.Reason != "user_cancel" || res.Answer == "" || res.Type != protocol.TypeResult {
		t.Errorf("result %+v", res)
	}
}
