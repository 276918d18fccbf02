package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/fakeopenai"
)

// writingServer answers a request that ends with a tool result with
// "done." and the n-th user message with a write_file call call_n of
// fn.txt.
func writingServer(t *testing.T) *fakeopenai.Server {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("done.", 2)
			return
		}
		n := 0
		for _, m := range r.Body.Messages {
			if m.Role == "user" {
				n++
			}
		}
		args, _ := json.Marshal(map[string]string{"path": fmt.Sprintf("f%d.txt", n), "content": "hello\n"})
		_ = w.Call(0, fmt.Sprintf("call_%d", n), "write_file", string(args), 4)
		_ = w.End("tool_calls")
	})
	t.Cleanup(srv.Close)
	return srv
}

// TestApprovalChatJSONTextInputE2E: `chat --json --ask write_file` with
// text input (the default) on a pipe can decide through stdin
// (docs/protocol.md, "Input"): a line that is a decision object is taken
// as a decision, never sent to the model; other lines stay messages. The
// call waits for it (the run is not unattended), an approval runs the
// tool, a denial's note reaches the model, and a malformed decision line
// is refused (exit 2), not sent.
func TestApprovalChatJSONTextInputE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := writingServer(t)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "chat", "--json", "--ask", "write_file", "--workspace", dir, "--session", filepath.Join(dir, "s.jsonl"))
	p.line(t, "write one")
	req := awaitEvent(t, p, protocol.TypeApprovalRequested, "call_1", 1)
	if req.Tool != "write_file" || req.Args != req.Arguments || !strings.Contains(req.Args, "f1.txt") || req.Digest == "" {
		t.Fatalf("request %+v", req)
	}
	p.line(t, `{"approve":%q,"digest":%q}`, req.CallID, req.Digest)
	if res := awaitEvent(t, p, protocol.TypeApprovalResolved, "call_1", 1); res.Approval != "approved" {
		t.Fatalf("approval_resolved %+v\nstderr: %s", res, p.stderr)
	}
	awaitEvent(t, p, protocol.TypeTurnEnded, "", 1)
	if data, err := os.ReadFile(filepath.Join(dir, "f1.txt")); err != nil || string(data) != "hello\n" {
		t.Errorf("the approved call wrote %q %v", data, err)
	}

	p.line(t, "write two")
	awaitEvent(t, p, protocol.TypeApprovalRequested, "call_2", 1)
	p.line(t, `{"deny":"call_2","note":"not that file"}`)
	if res := awaitEvent(t, p, protocol.TypeApprovalResolved, "call_2", 1); res.Approval != "denied" || res.Note != "not that file" {
		t.Fatalf("approval_resolved %+v", res)
	}
	awaitEvent(t, p, protocol.TypeTurnEnded, "", 2)
	p.line(t, `{"approve":"call_2"}`) // no digest: refused
	p.stdin.Close()
	if code := p.wait(t); code != exitUsage {
		t.Fatalf("exit %d, want %d (a refused decision line)\nstderr: %s", code, exitUsage, p.stderr)
	}
	jsonRun(t, p.stdout.String())
	if !strings.Contains(p.stderr.String(), "stdin line 5: bad input line: approve needs the digest") {
		t.Errorf("stderr: %s", p.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "f2.txt")); !os.IsNotExist(err) {
		t.Errorf("the denied call wrote f2.txt (%v)", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4 (two turns of two)", len(reqs))
	}
	var denied string
	for i, r := range reqs {
		for _, m := range r.Body.Messages {
			if m.Role == "user" && (strings.Contains(m.Content, `"approve"`) || strings.Contains(m.Content, `"deny"`)) {
				t.Errorf("request %d: a decision line reached the model as %s: %q", i+1, m.Role, m.Content)
			}
			if m.Role == "tool" && m.ToolCallID == "call_2" {
				denied = m.Content
			}
		}
	}
	if !strings.Contains(denied, `"status":"denied"`) || !strings.Contains(denied, "not that file") {
		t.Errorf("the model read %q for the denied call", denied)
	}
}

// TestApprovalChatJSONTextInputEndsE2E: chat --json with text input is
// attended only while its stdin is open: when it ends with a call
// waiting, the call is denied at once (the model reads why), never left
// to wait out the approval timeout.
func TestApprovalChatJSONTextInputEndsE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := writingServer(t)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "chat", "--json", "--ask", "write_file", "--workspace", dir, "--session", filepath.Join(dir, "s.jsonl"))
	p.line(t, "write one")
	awaitEvent(t, p, protocol.TypeApprovalRequested, "call_1", 1)
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	evs := jsonRun(t, p.stdout.String())
	if res, _ := lastOf(evs, protocol.TypeApprovalResolved, "main"); res.Approval != "denied" || !strings.Contains(res.Note, "no one can give it") {
		t.Errorf("approval_resolved %+v", res)
	}
	if !strings.Contains(p.stderr.String(), "input ended: no one can decide main's call call_1 of write_file any more: denied") {
		t.Errorf("stderr: %s", p.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "f1.txt")); !os.IsNotExist(err) {
		t.Errorf("the call ran (%v)", err)
	}
}

