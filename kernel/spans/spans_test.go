package spans_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
)

// derive runs an embedded scenario and derives its spans; it returns them
// by id as they ended, and the deriver.
func derive(t *testing.T, name string, opt sim.Options) (map[spans.ID]spans.Span, *spans.Deriver, []sim.StepInfo) {
	t.Helper()
	all, err := scenario.LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	var s *scenario.Scenario
	for _, x := range all {
		if x.Name == name {
			s = x
		}
	}
	if s == nil {
		t.Fatalf("no scenario %q", name)
	}
	d := spans.New(spans.Config{RootName: s.KernelConfig().RootName, Model: "m"})
	ended := map[spans.ID]spans.Span{}
	var steps []sim.StepInfo
	opt.Observe = func(si sim.StepInfo) {
		si.Effects = append([]kernel.Effect(nil), si.Effects...)
		steps = append(steps, si)
		for _, c := range d.Step(si.Event, si.Effects) {
			if c.Kind == spans.Ended {
				ended[c.Span.ID] = *c.Span
			}
		}
	}
	r, err := sim.Run(s, opt)
	if err != nil || !r.Passed {
		t.Fatalf("%s: %v %v", name, err, r.Violations)
	}
	if open := d.Open(); len(open) > 0 {
		t.Fatalf("%d span(s) still open after the run, the first %s", len(open), open[0].Name())
	}
	return ended, d, steps
}

