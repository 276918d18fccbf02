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

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/fakeopenai"
)

// Approvals end to end (docs/live.md, "Approvals"): the real binary with
// --ask, decisions as protocol lines on stdin (--input-format json), real
// signals, kill -9 and --resume. The model asks for shell commands that
// append a line to count.txt: the file's lines are how often a call ran.

// shellCall is a scripted call of the shell tool.
type shellCall struct{ id, command string }

// askingServer answers a request that ends with a tool result with
// "done." and any other with calls.
func askingServer(t *testing.T, calls ...shellCall) *fakeopenai.Server {
	srv := fakeopenai.New(func(ctx context.Context, r *fakeopenai.Request, w *fakeopenai.Writer) {
		if r.Body.Last().Role == "tool" {
			_ = w.Answer("done.", 2)
			return
		}
		for i, c := range calls {
			args, _ := json.Marshal(map[string]string{"command": c.command})
			_ = w.Call(i, c.id, "shell", string(args), 4)
		}
		_ = w.End("tool_calls")
	})
	t.Cleanup(srv.Close)
	return srv
}

const countCommand = "echo ran | tee -a count.txt"

// ranTimes is how often a counting command ran in dir.
func ranTimes(dir string) int {
	data, _ := os.ReadFile(filepath.Join(dir, "count.txt"))
	return bytes.Count(data, []byte("\n"))
}

// events decodes the whole JSON lines of out so far (a killed process's
// last line may be cut; a running one's may be half written).
func events(out string) []protocol.Event {
	var evs []protocol.Event
	for _, line := range strings.Split(out, "\n") {
		var ev protocol.Event
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type != "" {
			evs = append(evs, ev)
		}
	}
	return evs
}

// awaitEvent waits for the n-th (1-based) event of type typ and call id.
func awaitEvent(t *testing.T, p *proc, typ, callID string, n int) protocol.Event {
	t.Helper()
	var got protocol.Event
	eventually(t, fmt.Sprintf("%s of %s (#%d)", typ, callID, n), func() bool {
		seen := 0
		for _, ev := range events(p.stdout.String()) {
			if ev.Type == typ && ev.CallID == callID {
				if seen++; seen == n {
					got = ev
					return true
				}
			}
		}
		return false
	})
	return got
}

func (p *proc) line(t *testing.T, format string, args ...any) {
	t.Helper()
	if _, err := fmt.Fprintf(p.stdin, format+"\n", args...); err != nil {
		t.Fatal(err)
	}
}

// runAsking starts `run --json --input-format json --ask shell` on prompt.
func runAsking(t *testing.T, bin string, srv *fakeopenai.Server, dir string, more ...string) *proc {
	t.Helper()
	args := append([]string{"run", "--json", "--input-format", "json", "--ask", "shell", "--allow-shell", "--workspace", dir,
		"--session", filepath.Join(dir, "s.jsonl")}, more...)
	return startBinary(t, bin, srv, dir, append(args, "clean up")...)
}

// toolResult is the result the model read for the call (the second
// request's tool message).
func toolResult(t *testing.T, srv *fakeopenai.Server, callID string) string {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d requests: the model never read the call's result", len(reqs))
	}
	for _, m := range reqs[1].Body.Messages {
		if m.Role == "tool" && m.ToolCallID == callID {
			return m.Content
		}
	}
	t.Fatalf("the second request has no result for %s", callID)
	return ""
}

// TestApprovalApproveE2E: the request is an event with the call's
// arguments and digest; an approve line naming both runs the call once.
func TestApprovalApproveE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := askingServer(t, shellCall{"call_1", countCommand})
	dir := t.TempDir()
	p := runAsking(t, bin, srv, dir)
	req := awaitEvent(t, p, protocol.TypeApprovalRequested, "call_1", 1)
	if req.Tool != "shell" || !strings.Contains(req.Arguments, countCommand) || req.Agent != "main" {
		t.Fatalf("request %+v", req)
	}
	if ranTimes(dir) != 0 {
		t.Fatal("the call ran before it was approved")
	}
	p.line(t, `{"approve":%q,"digest":%q}`, req.CallID, req.Digest)
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	evs := jsonRun(t, p.stdout.String())
	if res, _ := lastOf(evs, protocol.TypeApprovalResolved, "main"); res.Approval != "approved" {
		t.Errorf("approval_resolved %+v", res)
	}
	if n := ranTimes(dir); n != 1 {
		t.Errorf("the call ran %d times", n)
	}
}

