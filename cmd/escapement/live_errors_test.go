package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/adapters/tools"
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
			evs := jsonRun(t, out)
			ended, _ := lastOf(evs, protocol.TypeTurnEnded, "main")
			op, _ := lastOf(evs, protocol.TypeOpEnded, "main")
			res := evs[len(evs)-1]
			if ended.Outcome != "failed" || !strings.Contains(ended.Detail, tc.want) {
				t.Errorf("--json turn_ended %+v, want failed with detail %q", ended, tc.want)
			}
			if op.End != "failed" || op.OpKind != protocol.OpRequest || op.Usage != nil {
				t.Errorf("--json op_ended %+v, want a failed request without usage", op)
			}
			if res.Outcome != "failed" || res.Reason != "llm_error" || !strings.Contains(res.Detail, tc.want) || res.Requests != 1 || res.Usage.Unreported != 1 {
				t.Errorf("--json result %+v", res)
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
		ended, _ := lastOf(jsonRun(t, out), protocol.TypeTurnEnded, "main")
		if code != exitCheckFailed || ended.Reason != kernel.ReasonOutputLimit.String() || !strings.Contains(ended.Detail, "max_message_bytes") {
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
		for _, ev := range jsonRun(t, out) {
			if ev.Type == protocol.TypeCallFinished && ev.Status == "refused" && ev.Reason == "max_calls" && ev.Op == 0 && ev.Tool == "list_dir" {
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

// keyTools is a toolBox whose one tool prints the environment's API key
// (what `shell echo $OPENAI_API_KEY` did before the environment policy).
type keyTools struct{ key string }

func (k keyTools) Run(ctx context.Context, c ports.Call) ports.ToolResult {
	return ports.ToolResult{Status: kernel.ToolOK, Content: "OPENAI_API_KEY=" + k.key + "\n"}
}

func (keyTools) Specs() []ports.ToolSpec {
	return []ports.ToolSpec{{Name: "env", Description: "prints the environment", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}
}
func (keyTools) KillAll()     {}
func (keyTools) Close() error { return nil }

// TestKeyRedactedEverywhere: whatever carries the API key into the run — a
// tool's output, a model repeating a piece of it split across chunks — no
// run of 12 or more of its bytes reaches stdout, stderr, --json, the
// session or the trace; every trace replays (the kernel was fed the
// redacted text, so the trace holds exactly what it was fed).
func TestKeyRedactedEverywhere(t *testing.T) {
	const key = "sk-proj-Zq8Lw3Rt5Yu7Io9Pa1Sd3Fg5Hj7Kl9"
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		switch {
		case r.Body.Last().Role != "tool":
			_ = w.Call(0, "c1", "env", `{}`, 2)
			_ = w.End("tool_calls")
		case r.Body.FirstUser() == "repeat it":
			_ = w.Answer("the key starts "+key[:20]+" and goes on", 5) // split across chunks
		default:
			_ = w.Answer("done", 2)
		}
	})
	t.Setenv("OPENAI_API_KEY", key)
	dir := t.TempDir()
	inject := func(a *app) { a.newTools = func(tools.Config) (toolBox, error) { return keyTools{key}, nil } }
	outputs := map[string]string{}
	for _, run := range []struct{ name, prompt, flag string }{
		{"json", "look", "--json"},
		{"text", "look", "--log-level=debug"},
		{"repeat", "repeat it", "--log-level=debug"},
	} {
		sess, tr := filepath.Join(dir, run.name+"-s.jsonl"), filepath.Join(dir, run.name+"-t.jsonl")
		var out, errb bytes.Buffer
		code := runWith(context.Background(), []string{"run", run.prompt, run.flag, "--session", sess, "--trace", tr, "--workspace", dir},
			streams{in: strings.NewReader(""), out: &out, err: &errb}, func(int) {}, noSignals, inject)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s", run.name, code, errb.String())
		}
		outputs[run.name+" stdout"], outputs[run.name+" stderr"] = out.String(), errb.String()
		for _, f := range []string{sess, tr} {
			b, _ := os.ReadFile(f)
			outputs[f] = string(b)
		}
		if code, o, e := runCLI(t, "sim", "replay", tr); code != exitOK {
			t.Errorf("the redacted %s trace does not replay: %s %s", run.name, o, e)
		}
	}
	for name, text := range outputs {
		for i := 0; i+12 <= len(key); i++ {
			if strings.Contains(text, key[i:i+12]) {
				t.Errorf("%s holds %q, 12 bytes of the key", name, key[i:i+12])
				break
			}
		}
	}
	if want := "the key starts [redacted] and goes on\n"; outputs["repeat stdout"] != want {
		t.Errorf("stdout %q, want %q", outputs["repeat stdout"], want)
	}
	if !strings.Contains(outputs[filepath.Join(dir, "json-s.jsonl")], "OPENAI_API_KEY=[redacted]") {
		t.Errorf("the tool's output was not redacted in the session")
	}
}

// TestAnswerEndNotHeldBack: the answer's last bytes, held back while they
// could be the start of the API key, are printed when the turn ends, even
// when they are a piece of the key too short to be redacted.
func TestAnswerEndNotHeldBack(t *testing.T) {
	const key = "sk-proj-Zq8Lw3Rt5Yu7Io9Pa1Sd3Fg5Hj7Kl9"
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Answer("the code is sk-proj", 4)
	})
	t.Setenv("OPENAI_API_KEY", key)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := runWith(context.Background(), []string{"run", "code?", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir},
		streams{in: strings.NewReader(""), out: &out, err: &errb}, func(int) {}, noSignals)
	if code != exitOK || out.String() != "the code is sk-proj\n" {
		t.Errorf("exit %d, stdout %q; want the whole answer\n%s", code, out.String(), errb.String())
	}
}

// TestTruncatedAnswerSaid: an answer the server cut at its token limit
// (finish_reason "length") is printed as far as it came, and the turn ends
// failed with exit 1 and a line on stderr that says the answer was cut —
// never exit 0 as if it were whole.
func TestTruncatedAnswerSaid(t *testing.T) {
	endpoint(t, func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		_ = w.Text("The three reasons are: first, ")
		_ = w.End("length")
	})
	dir := t.TempDir()
	code, out, errb := runCLI(t, "run", "hello", "--model", "x", "--session", filepath.Join(dir, "s.jsonl"), "--workspace", dir)
	if code != exitCheckFailed || !strings.Contains(out, "The three reasons are: first, ") ||
		!strings.Contains(errb, `the server cut the answer off at its token limit (finish_reason "length"`) {
		t.Errorf("exit %d\nstdout %q\nstderr %q", code, out, errb)
	}
}
