package trace_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
)

// step is one Step as the writer was given it: the event, its agent's path
// and states, the effects, and the path each effect must name (its agent's,
// when that is not the step's agent).
type step struct {
	ev                   kernel.Event
	agent, before, after string
	effs                 []kernel.Effect
	paths                []string
}

func newStep(tree trace.Tree, ev kernel.Event, target kernel.AgentID, before, after fsm.State, effs []kernel.Effect) step {
	st := step{ev: ev, effs: slices.Clone(effs)}
	if target != kernel.NoAgent {
		st.agent, st.before, st.after = tree.AgentPath(target), before.String(), after.String()
	}
	for _, e := range effs {
		p := ""
		if e.Agent != target && e.Agent >= 0 {
			p = tree.AgentPath(e.Agent)
		}
		st.paths = append(st.paths, p)
	}
	return st
}

// checkOriginals: decoding each step line gives back exactly what the writer
// was given (less the fields the format leaves out), so the encoder cannot
// drop a field that the re-encode below would drop too.
func checkOriginals(t *testing.T, name string, trace []byte, steps []step) {
	t.Helper()
	i := -1
	for n, line := range bytes.Split(bytes.TrimSuffix(trace, []byte("\n")), []byte("\n")) {
		rec, err := traceRecord(line)
		if err != nil || rec == nil || rec.Type != "step" {
			continue
		}
		i++
		if i >= len(steps) || !reflect.DeepEqual(*rec.Event, steps[i].ev) {
			t.Fatalf("%s line %d: event decodes to %+v, was %+v", name, n+1, *rec.Event, steps[min(i, len(steps)-1)].ev)
		}
		if st := steps[i]; rec.Agent != st.agent || rec.Before != st.before || rec.After != st.after {
			t.Fatalf("%s line %d: agent %q %s→%s, was %q %s→%s", name, n+1, rec.Agent, rec.Before, rec.After, st.agent, st.before, st.after)
		}
		if len(rec.Effects) != len(steps[i].effs) {
			t.Fatalf("%s line %d: %d effects, was %d", name, n+1, len(rec.Effects), len(steps[i].effs))
		}
		for j, got := range rec.Effects {
			want := steps[i].effs[j]
			want.Messages, want.State, want.Trigger, want.Err = nil, 0, 0, nil // not in the format
			if !reflect.DeepEqual(got.Effect, want) || got.Path != steps[i].paths[j] {
				t.Fatalf("%s line %d: effect %d decodes to %q %+v, was %q %+v", name, n+1, j, got.Path, got.Effect, steps[i].paths[j], want)
			}
		}
	}
	if i+1 != len(steps) {
		t.Fatalf("%s: %d step lines for %d steps", name, i+1, len(steps))
	}
}

func traceRecord(line []byte) (*trace.Record, error) {
	if bytes.HasPrefix(line, []byte(`{"type":"header"`)) {
		return nil, nil
	}
	r, err := trace.ReadRecord(line)
	return &r, err
}

