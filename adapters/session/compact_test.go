package session

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// TestCompactionRecordedAndResumed: a compaction of the root's history in
// the middle of a turn leaves every message it replaced in the session
// file and adds a compaction record; Load (what --resume reads) builds the
// history from it on — system prompt, summary, kept tail and what came
// after — and every turn's prompt is still in the file. A compaction turn
// (on demand) is recorded the same way; each answer and each compaction
// record carries its request's usage, and the turns' usage is summed.
func TestCompactionRecordedAndResumed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		sess, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("The harbour has three piers. ", 35) // about 255 tokens
		model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			if req.Compaction {
				sink.Text("They talked about the harbour.")
			} else {
				sink.Text(long)
			}
			sink.Usage(kernel.Usage{PromptTokens: kernel.EstimateTokens(req.Messages), CompletionTokens: 3})
			return nil
		})
		ended := make(chan kernel.Lifecycle, 8)
		limits := kernel.DefaultLimits()
		limits.ContextWindow, limits.CompactPercent = 400, 80
		err = sess.Start(Config{Kernel: kernel.Config{Limits: limits, System: "be brief"}, Model: model, Tools: ports.ToolsFunc(nil), Observer: rootTurnEnds(ended)})
		if err != nil {
			t.Fatal(err)
		}
		d := sess.Driver()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		for _, p := range []string{"first", "second", "third"} {
			if err := d.Submit(ctx, p); err != nil {
				t.Fatal(err)
			}
			if l := <-ended; l.Outcome != kernel.OutcomeCompleted {
				t.Fatalf("turn %q: %s %s", p, l.Outcome, l.Detail)
			}
		}
		if err := d.Compact(ctx, "piers"); err != nil {
			t.Fatal(err)
		}
		if l := <-ended; l.Outcome != kernel.OutcomeCompleted {
			t.Fatalf("compaction turn: %s %s", l.Outcome, l.Detail)
		}
		var want []kernel.Message
		d.Inspect(ctx, func(k *kernel.Kernel) { want = k.Agent(kernel.Root).History() })
		time.Sleep(time.Millisecond)
		cancel()
		runErr := <-done
		if err := sess.Close(runErr); err != nil {
			t.Fatal(err)
		}
		ls, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if ls.Turns != 4 || ls.Unfinished() {
			t.Fatalf("turns %d, unfinished %v", ls.Turns, ls.Unfinished())
		}
		got, _ := json.Marshal(ls.History)
		wantJSON, _ := json.Marshal(want)
		if string(got) != string(wantJSON) {
			t.Fatalf("resumed history\n%s\nwant the compacted one\n%s", got, wantJSON)
		}
		if len(want) != 2 || want[0].Role != kernel.RoleSystem || !want[1].Summary {
			t.Fatalf("history after the compaction turn: %+v", want)
		}
		if ls.Usage.Requests != 5 || ls.Usage.PromptTokens == 0 || ls.Usage.CompletionTokens != 15 || ls.Usage.Unreported != 0 {
			t.Errorf("the session's usage: %+v, want 5 requests (3 turns + 2 compactions), 15 tokens out", ls.Usage)
		}
		data, _ := os.ReadFile(path)
		var compactions, prompts int
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n")[1:] {
			var r Record
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			if r.Type == "compaction" {
				compactions++
				if r.Usage == nil || r.Usage.CompletionTokens != 3 {
					t.Errorf("a compaction record without its request's usage: %s", l)
				}
			}
			if r.Message != nil && r.Message.Role == kernel.RoleAssistant && (r.Usage == nil || r.Usage.PromptTokens == 0) {
				t.Errorf("an answer without its request's usage: %.200s", l)
			}
			if r.Message != nil && r.Message.Role != kernel.RoleAssistant && r.Usage != nil {
				t.Errorf("usage on a message no request appended: %.200s", l)
			}
			if r.Message != nil && r.Message.Role == kernel.RoleUser && !r.Message.Summary {
				prompts++
			}
		}
		if compactions != 2 || prompts != 3 {
			t.Errorf("%d compaction records and %d prompts in the file, want 2 and 3:\n%s", compactions, prompts, data)
		}
	})
}

