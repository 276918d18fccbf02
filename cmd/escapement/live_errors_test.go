package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/kernel"
)

// TestFailedRequestSaysWhy: a request the server refuses (a bad key: 401;
// a model Ollama has not pulled: 404) says why on stderr — the HTTP status
// and the server's message, not only "The model request failed." — and
// --json's turn_ended carries it as detail, with op_ended saying failed.
func TestFailedRequestSaysWhy(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"401", `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`, 401, "HTTP 401 Unauthorized: Incorrect API key provided"},
		{"404 ollama", `{"error":"model \"x\" not found, try pulling it first"}`, 404, `HTTP 404 Not Found: model "x" not found, try pulling it first`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
				w.Status(tc.status, tc.body)
			})
			dir := t.TempDir()
			code, out, errb := runCLI(t, "run", "hello", "--model", "x", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
			if code != exitCheckFailed {
				t.Fatalf("exit %d, want 1\n%s", code, errb)
			}
			if out != "" || !strings.Contains(errb, kernel.UIFailed+" (llm_error)\n") || !strings.Contains(errb, tc.want) {
				t.Errorf("stdout %q\nstderr %q\nwant the UI text, the reason and %q", out, errb, tc.want)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests; a %d is not retried", n, tc.status)
			}
			code, out, _ = runCLI(t, "run", "hello", "--json", "--model", "x", "--session", filepath.Join(dir, "j.jsonl"), "--workspace", dir)
			if code != exitCheckFailed {
				t.Fatalf("--json: exit %d", code)
			}
			var ended, op *kernel.Lifecycle
			for _, l := range jsonEvents(t, out) {
				switch l.Kind {
				case kernel.LifeTurnEnded:
					ended = &l
				case kernel.LifeOpEnded:
					op = &l
				}
			}
			if ended == nil || ended.Outcome != kernel.OutcomeFailed || !strings.Contains(ended.Detail, tc.want) {
				t.Errorf("--json turn_ended %+v, want failed with detail %q", ended, tc.want)
			}
			if op == nil || op.End != kernel.OpFailed {
				t.Errorf("--json op_ended %+v, want failed", op)
			}
		})
	}
}

// TestCapsShown: a message past --max-message-bytes ends the turn with
// reason output_limit, said on stderr with the kernel's detail (the text
// that fit is printed, the turn is not "completed"); calls past
// --max-calls are refused, each said on stderr and in --json, and the
// model hears why.
func TestCapsShown(t *testing.T) {
	t.Run("max-message-bytes", func(t *testing.T) {
		endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			_ = w.Answer(strings.Repeat("0123456789", 20), 10)
		})
		dir := t.TempDir()
		code, out, errb := runCLI(t, "run", "talk", "--max-message-bytes", "64", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
		if code != exitCheckFailed {
			t.Fatalf("exit %d, want 1\n%s", code, errb)
		}
		if want := strings.Repeat("0123456789", 7)[:64] + "\n"; out != want {
			t.Errorf("stdout %q, want the 64 bytes that fit", out)
		}
		if !strings.Contains(errb, "(output_limit)\n  the assistant message went past max_message_bytes (64 bytes)") {
			t.Errorf("stderr %q", errb)
		}
		code, out, _ = runCLI(t, "run", "talk", "--json", "--max-message-bytes", "64", "--session", filepath.Join(dir, "j.jsonl"), "--workspace", dir)
		var ended *kernel.Lifecycle
		for _, l := range jsonEvents(t, out) {
			if l.Kind == kernel.LifeTurnEnded {
				ended = &l
			}
		}
		if code != exitCheckFailed || ended == nil || ended.Reason != kernel.ReasonOutputLimit || !strings.Contains(ended.Detail, "max_message_bytes") {
			t.Errorf("--json: exit %d, turn_ended %+v", code, ended)
		}
	})
	t.Run("max-calls", func(t *testing.T) {
		srv := endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
			if r.Body.Last().Role == "tool" {
				_ = w.Answer("done", 4)
				return
			}
			for i := range 3 {
				_ = w.Call(i, fmt.Sprintf("c%d", i), "list_dir", `{"path":"."}`, 4)
			}
			_ = w.End("tool_calls")
		})
		dir := t.TempDir()
		code, out, errb := runCLI(t, "run", "look", "--json", "--max-calls", "1", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
		if code != exitOK {
			t.Fatalf("exit %d\n%s", code, errb)
		}
		refused := 0
		for _, l := range jsonEvents(t, out) {
			if l.Kind == kernel.LifeCallFinished && l.Status == kernel.CallRefused && l.Reason == kernel.ReasonMaxCalls {
				refused++
			}
		}
		if refused != 2 {
			t.Errorf("--json: %d calls refused with max_calls, want 2\n%s", refused, out)
		}
		code, _, errb = runCLI(t, "run", "look", "--max-calls", "1", "--session", filepath.Join(dir, "t.jsonl"), "--workspace", dir)
		if code != exitOK || strings.Count(errb, "[main] ← list_dir refused (max_calls)") != 2 || strings.Count(errb, "[main] ← list_dir ok") != 1 {
			t.Errorf("exit %d, stderr %q", code, errb)
		}
		reqs := srv.Requests()
		if last := reqs[len(reqs)-1].Body.Messages; !strings.Contains(fmt.Sprint(last), `"reason":"max_calls"`) {
			t.Errorf("the model was not told which calls did not run: %+v", last)
		}
	})
}
