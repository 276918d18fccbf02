package spans_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/sim"
)

// The waits a turn goes through — a request's for a slot, a call's for a
// person's decision — are events of its agent's turn span, and the chat
// or execute_tool span starts when the request or the call really starts
// (docs/semantics.md, "Spans").

// stepper drives a kernel by hand and derives its spans.
type stepper struct {
	t      *testing.T
	k      *kernel.Kernel
	d      *spans.Deriver
	spans  map[spans.ID]spans.Span // every span, as it last changed
	llm    kernel.OpID             // the request the last step started
	digest string                  // the last approval request's digest
}

func newStepper(t *testing.T, cfg kernel.Config) *stepper {
	return &stepper{t: t, k: kernel.MustNew(cfg), d: spans.New(spans.Config{Model: "m"}), spans: map[spans.ID]spans.Span{}}
}

func (s *stepper) step(ev kernel.Event) {
	effs := s.k.Step(ev)
	for _, e := range effs {
		switch {
		case e.Kind == kernel.EffStartLLM:
			s.llm = e.Op
		case e.Kind == kernel.EffError:
			s.t.Fatalf("%s refused: %v", ev.Describe(), e.Err)
		case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeApprovalRequested:
			s.digest = e.Life.Digest
		}
	}
	for _, c := range s.d.Step(ev, effs) {
		s.spans[c.Span.ID] = *c.Span
	}
}

// ask runs a turn to the point where its call of shell waits for a
// decision, asked at 1s.
func (s *stepper) ask() {
	s.step(kernel.Submit(0, "clean the build"))
	s.step(kernel.CallFragment(time.Second, s.llm, 1, kernel.CallDelta{Index: 0, ID: "call_1", Name: "shell", Args: `{"command":"make clean"}`}))
	s.step(kernel.LLMEnd(time.Second, s.llm))
}

// answer ends the turn: the follow-up request answers with text at at.
func (s *stepper) answer(at time.Duration) {
	s.step(kernel.TextDelta(at, s.llm, 1, "done"))
	s.step(kernel.LLMEnd(at, s.llm))
}

// kind returns the spans of kind k, by start.
func (s *stepper) kind(k spans.Kind) []spans.Span {
	var out []spans.Span
	for _, sp := range s.spans {
		if sp.Kind == k {
			out = append(out, sp)
		}
	}
	slices.SortFunc(out, func(a, b spans.Span) int { return int(a.ID) - int(b.ID) })
	return out
}

// allEnded fails unless every span has ended.
func (s *stepper) allEnded() {
	s.t.Helper()
	if open := s.d.Open(); len(open) > 0 {
		s.t.Fatalf("%d span(s) open, the first %s", len(open), open[0].Name())
	}
}