// TestEncoderMatchesJSON: every line the hand-written encoder wrote for the
// whole scenario suite (plus edge cases) is byte for byte what encoding/json
// writes for the decoded record, and decodes to the event or effect the
// writer was given.
func TestEncoderMatchesJSON(t *testing.T) {
	ss, err := scenario.LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	for _, s := range ss {
		var one bytes.Buffer
		var steps []step
		observe := func(si sim.StepInfo) {
			steps = append(steps, newStep(si.Core, si.Event, si.Target, si.Before, si.After, si.Effects))
		}
		if _, err := sim.Run(s, sim.Options{Trace: &one, Observe: observe}); err != nil {
			t.Fatal(err)
		}
		checkOriginals(t, s.Name, one.Bytes(), steps)
		all.Write(one.Bytes())
	}
	// Edge cases: every optional field set, odd strings.
	k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
	// Invalid UTF-8 is left out: decoding turns it into U+FFFD before the
	// re-encode; TestRenderIsJSON compares it against encoding/json raw.
	odd := "quote \" back \\ nl \n tab \t ctrl \x01 é ✓ sep \u2028 <html>&"
	evs := []kernel.Event{
		{Kind: kernel.EvLLMDelta, At: 5, Agent: 3, Turn: 9, Op: 77, Chunk: 4, Text: odd, Call: &kernel.CallDelta{Index: 2, ID: odd, Name: "n", Args: odd},
			Failure: kernel.FailureStream, Status: kernel.ToolError, Attempt: 2, Delay: time.Second, Usage: &kernel.Usage{PromptTokens: 1, CompletionTokens: 2},
			CallID: odd, Digest: odd, Verdict: kernel.VerdictApproveTool},
		kernel.Deny(8, 2, "c1", odd),
		{Kind: kernel.EvLLMEnd, At: 6, Usage: &kernel.Usage{CompletionTokens: 2}},
		{Kind: kernel.EvLLMEnd, At: 7, Usage: &kernel.Usage{}},
		{Kind: kernel.EvLLMEnd, At: 8, Usage: &kernel.Usage{PromptTokens: 1 << 40, CompletionTokens: 2, CachedTokens: 3, ReasoningTokens: 4, Requests: 5, Unreported: 6},
			Reasoning: &kernel.Reasoning{Text: odd, Field: "reasoning_content", Details: `[{"type":"reasoning.text","text":"` + odd + `"}]`}},
		{Kind: kernel.EvLLMEnd, At: 9, Usage: &kernel.Usage{ReasoningTokens: 4}, Reasoning: &kernel.Reasoning{Details: odd}},
		{Kind: kernel.EvLLMEnd, At: 10, Reasoning: &kernel.Reasoning{}},
		{Kind: kernel.EvCompact, At: 11, Text: odd},
	}
	effs := []kernel.Effect{
		{Kind: kernel.EffStartTool, Agent: 1, Op: 2, At: 3, Timer: kernel.TimerTool, Call: kernel.ToolCall{ID: odd}, Code: kernel.ErrCodeBadInput, Detail: odd, Profile: odd},
		{Kind: kernel.EffEmit, Agent: -1, Life: kernel.Lifecycle{Seq: 1, At: 2, Kind: kernel.LifeCallFinished, Agent: 4, Turn: 5, Op: 6, Child: 7, CallID: odd, Name: odd, Text: odd,
			From: 1, To: 2, Trigger: 3, Outcome: 2, Reason: 3, End: 1, Status: 4, N: 5, Queued: true, Since: 6, Delay: 7, Detail: odd, Digest: odd, Approval: kernel.ApprovalWithdrawn,
			Usage: &kernel.Usage{PromptTokens: 1, CachedTokens: 1, Requests: 2, Unreported: 1}, Profile: odd}},
		{Kind: kernel.EffEmit, Agent: 0, Life: kernel.Lifecycle{Seq: 2, Kind: kernel.LifeOpEnded, Usage: &kernel.Usage{}}},
		{Kind: kernel.EffStartLLM, Agent: 0, Op: 3, Compact: true},
		{Kind: kernel.EffStartLLM, Agent: 0, Op: 4, Profile: odd},
	}
	var edge bytes.Buffer
	hdr := trace.Header{Source: "live", Name: odd, Seed: 1 << 63, Scenario: odd, Options: map[string]string{"b": odd, "a": "<&>"},
		Limits: kernel.Limits{Grace: -1, FirstTokenTimeout: 2, StallTimeout: 3, ToolTimeout: 4, TurnTimeout: 5, Debounce: 6, MaxDepth: 7, MaxChildren: 8, MaxRequests: 1 << 40, MaxMessageBytes: 9, MaxCalls: 10, MaxParallelTools: 11,
			MaxAgents: 12, MaxParallelRequests: 13, ApprovalTimeout: 14, ContextWindow: 15, CompactPercent: 16},
		RootName: odd, System: odd, ChildSystem: odd, Build: odd, Idempotent: []string{odd, "grep"}, Turns: 1 << 40, Ask: []string{odd, "*"}, DelegateTool: odd,
		Profiles: []kernel.Profile{{Name: odd, Description: odd, System: odd, Tools: []string{odd}, Delegates: []string{odd}, MaxRequests: 1, MaxChildren: 2, MaxDepth: 3}, {Name: "all", AllTools: true}}, RootProfile: odd,
		History: []kernel.Message{{Role: "user", Content: odd}, {Role: "assistant", ToolCalls: []kernel.ToolCall{{ID: "c1", Name: "grep", Arguments: odd}},
			Reasoning: &kernel.Reasoning{Text: odd, Field: "reasoning_content"}}, {Role: "user", Content: odd, Summary: true}}}
	w := trace.NewWriter(&edge, hdr)
	var steps []step
	for _, ev := range evs {
		w.Step(k, ev, kernel.NoAgent, 0, effs)
		steps = append(steps, newStep(k, ev, kernel.NoAgent, 0, 0, effs))
	}
	// The root as the step's agent, with effects on it and on none.
	rootEffs := []kernel.Effect{effs[1], {Kind: kernel.EffStartLLM, Agent: kernel.Root, Op: 9}}
	w.Step(k, evs[1], kernel.Root, fsm.Streaming, rootEffs)
	steps = append(steps, newStep(k, evs[1], kernel.Root, fsm.Streaming, k.AgentState(kernel.Root), rootEffs))
	w.Note(time.Second, odd)
	if _, err := w.Close(time.Second); err != nil {
		t.Fatal(err)
	}
	checkOriginals(t, "edge", edge.Bytes(), steps)
	// The header decodes to what the writer was given: a field the encoder
	// dropped would vanish from the re-encode below as well.
	first, _, _ := bytes.Cut(edge.Bytes(), []byte("\n"))
	got, err := trace.ReadHeader(first)
	if err != nil {
		t.Fatal(err)
	}
	hdr.Type, hdr.Format = "header", trace.FormatVersion
	if !reflect.DeepEqual(got, hdr) {
		t.Fatalf("header decodes to\n%+v\nwas\n%+v", got, hdr)
	}
	all.Write(edge.Bytes())
	lines := bytes.Split(bytes.TrimSuffix(all.Bytes(), []byte("\n")), []byte("\n"))
	checked := 0
	headers := 0
	for i, line := range lines {
		var v any
		if bytes.HasPrefix(line, []byte(`{"type":"header"`)) {
			hdr, err := trace.ReadHeader(line)
			if err != nil {
				t.Fatalf("line %d: %v\n%s", i+1, err, line)
			}
			v = hdr
			headers++
		} else {
			rec, err := trace.ReadRecord(line)
			if err != nil {
				t.Fatalf("line %d: %v\n%s", i+1, err, line)
			}
			v = rec
			checked += len(rec.Effects) // each effect object in the line
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		if got := append(append([]byte(nil), line...), '\n'); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("line %d differs from encoding/json\n got %s\nwant %s", i+1, got, want.Bytes())
		}
		checked++
	}
	if checked < 1000 || headers != len(ss)+1 {
		t.Fatalf("only %d records and %d headers checked", checked, headers)
	}
}