// TestApprovalDenyNoteE2E: a denial's note reaches the model in the call's
// result, and the call never runs.
func TestApprovalDenyNoteE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := askingServer(t, shellCall{"call_1", countCommand})
	dir := t.TempDir()
	p := runAsking(t, bin, srv, dir)
	awaitEvent(t, p, protocol.TypeApprovalRequested, "call_1", 1)
	p.line(t, `{"deny":"call_1","note":"use make clean instead"}`)
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	evs := jsonRun(t, p.stdout.String())
	if res, _ := lastOf(evs, protocol.TypeApprovalResolved, "main"); res.Approval != "denied" || res.Note != "use make clean instead" {
		t.Errorf("approval_resolved %+v", res)
	}
	got := toolResult(t, srv, "call_1")
	if !strings.Contains(got, `"status":"denied"`) || !strings.Contains(got, "use make clean instead") {
		t.Errorf("the model read %s", got)
	}
	if n := ranTimes(dir); n != 0 {
		t.Errorf("a denied call ran %d times", n)
	}
}

// TestApprovalExpireE2E: nobody decides within --approval-timeout: the
// call expires (a typed result, not a denial by a person) and the turn
// goes on to complete.
func TestApprovalExpireE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := askingServer(t, shellCall{"call_1", countCommand})
	dir := t.TempDir()
	p := runAsking(t, bin, srv, dir, "--approval-timeout", "300ms")
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	evs := jsonRun(t, p.stdout.String())
	if res, _ := lastOf(evs, protocol.TypeApprovalResolved, "main"); res.Approval != "expired" || res.Reason != "approval_timeout" {
		t.Errorf("approval_resolved %+v", res)
	}
	if got := toolResult(t, srv, "call_1"); !strings.Contains(got, `"type":"tool_not_approved","status":"expired","reason":"approval_timeout"`) {
		t.Errorf("the model read %s", got)
	}
	if end, _ := lastOf(evs, protocol.TypeTurnEnded, "main"); end.Outcome != "completed" {
		t.Errorf("turn ended %+v", end)
	}
	if n := ranTimes(dir); n != 0 {
		t.Errorf("an expired call ran %d times", n)
	}
}

// TestApprovalCtrlCWithdrawsE2E: SIGINT while the call waits cancels the
// turn: the wait is withdrawn (not denied), the command exits 130, and no
// request follows.
func TestApprovalCtrlCWithdrawsE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := askingServer(t, shellCall{"call_1", countCommand})
	dir := t.TempDir()
	p := runAsking(t, bin, srv, dir)
	awaitEvent(t, p, protocol.TypeApprovalRequested, "call_1", 1)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d, want %d\nstderr: %s", code, exitInterrupted, p.stderr)
	}
	evs := jsonRun(t, p.stdout.String())
	res, _ := lastOf(evs, protocol.TypeApprovalResolved, "main")
	if res.Approval != "withdrawn" || res.Reason != "user_cancel" {
		t.Errorf("approval_resolved %+v", res)
	}
	fin, _ := lastOf(evs, protocol.TypeCallFinished, "main")
	if fin.Status != "cancelled" || !strings.Contains(fin.Result, `"approval":"withdrawn"`) || strings.Contains(fin.Result, "denied") {
		t.Errorf("call_finished %+v", fin)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1 (none after the cancel)", n)
	}
	if ranTimes(dir) != 0 {
		t.Error("a withdrawn call ran")
	}
}

// chatAsking starts `chat --json --input-format json` on the session in
// dir, with more flags (--resume, --session).
func chatAsking(t *testing.T, bin string, srv *fakeopenai.Server, dir string, more ...string) *proc {
	t.Helper()
	args := append([]string{"chat", "--json", "--input-format", "json", "--ask", "shell", "--allow-shell", "--workspace", dir}, more...)
	return startBinary(t, bin, srv, dir, args...)
}

