package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/internal/fakeopenai"
	"github.com/escapement/escapement/internal/protocheck"
)

// toolTurn is a model that calls a shell that exits 3, then a read of a
// file that does not exist, then answers.
func toolTurn(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
	switch req.N {
	case 1:
		_ = w.Call(0, "c1", "shell", `{"command":"echo hi; exit 3"}`, 8)
		_ = w.Finish("tool_calls")
		_ = w.Usage(10, 2)
		_ = w.Done()
	case 2:
		_ = w.Call(0, "c2", "read_file", `{"path":"missing.txt"}`, 8)
		_ = w.Finish("tool_calls")
		_ = w.Usage(20, 3)
		_ = w.Done()
	default:
		_ = w.Text("all done")
		_ = w.Finish("stop")
		_ = w.Usage(30, 4)
		_ = w.Done()
	}
}

// run --json prints the event protocol of the escapement CLI: every line
// valid against its schema, a started event first and a result event
// last, with the answer, the usage of the turn and the workflow as the
// session; the calls' results are in their call_finished events.
func TestRunJSONIsTheEventProtocol(t *testing.T) {
	e := newCLIEnv(t, toolTurn)
	r := e.cli("", nil, "run", "--json", "go")
	if r.code != 0 {
		t.Fatalf("run: exit %d, stderr %q", r.code, r.err)
	}
	evs := protocheck.Lines(t, r.out)
	first, last := evs[0], evs[len(evs)-1]
	id := workflowID(t, r.err)
	if first.Type != protocol.TypeStarted || first.Session != id || first.Resumed || !contains(first.Tools, "shell") || first.Limits["max_requests"] == 0 {
		t.Fatalf("first event: %+v", first)
	}
	if last.Type != protocol.TypeResult || last.Outcome != "completed" || last.Answer != "all done" || last.Turns != 1 || last.Requests != 3 ||
		last.Usage == nil || last.Usage.PromptTokens != 60 || last.Usage.CompletionTokens != 9 || last.Session != id ||
		!strings.Contains(last.Resume, "--workflow "+id) {
		t.Fatalf("last event: %+v usage %+v", last, last.Usage)
	}
	var results []string
	for _, ev := range evs {
		if ev.Type == protocol.TypeCallFinished {
			results = append(results, ev.Tool+" "+ev.Status+": "+ev.Result)
		}
	}
	if len(results) != 2 || !strings.Contains(results[0], "exit status 3") || !strings.Contains(results[1], "missing.txt") {
		t.Fatalf("call_finished results: %q", results)
	}
	if jq, err := exec.LookPath("jq"); err == nil {
		cmd := exec.Command(jq, "-r", `select(.type == "result") | "\(.outcome): \(.answer) (\(.usage.prompt_tokens)+\(.usage.completion_tokens) tokens)"`)
		cmd.Stdin = strings.NewReader(r.out)
		got, err := cmd.Output()
		if err != nil || string(got) != "completed: all done (60+9 tokens)\n" {
			t.Fatalf("the README's jq consumer: %q, %v", got, err)
		}
	}
}

// Without --json, stderr shows the tree's activity as the escapement CLI
// does: a shell's exit status, a failed tool's reason.
func TestRunShowsToolEnds(t *testing.T) {
	e := newCLIEnv(t, toolTurn)
	r := e.cli("", nil, "run", "go")
	if r.code != 0 || r.out != "all done\n" {
		t.Fatalf("run: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	for _, want := range []string{"[main] shell {\"command\":\"echo hi; exit 3\"}", "[main] ← shell exit 3", "[main] ← read_file error: ", "missing.txt"} {
		if !strings.Contains(r.err, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.err)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// chat --json prints the event protocol too: two turns from stdin, every
// line valid, the result last with the second turn's answer and both
// turns counted.
func TestChatJSONIsTheEventProtocol(t *testing.T) {
	e := newCLIEnv(t, func(ctx context.Context, req *fakeopenai.Request, w *fakeopenai.Writer) {
		w.Answer("you said "+req.Body.Last().Content, 3)
	})
	for _, args := range [][]string{{"chat", "--json"}, {"chat", "--json", "--continue-after-events", "1"}} {
		// The second continues the workflow as new after each turn: the
		// turns run on new kernels, their records numbered afresh.
		r := e.cli("one\ntwo\n", nil, args...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", args, r.code, r.err)
		}
		evs := protocheck.Lines(t, r.out)
		last := evs[len(evs)-1]
		if evs[0].Type != protocol.TypeStarted || last.Type != protocol.TypeResult || last.Answer != "you said two" || last.Turns != 2 || last.Requests != 2 {
			t.Fatalf("%q: first %+v\nlast %+v", args, evs[0], last)
		}
		if len(args) > 2 && !e.continued(workflowID(t, r.err)) {
			t.Fatalf("%q: the workflow did not continue as new", args)
		}
	}
}

// continued says the latest run of workflow id continued an earlier one
// (Continue-As-New).
func (e *cliEnv) continued(id string) bool {
	e.t.Helper()
	c, err := client.Dial(client.Options{HostPort: e.cfg.HostPort, Namespace: e.cfg.Namespace})
	if err != nil {
		e.t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	ev, err := it.Next()
	if err != nil {
		e.t.Fatal(err)
	}
	return ev.GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId() != ""
}