// TestLoadCompactionOfUnfinishedTurn: a compaction record whose turn never
// ended (the process died after it) is part of that unfinished turn: Load
// resumes the uncompacted history of the complete turns and reports the
// rest as unfinished, so a plain resume cuts it off (the original kept).
func TestLoadCompactionOfUnfinishedTurn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	lines := []string{
		`{"type":"session","format":1,"created":"2026-01-01T00:00:00Z"}`,
		`{"type":"message","message":{"role":"user","content":"first"}}`,
		`{"type":"message","message":{"role":"assistant","content":"long answer"}}`,
		`{"type":"turn_end","turn":1,"outcome":"completed"}`,
		`{"type":"message","message":{"role":"user","content":"second"}}`,
		`{"type":"compaction","turn":2,"replaced":2,"history":[{"role":"user","content":"<conversation_summary>\ns\n</conversation_summary>","summary":true},{"role":"user","content":"second"}]}`,
	}
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
	ls, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.History) != 2 || ls.History[0].Content != "first" || !ls.Unfinished() || len(ls.Pending) != 1 || ls.Pending[0].Content != "second" {
		t.Fatalf("history %+v, pending %+v, unfinished %v", ls.History, ls.Pending, ls.Unfinished())
	}
	// A compaction turn (/compact) killed between its record and its
	// turn_end leaves no message, and is unfinished all the same.
	onDemand := append(append([]string{}, lines[:4]...), strings.Replace(lines[5], `,{"role":"user","content":"second"}`, "", 1))
	os.WriteFile(path+"2", []byte(strings.Join(onDemand, "\n")+"\n"), 0o600)
	if ls2, err := Load(path + "2"); err != nil || !ls2.Unfinished() || len(ls2.History) != 2 {
		t.Fatalf("an unended compaction turn: %+v, %v", ls2, err)
	}
	// Its turn_end makes the compacted history the one to resume.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"type":"message","message":{"role":"assistant","content":"ok"}}` + "\n" + `{"type":"turn_end","turn":2,"outcome":"completed"}` + "\n")
	f.Close()
	if ls, err = Load(path); err != nil {
		t.Fatal(err)
	}
	if len(ls.History) != 3 || !ls.History[0].Summary || ls.History[1].Content != "second" || ls.History[2].Content != "ok" || ls.Unfinished() || ls.Turns != 2 {
		t.Fatalf("history %+v, unfinished %v, turns %d", ls.History, ls.Unfinished(), ls.Turns)
	}
}

// TestRecoveryDerivesTheCompactionRecord: a crashed run's session file
// that lags its log from just before a compaction record gets that record
// and the rest appended by the recovery, byte for byte what the live run
// wrote (the replay derives it as the live observer does).
func TestRecoveryDerivesTheCompactionRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s.jsonl")
		long := strings.Repeat("The harbour has three piers. ", 35)
		model := ports.ModelFunc(func(ctx context.Context, req ports.Request, sink ports.Sink) error {
			if req.Compaction {
				sink.Text("They talked about the harbour.")
			} else {
				sink.Text(long)
			}
			sink.Usage(kernel.Usage{PromptTokens: kernel.EstimateTokens(req.Messages), CompletionTokens: 3})
			return nil
		})
		limits := kernel.DefaultLimits()
		limits.ContextWindow = 400
		ended := make(chan kernel.Lifecycle, 8)
		cfg := Config{Kernel: kernel.Config{Limits: limits, System: "be brief"}, Model: model, Tools: ports.ToolsFunc(nil), Observer: rootTurnEnds(ended)}
		sess, err := Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := sess.Start(cfg); err != nil {
			t.Fatal(err)
		}
		d := sess.Driver()
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		for _, p := range []string{"first", "second", "third"} {
			if err := d.Submit(ctx, p); err != nil {
				t.Fatal(err)
			}
			<-ended
		}
		cancel()
		<-done
		if err := sess.Close(errors.New("the process died")); err != nil { // the log stays
			t.Fatal(err)
		}
		full, _ := os.ReadFile(path)
		at := strings.Index(string(full), `{"type":"compaction"`)
		if at < 0 {
			t.Fatalf("no compaction recorded:\n%s", full)
		}
		os.WriteFile(path, full[:at], 0o600)

		again, err := Resume(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := again.Start(cfg); err != nil {
			t.Fatal(err)
		}
		defer again.Close(errors.New("done"))
		if got, _ := os.ReadFile(path); string(got) != string(full) {
			t.Fatalf("the recovered session file\n%s\nwant what the live run wrote\n%s", got, full)
		}
	})
}