// TestApprovalKill9PendingAskedAgainE2E: kill -9 while the call waits; the
// resumed run asks again (the restart neither approves nor denies it), and
// the approval then runs it once.
func TestApprovalKill9PendingAskedAgainE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := askingServer(t, shellCall{"call_1", countCommand})
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	p := chatAsking(t, bin, srv, dir, "--session", sess)
	p.line(t, `{"message":"clean up"}`)
	awaitEvent(t, p, protocol.TypeApprovalRequested, "call_1", 1)
	p.kill9(t)

	r := chatAsking(t, bin, srv, dir, "--resume", sess)
	again := awaitEvent(t, r, protocol.TypeApprovalRequested, "call_1", 1)
	if ranTimes(dir) != 0 {
		t.Fatal("the restart ran the call")
	}
	if evs := events(r.stdout.String()); len(evs) > 0 {
		if _, ok := lastOf(evs, protocol.TypeApprovalResolved, ""); ok {
			t.Fatalf("the restart decided the call: %s", r.stdout)
		}
	}
	r.line(t, `{"approve":"call_1","digest":%q}`, again.Digest)
	awaitEvent(t, r, protocol.TypeTurnEnded, "", 1)
	r.stdin.Close()
	if code := r.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, r.stderr)
	}
	jsonRun(t, r.stdout.String())
	if n := ranTimes(dir); n != 1 {
		t.Errorf("the call ran %d times", n)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// TestApprovalKill9ApprovedRunsOnceE2E: kill -9 after the approval but
// before the call started (it waits for the one tool slot a slow call
// holds); the resumed run starts it exactly once.
func TestApprovalKill9ApprovedRunsOnceE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := askingServer(t, shellCall{"call_slow", "exec sleep 20"}, shellCall{"call_2", countCommand})
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	p := chatAsking(t, bin, srv, dir, "--session", sess, "--max-parallel-tools", "1")
	p.line(t, `{"message":"clean up"}`)
	slow := awaitEvent(t, p, protocol.TypeApprovalRequested, "call_slow", 1)
	second := awaitEvent(t, p, protocol.TypeApprovalRequested, "call_2", 1)
	p.line(t, `{"approve":"call_slow","digest":%q}`, slow.Digest)
	awaitEvent(t, p, protocol.TypeToolStarted, "call_slow", 1)
	p.line(t, `{"approve":"call_2","digest":%q}`, second.Digest)
	awaitEvent(t, p, protocol.TypeApprovalResolved, "call_2", 1)
	if ranTimes(dir) != 0 {
		t.Fatal("the second call started while the slow one held the only slot")
	}
	p.kill9(t)

	r := chatAsking(t, bin, srv, dir, "--resume", sess, "--max-parallel-tools", "1")
	r.stdin.Close()
	if code := r.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, r.stderr)
	}
	evs := jsonRun(t, r.stdout.String())
	if _, asked := lastOf(evs, protocol.TypeApprovalRequested, ""); asked {
		t.Errorf("the resumed run asked again for an approved call:\n%s", r.stdout)
	}
	if n := ranTimes(dir); n != 1 {
		t.Errorf("the approved call ran %d times, want exactly once", n)
	}
	if got := toolResult(t, srv, "call_slow"); !strings.Contains(got, `"type":"tool_lost"`) {
		t.Errorf("the call that had started: %s", got)
	}
}

// TestApprovalUnattendedDeniesE2E: with no terminal and no
// --input-format json nobody can decide: the call is denied at once, the
// model reads why and stderr says which call — the run never hangs until
// the approval timeout.
func TestApprovalUnattendedDeniesE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := askingServer(t, shellCall{"call_1", countCommand})
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "run", "--ask", "writes", "--allow-shell", "--workspace", dir, "--session", filepath.Join(dir, "s.jsonl"), "clean up")
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	if got := toolResult(t, srv, "call_1"); !strings.Contains(got, `"status":"denied"`) || !strings.Contains(got, "no one can give it in this run") {
		t.Errorf("the model read %s", got)
	}
	if !strings.Contains(p.stderr.String(), "main's call call_1 of shell needs approval and no one can give it here: denied") {
		t.Errorf("stderr: %s", p.stderr)
	}
	if ranTimes(dir) != 0 {
		t.Error("the call ran")
	}
}

