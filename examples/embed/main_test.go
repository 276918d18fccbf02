package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/escapement/escapement/adapters/session"
	"github.com/escapement/escapement/internal/fakeopenai"
)

var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// build compiles this program once per test run.
func build(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the example binary")
	}
	built.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			built.err = fmt.Errorf("this test builds the example and needs go on PATH: %w", err)
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "escapement-embed-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "embed")
		if out, err := exec.Command(goBin, "build", "-o", built.bin, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// command runs the program in dir, where it keeps its session.
func command(bin, dir, baseURL string, args ...string) (*exec.Cmd, *syncBuffer, *syncBuffer) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+baseURL, "OPENAI_API_KEY=sk-embed-example-key", "OPENAI_MODEL=fake")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// syncBuffer is a bytes.Buffer the test reads while the process writes.
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

// TestEmbedRunsItsTool: the README's program offers its Go function to the
// model, runs the call the model makes, and streams the answer built on the
// result.
func TestEmbedRunsItsTool(t *testing.T) {
	bin := build(t)
	srv := fakeopenai.New(func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		if last := req.Body.Last(); last.Role == "tool" {
			_ = w.Answer("It is "+last.Content+".", 4)
			return
		}
		_ = w.Call(0, "call_1", "utc_now", `{}`, 1)
		_ = w.End("tool_calls")
	})
	defer srv.Close()
	cmd, stdout, stderr := command(bin, t.TempDir(), srv.BaseURL(), "What", "time", "is", "it?")
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[0].Body.FirstUser() != "What time is it?" || !strings.Contains(string(reqs[0].Body.Tools), `"utc_now"`) {
		t.Fatalf("requests %d, first %q, tools %s: want 2, the prompt, and utc_now offered", len(reqs), reqs[0].Body.FirstUser(), reqs[0].Body.Tools)
	}
	if reqs[0].Auth != "Bearer sk-embed-example-key" {
		t.Errorf("Authorization %q", reqs[0].Auth)
	}
	result := reqs[1].Body.Last().Content
	if !strings.HasSuffix(result, " +0000 UTC") {
		t.Errorf("tool result %q: want the function's UTC time", result)
	}
	if got := stdout.String(); got != "It is "+result+".\n" {
		t.Errorf("stdout %q, want the streamed answer", got)
	}
}

// TestEmbedCtrlCCancelsTheTurn: Ctrl-C while the model streams cancels the
// turn (the stream's connection is closed), the program exits 130, and the
// model is not asked again.
func TestEmbedCtrlCCancelsTheTurn(t *testing.T) {
	bin := build(t)
	srv := fakeopenai.New(func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Forever(ctx, "tick ", 10*time.Millisecond) // until the client goes away
	})
	defer srv.Close()
	cmd, stdout, stderr := command(bin, t.TempDir(), srv.BaseURL(), "count forever")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitFor(t.Context(), func(r []fakeopenai.Request) bool { return len(r) == 1 }); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("exit: %v, want code 130\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	// The server notices the closed connection on its own goroutine.
	if err := srv.WaitFor(t.Context(), func(r []fakeopenai.Request) bool { return !r[0].Closed.IsZero() }); err != nil {
		t.Fatalf("the stream was never closed: %v", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1: the model was asked again after Ctrl-C", n)
	}
}

// TestEmbedShowsWhyTheTurnFailed: when the endpoint refuses the request, the
// program exits 1 naming the cause — the server's status and message — not
// only the failure class (the turn's Detail is where the kernel keeps it).
func TestEmbedShowsWhyTheTurnFailed(t *testing.T) {
	bin := build(t)
	srv := fakeopenai.New(func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Status(404, `{"error":{"message":"The model 'fake' does not exist","type":"invalid_request_error","code":"model_not_found"}}`)
	})
	defer srv.Close()
	cmd, stdout, stderr := command(bin, t.TempDir(), srv.BaseURL(), "hello")
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want code 1\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	for _, want := range []string{"failed", "404", "The model 'fake' does not exist"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not name %q:\n%s", want, stderr)
		}
	}
}

