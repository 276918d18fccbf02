package main

import (
	"bytes"
	"context"
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

func command(bin, baseURL string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+baseURL, "OPENAI_API_KEY=sk-embed-example-key", "OPENAI_MODEL=fake")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
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
	cmd, stdout, stderr := command(bin, srv.BaseURL(), "What", "time", "is", "it?")
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
	if !strings.HasSuffix(result, "Z") || len(result) != len("2006-01-02T15:04:05Z") {
		t.Errorf("tool result %q: want the function's RFC 3339 UTC time", result)
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
	cmd, stdout, stderr := command(bin, srv.BaseURL(), "count forever")
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
	cmd, stdout, stderr := command(bin, srv.BaseURL(), "hello")
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