// TestAskUnknownToolE2E: --ask of a tool the run does not offer is a usage
// error naming the tools there are (a typo must not leave a tool unasked).
func TestAskUnknownToolE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := askingServer(t)
	dir := t.TempDir()
	p := startBinary(t, bin, srv, dir, "run", "--ask", "shell", "--workspace", dir, "--session", filepath.Join(dir, "s.jsonl"), "hi")
	if code := p.wait(t); code != exitUsage {
		t.Fatalf("exit %d, want %d\nstderr: %s", code, exitUsage, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), `--ask: "shell" is no tool of this run (the shell tool is offered with --allow-shell)`) || len(srv.Requests()) != 0 {
		t.Errorf("stderr: %s", p.stderr)
	}
}

// TestApprovalInputEndsDeniesE2E: the input decisions came from ends
// while a call waits: no one can decide it any more, so it is denied at
// once (the model reads why) instead of waiting out the approval timeout.
func TestApprovalInputEndsDeniesE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := askingServer(t, shellCall{"call_1", countCommand})
	dir := t.TempDir()
	p := runAsking(t, bin, srv, dir)
	awaitEvent(t, p, protocol.TypeApprovalRequested, "call_1", 1)
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	evs := jsonRun(t, p.stdout.String())
	if res, _ := lastOf(evs, protocol.TypeApprovalResolved, "main"); res.Approval != "denied" || res.WaitedMS > 10_000 {
		t.Errorf("approval_resolved %+v", res)
	}
	if got := toolResult(t, srv, "call_1"); !strings.Contains(got, "no one can give it in this run") {
		t.Errorf("the model read %s", got)
	}
	if !strings.Contains(p.stderr.String(), "input ended: no one can decide main's call call_1 of shell any more: denied") {
		t.Errorf("stderr: %s", p.stderr)
	}
}

// TestApprovalGrantKeptAcrossResumeE2E: "approve for this session"
// ({"approve":…,"for":"tool"}) outlives the process: the session file
// records the grant, and the resumed session runs the tool's next call
// without asking.
func TestApprovalGrantKeptAcrossResumeE2E(t *testing.T) {
	bin := buildBinary(t)
	srv := askingServer(t, shellCall{"call_1", countCommand})
	dir := t.TempDir()
	sess := filepath.Join(dir, "s.jsonl")
	p := chatAsking(t, bin, srv, dir, "--session", sess)
	p.line(t, `{"message":"clean up"}`)
	req := awaitEvent(t, p, protocol.TypeApprovalRequested, "call_1", 1)
	p.line(t, `{"approve":"call_1","digest":%q,"for":"tool"}`, req.Digest)
	awaitEvent(t, p, protocol.TypeTurnEnded, "", 1)
	p.stdin.Close()
	if code := p.wait(t); code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", code, p.stderr)
	}
	if _, ok := lastOf(jsonRun(t, p.stdout.String()), protocol.TypeApprovalGranted, "main"); !ok {
		t.Fatalf("no approval_granted:\n%s", p.stdout)
	}

	r := chatAsking(t, bin, srv, dir, "--resume", sess)
	r.line(t, `{"message":"again"}`)
	awaitEvent(t, r, protocol.TypeTurnEnded, "", 1)
	r.stdin.Close()
	if code := r.wait(t); code != exitOK {
		t.Fatalf("resume: exit %d\nstderr: %s", code, r.stderr)
	}
	if _, asked := lastOf(jsonRun(t, r.stdout.String()), protocol.TypeApprovalRequested, ""); asked {
		t.Errorf("the resumed session asked again for a granted tool:\n%s", r.stdout)
	}
	if n := ranTimes(dir); n != 2 {
		t.Errorf("the command ran %d times, want 2", n)
	}
}