// TestEmbedResumesAfterSIGKILL: the program keeps its session; killed
// with SIGKILL while the answer streams, it is run again without a prompt
// and finishes that turn — the prompt asked once more of the model, the
// answer on stdout — exactly once: the session file then holds the prompt
// once, the answer, and one end of turn 1, and nothing is left beside it.
// A third run is the session's second turn, with the first in its history.
func TestEmbedResumesAfterSIGKILL(t *testing.T) {
	bin := build(t)
	dir := t.TempDir()
	srv := fakeopenai.New(func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		switch req.N {
		case 1:
			w.Forever(ctx, "once ", 10*time.Millisecond) // until the process dies
		case 2:
			_ = w.Answer("The end.", 3)
		default:
			_ = w.Answer("Again: "+req.Body.Messages[len(req.Body.Messages)-2].Content, 3)
		}
	})
	defer srv.Close()
	cmd, stdout, stderr := command(bin, dir, srv.BaseURL(), "tell", "me", "a", "story")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitFor(t.Context(), func(r []fakeopenai.Request) bool { return len(r) == 1 }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the answer to stream", func() bool { return strings.Contains(stdout.String(), "once once") })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	sessionFile := filepath.Join(dir, "embed-session.jsonl")
	if _, err := os.Stat(sessionFile + ".wal"); err != nil {
		t.Fatalf("no write-ahead log beside the killed run's session: %v\nstderr: %s", err, stderr)
	}

	again, stdout, stderr := command(bin, dir, srv.BaseURL())
	if err := again.Run(); err != nil {
		t.Fatalf("the resuming run: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	if !strings.HasSuffix(stdout.String(), "The end.\n") {
		t.Errorf("stdout %q: want the turn's answer", stdout)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || countUser(reqs[1].Body, "tell me a story") != 1 {
		t.Fatalf("%d requests; the second's messages %+v: want the prompt asked again, once", len(reqs), reqs[len(reqs)-1].Body.Messages)
	}
	recs := sessionRecords(t, sessionFile)
	if got := strings.Join(recs, " "); got != "session user:tell me a story assistant(partial) assistant:The end. turn_end:1:completed" {
		t.Errorf("session records %q: want the prompt once, the text streamed before the kill (partial), the answer and one end of turn 1", got)
	}
	if left, _ := filepath.Glob(sessionFile + ".*"); len(left) != 0 {
		t.Errorf("left beside the session: %v", left)
	}

	third, stdout, stderr := command(bin, dir, srv.BaseURL(), "and", "now?")
	if err := third.Run(); err != nil || stdout.String() != "Again: The end.\n" {
		t.Fatalf("the next turn: %v, stdout %q\nstderr: %s", err, stdout, stderr)
	}
	if recs := sessionRecords(t, sessionFile); recs[len(recs)-1] != "turn_end:2:completed" {
		t.Errorf("session records %q: want turn 2 at the end", recs)
	}
}

// countUser counts the user messages of body whose content is text.
func countUser(body fakeopenai.Body, text string) int {
	n := 0
	for _, m := range body.Messages {
		if m.Role == "user" && m.Content == text {
			n++
		}
	}
	return n
}

// sessionRecords is the session file as "type" words: role:content for a
// message, turn_end:N:outcome for an end of turn.
func sessionRecords(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		var r session.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%s: %q: %v", path, line, err)
		}
		switch {
		case r.Message != nil && r.Message.Partial:
			out = append(out, string(r.Message.Role)+"(partial)")
		case r.Message != nil:
			out = append(out, string(r.Message.Role)+":"+r.Message.Content)
		case r.Type == "turn_end":
			out = append(out, fmt.Sprintf("turn_end:%d:%s", r.Turn, r.Outcome))
		default:
			out = append(out, r.Type)
		}
	}
	return out
}

// waitFor polls cond (a process's output) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestReadmeEmbedIsThisProgram: the README's "Embed it" code is this file's
// main function, so what the README shows is what CI builds and runs.
func TestReadmeEmbedIsThisProgram(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := between(t, string(src), "// embed:begin\n", "\n// embed:end")
	got := between(t, string(readme), "<!-- embed:begin (examples/embed/main.go) -->\n```go\n", "```\n<!-- embed:end -->")
	if strings.TrimSpace(got) != strings.TrimSpace(want) {
		t.Errorf("README's Embed it code differs from examples/embed/main.go's main; copy it over:\n%s", want)
	}
}

func between(t *testing.T, s, begin, end string) string {
	t.Helper()
	_, after, ok := strings.Cut(s, begin)
	if !ok {
		t.Fatalf("no %q", begin)
	}
	in, _, ok := strings.Cut(after, end)
	if !ok {
		t.Fatalf("no %q after %q", end, begin)
	}
	return in
}
