package trace_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// TestApprovalRunRebuilds: a run with approvals — requests, a denial with
// a note, a grant, an expiry, a withdrawal — is written as encoding/json
// writes it, every line decodes to what the writer was given, and a fresh
// kernel built from the header (its ask list and approval_timeout) and fed
// the decoded events answers every step with the same effects, as a
// rebuild from a write-ahead log does (docs/durable.md, "Approvals across
// a crash").
func TestApprovalRunRebuilds(t *testing.T) {
	cfg := kernel.Config{Limits: kernel.DefaultLimits(), Ask: []string{"shell", "write_file"}}
	cfg.ApprovalTimeout = 40 * time.Second
	k := kernel.MustNew(cfg)
	var buf bytes.Buffer
	w := trace.NewWriter(&buf, trace.HeaderOf(k.Config()))
	var steps []step
	var now time.Duration
	var ops = map[string]kernel.OpID{}
	var req kernel.OpID
	do := func(ev kernel.Event) {
		ev.At = now
		target := k.Target(ev)
		before := k.AgentState(target)
		effs := slices.Clone(k.Step(ev))
		w.Step(k, ev, target, before, effs)
		steps = append(steps, newStep(k, ev, target, before, k.AgentState(target), effs))
		for _, e := range effs {
			switch e.Kind {
			case kernel.EffStartLLM:
				req = e.Op
			case kernel.EffStartTool:
				ops[e.Call.ID] = e.Op
			}
		}
	}
	calls := func(cs ...kernel.ToolCall) {
		for i, c := range cs {
			do(kernel.CallFragment(0, req, uint32(i+1), kernel.CallDelta{Index: i, ID: c.ID, Name: c.Name, Args: c.Arguments}))
		}
		do(kernel.LLMEnd(0, req))
	}
	do(kernel.Submit(0, "go"))
	calls(kernel.ToolCall{ID: "c1", Name: "shell", Arguments: `{"c":"ls"}`}, kernel.ToolCall{ID: "c2", Name: "write_file", Arguments: `{"p":"x"}`},
		kernel.ToolCall{ID: "c3", Name: "read_file", Arguments: `{}`})
	do(kernel.Deny(0, kernel.Root, "c2", `not "x"`))
	do(kernel.Decide(0, kernel.Root, "c1", kernel.Digest(`{"c":"ls"}`), kernel.VerdictApproveTool, ""))
	do(kernel.Approve(0, kernel.Root, "c1", "stale"))
	do(kernel.ToolResult(0, ops["c1"], kernel.ToolOK, "a b"))
	do(kernel.ToolResult(0, ops["c3"], kernel.ToolOK, "r"))
	calls(kernel.ToolCall{ID: "c4", Name: "write_file", Arguments: `{}`}, kernel.ToolCall{ID: "c5", Name: "shell", Arguments: `{}`})
	now = 40 * time.Second
	timers := 0
	for _, e := range steps[len(steps)-1].effs {
		if e.Kind == kernel.EffSetTimer && e.Timer == kernel.TimerApproval {
			do(kernel.TimerFired(0, e.Op))
			timers++
		}
	}
	do(kernel.ToolResult(0, ops["c5"], kernel.ToolOK, "ok"))
	calls(kernel.ToolCall{ID: "c6", Name: "write_file", Arguments: `{}`})
	do(kernel.Cancel(0, kernel.Root))
	if timers != 1 {
		t.Fatalf("%d approval timers", timers)
	}
	if _, err := w.Close(now); err != nil {
		t.Fatal(err)
	}
	checkOriginals(t, "approvals", buf.Bytes(), steps)

	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	hdr, err := trace.ReadHeader(lines[0])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hdr.Ask, cfg.Ask) || hdr.Limits.ApprovalTimeout != cfg.ApprovalTimeout {
		t.Fatalf("header: ask %q, approval_timeout %v", hdr.Ask, hdr.Limits.ApprovalTimeout)
	}
	fresh := kernel.MustNew(hdr.Config())
	kinds := map[kernel.LifeKind]int{}
	for i, line := range lines[1 : len(lines)-1] {
		rec, err := trace.ReadRecord(line)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(rec); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(append(slices.Clone(line), '\n'), want.Bytes()) {
			t.Fatalf("line %d differs from encoding/json\n got %s\nwant %s", i+2, line, want.Bytes())
		}
		got := fresh.Step(*rec.Event)
		if len(got) != len(rec.Effects) {
			t.Fatalf("step %d: the rebuilt kernel gave %d effects, the trace %d", i+1, len(got), len(rec.Effects))
		}
		for j := range got {
			got[j].Messages = nil // not in the format
			if got[j].Describe() != rec.Effects[j].Describe() {
				t.Fatalf("step %d effect %d: %s, traced %s", i+1, j, got[j].Describe(), rec.Effects[j].Describe())
			}
			kinds[got[j].Life.Kind]++
		}
	}
	for _, want := range []kernel.LifeKind{kernel.LifeApprovalRequested, kernel.LifeApprovalResolved, kernel.LifeApprovalGranted, kernel.LifeStale} {
		if kinds[want] == 0 {
			t.Errorf("the run has no %s record", want)
		}
	}
	if fresh.AgentState(kernel.Root) != fsm.Idle || !fresh.Quiescent() {
		t.Fatalf("the rebuilt tree is %s", fresh.AgentState(kernel.Root))
	}
}