// TestApprovalRunJSONPromptArgE2E: `run --json --ask write_file PROMPT`
// (the prompt an argument, stdin text) reads decision lines on stdin
// (docs/live.md, "Approvals"): the call waits for one — the run is not
// unattended — and an approval runs the tool; the turn completes.
func TestApprovalRunJSONPromptArgE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := writingServer(t)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "run", "--json", "--ask", "write_file", "--workspace", dir, "--session", filepath.Join(dir, "s.jsonl"), "write one")
	req := awaitEvent(t, p, protocol.TypeApprovalRequested, "call_1", 1)
	if req.Tool != "write_file" || req.Digest == "" {
		t.Fatalf("request %+v", req)
	}
	p.line(t, `{"approve":%q,"digest":%q}`, req.CallID, req.Digest)
	if res := awaitEvent(t, p, protocol.TypeApprovalResolved, "call_1", 1); res.Approval != "approved" {
		t.Fatalf("approval_resolved %+v\nstderr: %s", res, p.stderr)
	}
	awaitEvent(t, p, protocol.TypeTurnEnded, "", 1)
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	jsonRun(t, p.stdout.String())
	if data, err := os.ReadFile(filepath.Join(dir, "f1.txt")); err != nil || string(data) != "hello\n" {
		t.Errorf("the approved call wrote %q %v", data, err)
	}
}

// TestApprovalRunJSONRefusesMessagesE2E: run takes no messages after its
// prompt, so with --json and PROMPT every stdin line must be a decision:
// another line is refused (an error event of source input, stderr names
// the line) and run exits 2, though the turn itself goes on and a later
// denial decides the call.
func TestApprovalRunJSONRefusesMessagesE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := writingServer(t)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "run", "--json", "--ask", "write_file", "--workspace", dir, "--session", filepath.Join(dir, "s.jsonl"), "write one")
	awaitEvent(t, p, protocol.TypeApprovalRequested, "call_1", 1)
	p.line(t, "and also this")
	p.line(t, `{"message":"and this"}`)
	p.line(t, `{"deny":"call_1","note":"not now"}`)
	if res := awaitEvent(t, p, protocol.TypeApprovalResolved, "call_1", 1); res.Approval != "denied" || res.Note != "not now" {
		t.Fatalf("approval_resolved %+v\nstderr: %s", res, p.stderr)
	}
	if code := p.wait(t); code != exitUsage {
		t.Fatalf("exit %d, want %d (refused lines)\nstderr: %s", code, exitUsage, p.stderr)
	}
	evs := jsonRun(t, p.stdout.String())
	var refused []int
	for _, e := range evs {
		if e.Type == protocol.TypeError && e.Source == protocol.SourceInput {
			refused = append(refused, e.Line)
		}
	}
	if !slices.Equal(refused, []int{1, 2}) {
		t.Errorf("input errors on lines %v, want [1 2]\nstdout: %s", refused, p.stdout)
	}
	if !strings.Contains(p.stderr.String(), "stdin line 1: run takes no messages after its PROMPT") {
		t.Errorf("stderr: %s", p.stderr)
	}
	for i, r := range srv.Requests() {
		for _, m := range r.Body.Messages {
			if m.Role == "user" && strings.Contains(m.Content, "and") {
				t.Errorf("request %d: a refused line reached the model: %q", i+1, m.Content)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "f1.txt")); !os.IsNotExist(err) {
		t.Errorf("the denied call ran (%v)", err)
	}
}

// TestApprovalRunJSONStdinEndsE2E: run --json PROMPT with stdin at its
// end has no one to decide: the call is denied at once with the reason
// (the model reads it, stderr says it), never left to wait out the
// approval timeout; the turn completes and run exits 0 as before.
func TestApprovalRunJSONStdinEndsE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := writingServer(t)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "run", "--json", "--ask", "write_file", "--approval-timeout", "10m", "--workspace", dir, "--session", filepath.Join(dir, "s.jsonl"), "write one")
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	evs := jsonRun(t, p.stdout.String())
	if res, _ := lastOf(evs, protocol.TypeApprovalResolved, "main"); res.Approval != "denied" || !strings.Contains(res.Note, "no one can give it") {
		t.Errorf("approval_resolved %+v", res)
	}
	if !strings.Contains(p.stderr.String(), "call_1 of write_file") || !strings.Contains(p.stderr.String(), "denied") {
		t.Errorf("stderr: %s", p.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "f1.txt")); !os.IsNotExist(err) {
		t.Errorf("the call ran (%v)", err)
	}
}
