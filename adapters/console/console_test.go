package console

import (
	"bytes"
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/protocol"
)

func show(c *Console, evs ...protocol.Event) (out, errs string) {
	var o, e bytes.Buffer
	c.Out, c.Err = &o, &e
	for _, ev := range evs {
		c.Show(ev)
	}
	return o.String(), e.String()
}

var turn = []protocol.Event{
	{Type: protocol.TypeRequestStarted, Agent: "main"},
	{Type: protocol.TypeDelta, Agent: "main", Text: "Let me look."},
	{Type: protocol.TypeToolStarted, Agent: "main", Tool: "read_file", Arguments: "{\"path\":\n\"x\"}"},
	{Type: protocol.TypeCallFinished, Agent: "main", Tool: "read_file", Status: "error", Reason: "tool_error", Result: "error: read_file: x: no such file or directory\nmore"},
	{Type: protocol.TypeDelegated, Agent: "main", Child: "main/h", Task: "find"},
	{Type: protocol.TypeDelegated, Agent: "main", Child: "main/scout", Profile: "scout", Task: "look"},
	{Type: protocol.TypeDelta, Agent: "main/h", Text: "child text"},
	{Type: protocol.TypeCallFinished, Agent: "main/h", Tool: "shell", Status: "ok", Result: "exit status 3 in 5ms\noutput:\nboom\n"},
	{Type: protocol.TypeCallFinished, Agent: "main", Tool: "delegate", Status: "child", Child: "main/h", Outcome: "completed"},
	{Type: protocol.TypeCallFinished, Agent: "main", Tool: "slow", Status: "timed_out", Reason: "tool_timeout"},
	{Type: protocol.TypeRequestStarted, Agent: "main"},
	{Type: protocol.TypeDelta, Agent: "main", Text: "Done."},
	{Type: protocol.TypeTurnEnded, Agent: "main", Outcome: "completed", Text: "Done."},
}

// TestShow: the root's messages each on their own line, a sub-agent's
// text not on stdout, each call's end with why (a tool's error reason
// without its "error: NAME:" prefix, a shell's exit status, a child's
// outcome, a timeout's reason), arguments on one line.
func TestShow(t *testing.T) {
	out, errs := show(&Console{}, turn...)
	if out != "Let me look.\nDone.\n" {
		t.Errorf("stdout %q", out)
	}
	want := "[main] read_file {\"path\": \"x\"}\n" +
		"[main] ← read_file error: x: no such file or directory\n" +
		"[main] delegate → main/h: find\n" +
		"[main] delegate → main/scout (profile scout): look\n" +
		"[main/h] ← shell exit 3\n" +
		"[main] ← main/h: completed\n" +
		"[main] ← slow timed_out (tool_timeout)\n"
	if errs != want {
		t.Errorf("stderr\n%s\nwant\n%s", errs, want)
	}
}

// TestFinalOnlyAndQuiet: FinalOnly prints the completed turn's answer
// alone; a turn that did not complete prints none, and says why on
// stderr. Quiet (--json) shows only that.
func TestFinalOnlyAndQuiet(t *testing.T) {
	out, _ := show(&Console{FinalOnly: true}, turn...)
	if out != "Done.\n" {
		t.Errorf("final only: %q", out)
	}
	failed := append(append([]protocol.Event{}, turn[:2]...), protocol.Event{Type: protocol.TypeTurnEnded, Agent: "main", Outcome: "failed", Reason: "llm_error", Detail: "HTTP 500: down", Text: "Let me look."})
	out, errs := show(&Console{FinalOnly: true}, failed...)
	if out != "" || !strings.Contains(errs, "(llm_error)\n  HTTP 500: down\n") {
		t.Errorf("final only, failed: %q %q", out, errs)
	}
	out, errs = show(&Console{Quiet: true}, failed...)
	if out != "" || strings.Contains(errs, "read_file") || !strings.Contains(errs, "HTTP 500: down") {
		t.Errorf("quiet: %q %q", out, errs)
	}
}

// TestAnswerHoldsBackTheKey: a key the model repeats in pieces is masked
// whole, however the chunks cut it; on a terminal controls are escaped.
func TestAnswerHoldsBackTheKey(t *testing.T) {
	const key = "sk-abcdef0123456789"
	c := &Console{Secret: key, Redact: func(s string) string { return strings.ReplaceAll(s, key, "[redacted]") }, Terminal: true}
	out, _ := show(c,
		protocol.Event{Type: protocol.TypeDelta, Agent: "main", Text: "key: sk-abc"},
		protocol.Event{Type: protocol.TypeDelta, Agent: "main", Text: "def01234"},
		protocol.Event{Type: protocol.TypeDelta, Agent: "main", Text: "56789 \x1b[2J"},
		protocol.Event{Type: protocol.TypeTurnEnded, Agent: "main", Outcome: "completed"},
	)
	if out != "key: [redacted] \\x1b[2J\n" {
		t.Errorf("stdout %q", out)
	}
}

// TestApprovalsAndCompactions: a call waiting for approval says what waits
// and how to answer it (the call id, the digest) and when it ends; its end
// says how, with a denial's note; a compaction says why and what it did; a
// sub-agent named by its id ("#3") is not the root.
func TestApprovalsAndCompactions(t *testing.T) {
	out, errs := show(&Console{},
		protocol.Event{Type: protocol.TypeApprovalRequested, Agent: "main/h", Tool: "shell", Arguments: `{"cmd":"rm x"}`, CallID: "c1", Digest: "0123456789abcdef", EndsInMS: 300000, Expires: true},
		protocol.Event{Type: protocol.TypeApprovalResolved, Agent: "main/h", Tool: "shell", CallID: "c1", Approval: "denied", Note: "not that"},
		protocol.Event{Type: protocol.TypeCallFinished, Agent: "main/h", Tool: "shell", Status: "denied", Reason: "approval_denied"},
		protocol.Event{Type: protocol.TypeRequestWaiting, Agent: "main/h", Compaction: true},
		protocol.Event{Type: protocol.TypeCompactionStarted, Agent: "main/h", Why: "threshold", Estimate: 170},
		protocol.Event{Type: protocol.TypeCompacted, Agent: "main/h", Summarised: 12},
		protocol.Event{Type: protocol.TypeDelta, Agent: "#3", Text: "not the answer"},
	)
	want := "[main/h] shell {\"cmd\":\"rm x\"} waits for approval (call c1, digest 0123456789abcdef; 5m0s, then it expires)\n" +
		"[main/h] shell denied (call c1): not that\n" +
		"[main/h] ← shell denied (approval_denied)\n" +
		"[main/h] its compaction waits for a request slot (--max-parallel-requests)\n" +
		"[main/h] compacting its history (threshold, about 170 tokens)\n" +
		"[main/h] compacted: 12 messages summarised\n"
	if out != "" || errs != want {
		t.Errorf("stdout %q\nstderr\n%s\nwant\n%s", out, errs, want)
	}
}