func named(t *testing.T, all map[spans.ID]spans.Span, name string) spans.Span {
	t.Helper()
	var found []spans.Span
	for _, sp := range all {
		if sp.Name() == name {
			found = append(found, sp)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1", len(found), name)
	}
	return found[0]
}

// TestNestingDepth2: a delegation of a delegation nests as the GenAI
// conventions' tool-based transfer has it — each child's turn under the
// delegate call that spawned it, that call under its agent's turn — and an
// abort at the root ends every span, each saying what ended it.
func TestNestingDepth2(t *testing.T) {
	all, _, _ := derive(t, "cancel-reaches-descendants", sim.Options{})
	root := named(t, all, "invoke_agent main")
	del1 := named(t, all, "execute_tool delegate task1")
	task1 := named(t, all, "invoke_agent task1")
	del2 := named(t, all, "execute_tool delegate explore")
	explore := named(t, all, "invoke_agent explore")
	for _, l := range []struct {
		child, parent spans.Span
	}{{del1, root}, {task1, del1}, {del2, task1}, {explore, del2}} {
		if l.child.Parent != l.parent.ID || l.child.Trace != root.Trace {
			t.Errorf("%s: parent %d trace %d, want %d (%s) in trace %d", l.child.Name(), l.child.Parent, l.child.Trace, l.parent.ID, l.parent.Name(), root.Trace)
		}
		if l.child.Start < l.parent.Start || l.child.End > l.parent.End {
			t.Errorf("%s [%v, %v] is not within %s [%v, %v]", l.child.Name(), l.child.Start, l.child.End, l.parent.Name(), l.parent.Start, l.parent.End)
		}
	}
	if root.Parent != 0 || explore.AgentPath != "main/task1/explore" {
		t.Errorf("root parent %d, explore's path %q", root.Parent, explore.AgentPath)
	}
	for sp, want := range map[*spans.Span][2]string{
		&root: {"interrupted", "user_cancel"}, &task1: {"interrupted", "parent_cancelled"}, &explore: {"interrupted", "parent_cancelled"},
		&del2: {"interrupted", "parent_cancelled"},
	} {
		if sp.ErrorType() != want[0] || sp.Reason.String() != want[1] {
			t.Errorf("%s: error.type %q reason %s, want %v", sp.Name(), sp.ErrorType(), sp.Reason, want)
		}
	}
	for _, sp := range all {
		if sp.Kind == spans.KindChat && sp.OpEnd == kernel.OpCancelled && (sp.ErrorType() != "cancelled" || sp.Reason == kernel.ReasonNone) {
			t.Errorf("%s of %s cancelled: error.type %q reason %s", sp.Name(), sp.AgentPath, sp.ErrorType(), sp.Reason)
		}
	}
}

// TestTurnWaitsForItsSpans: a turn that completes while the request an
// interjection cut still winds down ends its span when that request's span
// ends; the cut request says it was cancelled, for no abort.
func TestTurnWaitsForItsSpans(t *testing.T) {
	all, _, _ := derive(t, "cut-request-outlives-turn", sim.Options{})
	root := named(t, all, "invoke_agent main")
	var cut, answer spans.Span
	for _, sp := range all {
		if sp.Kind == spans.KindChat && sp.OpEnd == kernel.OpCancelled {
			cut = sp
		} else if sp.Kind == spans.KindChat {
			answer = sp
		}
	}
	if root.ErrorType() != "" || root.End != cut.End || cut.End <= answer.End {
		t.Errorf("turn ends %v, the cut request %v, the answer %v", root.End, cut.End, answer.End)
	}
	if cut.ErrorType() != "cancelled" || cut.Reason != kernel.ReasonNone || answer.FinishReason != "stop" || !answer.GotChunk {
		t.Errorf("cut: %q %s; answer: finish %q chunk %v", cut.ErrorType(), cut.Reason, answer.FinishReason, answer.GotChunk)
	}
}

// TestReplayDerivesTheSameSpans: a fresh derivation fed the same steps —
// a recovered process replaying a crashed one's log — holds the same open
// spans under the same ids at every step.
func TestReplayDerivesTheSameSpans(t *testing.T) {
	_, _, steps := derive(t, "nested-delegation", sim.Options{})
	for cut := 1; cut < len(steps); cut++ {
		a, b := spans.New(spans.Config{RootName: "main"}), spans.New(spans.Config{RootName: "main"})
		for _, si := range steps[:cut] {
			a.Step(si.Event, si.Effects)
			b.Step(si.Event, si.Effects)
		}
		if !reflect.DeepEqual(a.Open(), b.Open()) {
			t.Fatalf("after %d steps the derivations differ", cut)
		}
	}
}

// TestRequestFacts: a request's span says how its stream finished, what it
// used, when its first chunk came, and its retries; a failed one its
// failure's class.
func TestRequestFacts(t *testing.T) {
	k := kernel.MustNew(kernel.Config{Limits: kernel.DefaultLimits()})
	d := spans.New(spans.Config{Model: "gpt-x"})
	var ended []spans.Span
	var req kernel.OpID // the request the last step started
	step := func(ev kernel.Event) {
		effs := k.Step(ev)
		for _, e := range effs {
			if e.Kind == kernel.EffStartLLM {
				req = e.Op
			}
		}
		for _, c := range d.Step(ev, effs) {
			if c.Kind == spans.Ended {
				ended = append(ended, *c.Span)
			}
		}
	}
	step(kernel.Submit(0, "hi"))
	step(kernel.LLMRetry(100*time.Millisecond, req, 1, time.Second, "HTTP 429"))
	step(kernel.TextDelta(1500*time.Millisecond, req, 1, "hello"))
	end := kernel.LLMEnd(2*time.Second, req)
	end.Usage = &kernel.Usage{PromptTokens: 12, CompletionTokens: 3}
	step(end)
	step(kernel.Submit(3*time.Second, "again"))
	step(kernel.LLMError(4*time.Second, req, kernel.FailureRateLimit, "HTTP 429: slow down"))
	if len(ended) != 4 {
		t.Fatalf("%d spans ended, want 4", len(ended))
	}
	chat := ended[0]
	if chat.Name() != "chat gpt-x" || chat.FinishReason != "stop" || chat.Usage == nil || chat.Usage.PromptTokens != 12 ||
		chat.FirstChunk-chat.Start != 1500*time.Millisecond || len(chat.Events) != 1 || chat.Events[0].Kind != spans.EventRetry {
		t.Errorf("chat span %+v", chat)
	}
	failed := ended[2]
	if failed.ErrorType() != "rate_limit" || failed.Reason != kernel.ReasonLLMError || failed.Detail != "HTTP 429: slow down" {
		t.Errorf("failed chat: %q %s %q", failed.ErrorType(), failed.Reason, failed.Detail)
	}
	if turn := ended[3]; turn.Kind != spans.KindAgent || turn.ErrorType() != "failed" || turn.Trace != 2 {
		t.Errorf("second turn's span: %s %q trace %d", turn.Name(), turn.ErrorType(), turn.Trace)
	}
	attrs := map[string]any{}
	for _, a := range append(chat.StartAttrs(), chat.EndAttrs()...) {
		attrs[a.Key] = a.Value
	}
	if attrs[spans.KeyOperation] != "chat" || attrs[spans.KeyRequestModel] != "gpt-x" || attrs[spans.KeyInputTokens] != int64(12) ||
		attrs[spans.KeyOutputTokens] != int64(3) || !reflect.DeepEqual(attrs[spans.KeyFinishReasons], []string{"stop"}) || attrs[spans.KeyFirstChunk] != 1.5 {
		t.Errorf("chat attributes %v", attrs)
	}
	if _, ok := attrs[spans.KeyErrorType]; ok {
		t.Errorf("a completed request has error.type")
	}
}