// events returns the turn span's events of kind k.
func events(turn spans.Span, k spans.EventKind) []spans.Event {
	var out []spans.Event
	for _, e := range turn.Events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func askShell() kernel.Config {
	return kernel.Config{Limits: kernel.DefaultLimits(), Ask: []string{"shell"}}
}

// TestApprovalWaitIsTurnEvents: a call that waits for a person is asked
// and approved as events of its turn's span, and its execute_tool span
// starts when the approval starts the call — not when it was asked — so
// the tool's span is its run, the person's time the turn's.
func TestApprovalWaitIsTurnEvents(t *testing.T) {
	s := newStepper(t, askShell())
	s.ask()
	if tools := s.kind(spans.KindTool); len(tools) != 0 {
		t.Fatalf("a call waiting for approval has a tool span: %+v", tools[0])
	}
	s.step(kernel.Approve(5*time.Second, kernel.Root, "call_1", s.digest))
	tools := s.kind(spans.KindTool)
	if len(tools) != 1 {
		t.Fatalf("%d tool spans after the approval, want 1", len(tools))
	}
	s.step(kernel.ToolResult(6*time.Second, tools[0].Op, kernel.ToolOK, "cleaned"))
	s.answer(7 * time.Second)
	s.allEnded()
	turn, tool := s.kind(spans.KindAgent)[0], s.spans[tools[0].ID]
	if tool.Start != 5*time.Second || tool.End != 6*time.Second || tool.Parent != turn.ID || tool.ErrorType() != "" {
		t.Errorf("tool span %s: %v..%v parent %d error.type %q; want 5s..6s under the turn", tool.Name(), tool.Start, tool.End, tool.Parent, tool.ErrorType())
	}
	asked, resolved := events(turn, spans.EventApprovalRequested), events(turn, spans.EventApprovalResolved)
	if len(asked) != 1 || asked[0].At != time.Second || asked[0].CallID != "call_1" || asked[0].Tool != "shell" ||
		asked[0].Digest != kernel.Digest(`{"command":"make clean"}`) || asked[0].Delay != kernel.DefaultLimits().ApprovalTimeout {
		t.Errorf("approval_requested events %+v", asked)
	}
	if len(resolved) != 1 || resolved[0].At != 5*time.Second || resolved[0].Approval != kernel.ApprovalApproved || resolved[0].Delay != 4*time.Second {
		t.Fatalf("approval_resolved events %+v", resolved)
	}
	attrs := map[string]any{}
	for _, a := range resolved[0].Attrs() {
		attrs[a.Key] = a.Value
	}
	if attrs[spans.KeyApproval] != "approved" || attrs["escapement.approval.waited"] != 4.0 || attrs[spans.KeyToolCallID] != "call_1" {
		t.Errorf("approval_resolved attributes %v", attrs)
	}
}

// TestApprovalDeniedHasNoToolSpan: a denied call never runs: no
// execute_tool span, its result an event of the turn (status denied),
// after the wait's end.
func TestApprovalDeniedHasNoToolSpan(t *testing.T) {
	s := newStepper(t, askShell())
	s.ask()
	s.step(kernel.Deny(3*time.Second, kernel.Root, "call_1", "not now"))
	s.answer(4 * time.Second)
	s.allEnded()
	if tools := s.kind(spans.KindTool); len(tools) != 0 {
		t.Fatalf("a denied call has a tool span: %+v", tools[0])
	}
	turn := s.kind(spans.KindAgent)[0]
	resolved, calls := events(turn, spans.EventApprovalResolved), events(turn, spans.EventCall)
	if len(resolved) != 1 || resolved[0].Approval != kernel.ApprovalDenied || resolved[0].Reason != kernel.ReasonApprovalDenied {
		t.Errorf("approval_resolved events %+v", resolved)
	}
	if len(calls) != 1 || calls[0].Status != kernel.CallDenied || calls[0].CallID != "call_1" {
		t.Errorf("call events %+v", calls)
	}
	if turn.ErrorType() != "" || len(s.kind(spans.KindChat)) != 2 {
		t.Errorf("turn error.type %q, %d chat spans; want a completed turn of two requests", turn.ErrorType(), len(s.kind(spans.KindChat)))
	}
}

// TestApprovalWithdrawnEndsEverySpan: a cancel while a call waits for a
// person withdraws the wait (an event), ends the turn interrupted, and
// leaves no span open.
func TestApprovalWithdrawnEndsEverySpan(t *testing.T) {
	s := newStepper(t, askShell())
	s.ask()
	s.step(kernel.Cancel(2*time.Second, kernel.Root))
	s.allEnded()
	turn := s.kind(spans.KindAgent)[0]
	resolved := events(turn, spans.EventApprovalResolved)
	if len(resolved) != 1 || resolved[0].Approval != kernel.ApprovalWithdrawn || resolved[0].Reason != kernel.ReasonUserCancel {
		t.Errorf("approval_resolved events %+v", resolved)
	}
	if turn.ErrorType() != "interrupted" || turn.Reason != kernel.ReasonUserCancel || turn.End != 2*time.Second {
		t.Errorf("turn: error.type %q reason %s end %v", turn.ErrorType(), turn.Reason, turn.End)
	}
}

// TestApprovalGrantIsTurnEvent: a decision that grants the tool for the
// session is an event of the turn after the wait's end; a later call the
// grant covers starts without asking, its span at once.
func TestApprovalGrantIsTurnEvent(t *testing.T) {
	s := newStepper(t, askShell())
	s.ask()
	s.step(kernel.Decide(2*time.Second, kernel.Root, "call_1", s.digest, kernel.VerdictApproveTool, ""))
	tool := s.kind(spans.KindTool)[0]
	s.step(kernel.ToolResult(3*time.Second, tool.Op, kernel.ToolOK, "cleaned"))
	s.step(kernel.CallFragment(4*time.Second, s.llm, 1, kernel.CallDelta{Index: 0, ID: "call_2", Name: "shell", Args: `{"command":"make"}`}))
	s.step(kernel.LLMEnd(4*time.Second, s.llm))
	tools := s.kind(spans.KindTool)
	if len(tools) != 2 || tools[1].Start != 4*time.Second {
		t.Fatalf("the granted call's tool span: %+v", tools)
	}
	s.step(kernel.ToolResult(5*time.Second, tools[1].Op, kernel.ToolOK, "built"))
	s.answer(6 * time.Second)
	s.allEnded()
	turn := s.kind(spans.KindAgent)[0]
	granted := events(turn, spans.EventApprovalGranted)
	if len(granted) != 1 || granted[0].Tool != "shell" || granted[0].Digest != "" || len(events(turn, spans.EventApprovalRequested)) != 1 {
		t.Fatalf("grant events %+v; asked %d time(s)", granted, len(events(turn, spans.EventApprovalRequested)))
	}
	kinds := []spans.EventKind{}
	for _, e := range turn.Events {
		kinds = append(kinds, e.Kind)
	}
	if i, j := slices.Index(kinds, spans.EventApprovalResolved), slices.Index(kinds, spans.EventApprovalGranted); i < 0 || j < i {
		t.Errorf("the turn's events %v: the grant must follow the wait's end", kinds)
	}
}

// TestRequestWaitingIsTurnEvent: a request that waits for one of the
// tree's max_parallel_requests slots is an event of its agent's turn; its
// chat span starts when it gets the slot (its request_started), so a
// request's span never counts the wait.
func TestRequestWaitingIsTurnEvent(t *testing.T) {
	_, _, steps := derive(t, "cap-parallel-requests", sim.Options{})
	d := spans.New(spans.Config{RootName: "main", Model: "m"})
	waiting := map[kernel.AgentID]time.Duration{} // agents whose next request waits, since when
	var waits, starts int
	for _, si := range steps {
		changes := d.Step(si.Event, si.Effects)
		for _, e := range si.Effects {
			if e.Kind != kernel.EffEmit {
				continue
			}
			switch l := e.Life; l.Kind {
			case kernel.LifeRequestWaiting:
				waits++
				waiting[l.Agent] = l.At
				if !hasEvent(changes, l.Agent, spans.EventRequestWaiting, l.At) {
					t.Errorf("agent %d's request %d waits at %v: no event on its turn's span", l.Agent, l.N, l.At)
				}
			case kernel.LifeRequestStarted:
				since, ok := waiting[l.Agent]
				if !ok {
					continue
				}
				delete(waiting, l.Agent)
				starts++
				if !startsChat(changes, l.Agent, l.Op, l.At) || since == l.At {
					t.Errorf("agent %d's request waited from %v and started at %v: its chat span does not start then", l.Agent, since, l.At)
				}
			}
		}
	}
	if waits == 0 || starts == 0 {
		t.Fatalf("%d waits, %d started after one: the scenario must make requests wait", waits, starts)
	}
}

// hasEvent reports whether changes add an event of kind k at at to
// agent's turn span.
func hasEvent(changes []spans.Change, agent kernel.AgentID, k spans.EventKind, at time.Duration) bool {
	for _, c := range changes {
		if c.Kind == spans.Evented && c.Span.Kind == spans.KindAgent && c.Span.Agent == agent && c.Event.Kind == k && c.Event.At == at {
			return true
		}
	}
	return false
}

// startsChat reports whether changes start agent's chat span of op at at.
func startsChat(changes []spans.Change, agent kernel.AgentID, op kernel.OpID, at time.Duration) bool {
	for _, c := range changes {
		if c.Kind == spans.Started && c.Span.Kind == spans.KindChat && c.Span.Agent == agent && c.Span.Op == op && c.Span.Start == at {
			return true
		}
	}
	return false
}

// TestCompactionIsAChatSpan: a compaction's summarising request is a chat
// span of its turn saying why it was sent, its summary's end a finish like
// an answer's, and the replacement an event of the turn; a request's usage
// carries the cached and reasoning parts the server broke down.
func TestCompactionIsAChatSpan(t *testing.T) {
	s := newStepper(t, kernel.Config{Limits: kernel.DefaultLimits()})
	s.step(kernel.Submit(0, "hello"))
	s.step(kernel.TextDelta(time.Second, s.llm, 1, "hi there"))
	end := kernel.LLMEnd(time.Second, s.llm)
	end.Usage = &kernel.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 60, ReasoningTokens: 5}
	s.step(end)
	s.step(kernel.Compact(2*time.Second, ""))
	s.answer(3 * time.Second)
	s.allEnded()
	chats, turns := s.kind(spans.KindChat), s.kind(spans.KindAgent)
	if len(chats) != 2 || len(turns) != 2 {
		t.Fatalf("%d chat spans, %d turns; want two each", len(chats), len(turns))
	}
	attrs := func(sp spans.Span) map[string]any {
		m := map[string]any{}
		for _, a := range append(sp.StartAttrs(), sp.EndAttrs()...) {
			m[a.Key] = a.Value
		}
		return m
	}
	first, summary := attrs(chats[0]), attrs(chats[1])
	if first[spans.KeyCachedTokens] != int64(60) || first[spans.KeyReasoningTokens] != int64(5) || first[spans.KeyCompaction] != nil {
		t.Errorf("the first request's attributes %v", first)
	}
	if summary[spans.KeyCompaction] != "requested" || chats[1].FinishReason != "stop" || chats[1].Parent != turns[1].ID {
		t.Errorf("the summarising request: attributes %v, finish %q, parent %d (turn %d)", summary, chats[1].FinishReason, chats[1].Parent, turns[1].ID)
	}
	if ev := events(turns[1], spans.EventCompacted); len(ev) != 1 || ev[0].N != 2 || turns[1].ErrorType() != "" {
		t.Errorf("the compaction turn's compacted events %+v, error.type %q", ev, turns[1].ErrorType())
	}
}

// TestThresholdCompactionFinishes: a compaction the threshold runs before
// a request is a chat span of that turn (why threshold) that finishes
// like an answer, followed by the request it preceded.
func TestThresholdCompactionFinishes(t *testing.T) {
	limits := kernel.DefaultLimits()
	limits.ContextWindow, limits.CompactPercent = 200, 80
	s := newStepper(t, kernel.Config{Limits: limits})
	s.step(kernel.Submit(0, "hello"))
	s.answer(time.Second) // "done"
	s.step(kernel.Submit(2*time.Second, strings.Repeat("a long question ", 60)))
	s.answer(3 * time.Second) // the summary
	s.answer(4 * time.Second) // the answer
	s.allEnded()
	chats := s.kind(spans.KindChat)
	if len(chats) != 3 || chats[1].Compaction != "threshold" || chats[1].FinishReason != "stop" || chats[2].Compaction != "" {
		t.Fatalf("chat spans %+v; want a request, a threshold compaction that finished, the request it preceded", chats)
	}
}
