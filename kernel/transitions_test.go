package kernel

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
)

// transitionCase drives the root through real events into From, then sends
// the event that fires Trigger, and checks the destination and the effect
// that characterises the row.
type transitionCase struct {
	cfg func(*Config)
	run func(t *testing.T, h *harness)
}

// TestDeclaredTransitions has one case per row of fsm.Table(), keyed by
// (from, trigger); a row without a case fails the test, so the table cannot
// grow untested.
func TestDeclaredTransitions(t *testing.T) {
	cases := declaredCases()
	maps.Copy(cases, compactionCases())
	for _, row := range fsm.Table() {
		key := [2]fsm.State{row.From, fsm.State(row.Trigger)}
		c, ok := cases[key]
		if !ok {
			t.Errorf("no kernel test for declared transition %s --%s--> %s", row.From, row.Trigger, row.To)
			continue
		}
		delete(cases, key)
		t.Run(row.From.String()+"/"+row.Trigger.String(), func(t *testing.T) {
			h := newHarness(t, c.cfg)
			c.run(t, h)
			if got := h.k.Agent(Root).State(); got != row.To {
				t.Fatalf("ended in %s, table says %s", got, row.To)
			}
		})
	}
	for key := range cases {
		t.Errorf("test for undeclared pair %s/%s", key[0], fsm.Trigger(key[1]))
	}
}

func key(s fsm.State, tr fsm.Trigger) [2]fsm.State { return [2]fsm.State{s, fsm.State(tr)} }

func expectEffect(t *testing.T, out []Effect, kind EffectKind) {
	t.Helper()
	if count(out, kind, -1) == 0 {
		var b strings.Builder
		for _, e := range out {
			b.WriteString("\n  " + e.Describe())
		}
		t.Fatalf("want a %s effect, got:%s", kind, b.String())
	}
}

func expectLife(t *testing.T, out []Effect, kind LifeKind) Lifecycle {
	t.Helper()
	l := lifes(out, kind)
	if len(l) == 0 {
		t.Fatalf("want a %s event", kind)
	}
	return l[0]
}

// interruptedWithStubbornTool leaves the root Interrupted with a tool that
// ignores its cancel (so it stays Interrupted until the grace expires).
func interruptedWithStubbornTool(h *harness) {
	h.submit("x")
	h.ask(Root, h.call("stubborn", `{}`))
	h.do(Cancel(0, Root))
}

func declaredCases() map[[2]fsm.State]transitionCase {
	one := func(c *Config) { c.MaxRequests = 1 }
	shortTurn := func(c *Config) { c.TurnTimeout = time.Minute }
	return map[[2]fsm.State]transitionCase{
		key(fsm.Idle, fsm.Submit): {run: func(t *testing.T, h *harness) {
			out := h.do(Submit(0, "hi"))
			expectEffect(t, out, EffStartLLM)
			expectLife(t, out, LifeTurnStarted)
		}},
		key(fsm.Idle, fsm.Interject): {run: func(t *testing.T, h *harness) {
			out := h.do(Interject(0, "typed late"))
			expectEffect(t, out, EffStartLLM)
			if m := lastMsg(h.k.Agent(Root).History()); m.Content != "typed late" || !m.Interjection {
				t.Fatalf("interjection on an idle root must start a turn with it: %+v", m)
			}
		}},
		key(fsm.Idle, fsm.Cancel): {run: func(t *testing.T, h *harness) {
			out := h.do(Cancel(0, Root))
			expectLife(t, out, LifeIgnored)
			if count(out, EffError, -1) != 0 {
				t.Fatal("a cancel with no turn is a declared no-op, not an error")
			}
		}},
		key(fsm.Streaming, fsm.Delta): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.text(Root, "x")
			expectLife(t, h.last, LifeDelta)
		}},
		key(fsm.Streaming, fsm.StreamText): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.say(Root, "hello")
			h.outcome(Root, OutcomeCompleted, ReasonNone)
		}},
		key(fsm.Streaming, fsm.StreamTools): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.call("ls", `{}`), h.call("pwd", `{}`))
			if count(h.last, EffStartTool, Root) != 2 {
				t.Fatal("want both tools started in parallel")
			}
		}},
		key(fsm.Streaming, fsm.StreamDelegations): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.deleg("x", "t1"), h.deleg("y", "t2"))
			if count(h.last, EffStartLLM, -1) != 2 {
				t.Fatal("want both children started in parallel")
			}
		}},
		key(fsm.Streaming, fsm.StreamFailed): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.text(Root, "par")
			h.do(LLMError(0, h.req(Root), FailureStream, "connection reset"))
			h.outcome(Root, OutcomeFailed, ReasonLLMError)
			if p := lastAssistant(h.k.Agent(Root).History()); !p.Partial {
				t.Fatal("partial text not kept on failure")
			}
		}},
		key(fsm.Streaming, fsm.Interject): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			out := h.do(Interject(0, "wait"))
			expectEffect(t, out, EffCancelLLM)
		}},
		key(fsm.Streaming, fsm.Restart): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.do(Interject(0, "wait"))
			m := h.mark()
			h.wait(h.k.Config().Debounce)
			expectEffect(t, h.since(m), EffStartLLM)
		}},
		key(fsm.Streaming, fsm.BudgetExhausted): {cfg: one, run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.do(Interject(0, "wait"))
			h.wait(h.k.Config().Debounce)
			h.outcome(Root, OutcomeBudgetExhausted, ReasonBudget)
		}},
		key(fsm.Streaming, fsm.Cancel): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			expectEffect(t, h.do(Cancel(0, Root)), EffCancelLLM)
		}},
		key(fsm.Streaming, fsm.Timeout): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.wait(h.k.Config().FirstTokenTimeout)
			expectLife(t, h.last, LifeTimedOut)
		}},
		key(fsm.Streaming, fsm.OutputLimit): {cfg: func(c *Config) { c.MaxMessageBytes = 8 }, run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.text(Root, "12345")
			h.text(Root, "67890")
			expectEffect(t, h.last, EffCancelLLM)
			expectLife(t, h.last, LifeInterrupted)
		}},
		key(fsm.Tooling, fsm.ToolResult): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			c := h.call("a", `{}`)
			h.ask(Root, c, h.call("b", `{}`))
			h.result(c.ID, "ok")
			expectLife(t, h.last, LifeCallFinished)
		}},
		key(fsm.Tooling, fsm.ResultsIn): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			c := h.call("a", `{}`)
			h.ask(Root, c)
			h.result(c.ID, "ok")
			expectEffect(t, h.last, EffStartLLM)
		}},
		key(fsm.Tooling, fsm.BudgetExhausted): {cfg: one, run: func(t *testing.T, h *harness) {
			h.submit("hi")
			c := h.call("a", `{}`)
			h.ask(Root, c)
			h.result(c.ID, "ok")
			h.outcome(Root, OutcomeBudgetExhausted, ReasonBudget)
		}},
		key(fsm.Tooling, fsm.Interject): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.call("a", `{}`))
			if l := expectLife(t, h.do(Interject(0, "also")), LifeInterjected); !l.Queued {
				t.Fatal("not queued")
			}
		}},
		key(fsm.Tooling, fsm.Cancel): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.call("a", `{}`))
			expectEffect(t, h.do(Cancel(0, Root)), EffCancelTool)
		}},
		key(fsm.Tooling, fsm.Timeout): {cfg: shortTurn, run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.call("a", `{}`))
			h.wait(time.Minute)
			if l := expectLife(t, h.last, LifeTimedOut); l.Reason != ReasonTurnTimeout {
				t.Fatalf("reason %s", l.Reason)
			}
		}},
		key(fsm.Delegating, fsm.ToolResult): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			c := h.call("a", `{}`)
			h.ask(Root, c, h.deleg("x", "t"))
			h.result(c.ID, "ok")
			expectLife(t, h.last, LifeCallFinished)
		}},
		key(fsm.Delegating, fsm.ChildOutcome): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.deleg("x", "t"), h.deleg("y", "t"))
			h.say(h.id("x"), "x done")
			if l := expectLife(t, h.last, LifeCallFinished); l.Status != CallChild || l.Outcome != OutcomeCompleted {
				t.Fatalf("child result %s", l.Describe())
			}
		}},
		key(fsm.Delegating, fsm.ResultsIn): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.deleg("x", "t"))
			h.say(h.id("x"), "x done")
			if count(h.last, EffStartLLM, Root) != 1 {
				t.Fatal("no follow-up request")
			}
		}},
		key(fsm.Delegating, fsm.BudgetExhausted): {cfg: one, run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.deleg("x", "t"))
			h.say(h.id("x"), "x done")
			h.outcome(Root, OutcomeBudgetExhausted, ReasonBudget)
		}},
		key(fsm.Delegating, fsm.Interject): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.deleg("x", "t"))
			expectLife(t, h.do(Interject(0, "also")), LifeInterjected)
		}},
		key(fsm.Delegating, fsm.Cancel): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.deleg("x", "t"))
			expectEffect(t, h.do(Cancel(0, Root)), EffCancelLLM)
		}},
		key(fsm.Delegating, fsm.Timeout): {cfg: shortTurn, run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.ask(Root, h.deleg("x", "t"))
			h.text(h.id("x"), "slow")
			for i := 0; i < 3; i++ {
				h.wait(20 * time.Second)
				if i < 2 {
					h.text(h.id("x"), " tok")
				}
			}
			if l := lifes(h.all, LifeTimedOut); len(l) != 1 || l[0].Agent != Root || l[0].Reason != ReasonTurnTimeout {
				t.Fatalf("want the root's turn deadline, got %v", l)
			}
		}},
		key(fsm.Interrupted, fsm.Submit): {run: func(t *testing.T, h *harness) {
			interruptedWithStubbornTool(h)
			out := h.do(Submit(0, "next"))
			if count(out, EffStartLLM, -1) != 0 || !expectLife(t, out, LifeInterjected).Queued {
				t.Fatal("a submit while settling must wait for the tree to settle")
			}
			h.state(Root, fsm.Interrupted) // the row itself: Interrupted --Submit--> Interrupted
			m := h.mark()
			h.wait(h.k.Config().Grace)
			if count(h.since(m), EffStartLLM, Root) != 1 {
				t.Fatal("queued submission did not start a turn after settling")
			}
			h.do(Cancel(0, Root)) // back to Interrupted for the row's final check
		}},
		key(fsm.Interrupted, fsm.Interject): {run: func(t *testing.T, h *harness) {
			interruptedWithStubbornTool(h)
			if !expectLife(t, h.do(Interject(0, "do y instead")), LifeInterjected).Queued {
				t.Fatal("not queued")
			}
		}},
		key(fsm.Interrupted, fsm.Cancel): {run: func(t *testing.T, h *harness) {
			interruptedWithStubbornTool(h)
			h.wait(time.Second)
			out := h.do(Cancel(0, Root))
			if expectLife(t, out, LifeIgnored); count(out, EffCancelTool, -1) != 0 {
				t.Fatal("repeated cancel must be idempotent")
			}
		}},
		key(fsm.Interrupted, fsm.Settled): {run: func(t *testing.T, h *harness) {
			interruptedWithStubbornTool(h)
			h.wait(h.k.Config().Grace)
			expectLife(t, h.all, LifeTurnEnded)
		}},
	}
}

// TestUndeclaredPairs fires every undeclared (state, trigger) pair at an
// agent held in that state: the kernel must answer with exactly one EffError
// naming both plus its LifeRejected record, leave the state as it was, and
// neither panic nor do anything else.
func TestUndeclaredPairs(t *testing.T) {
	declared := fsm.Matrix()
	n := 0
	for _, s := range fsm.States() {
		for _, tr := range fsm.Triggers() {
			if declared[s][tr] {
				continue
			}
			n++
			t.Run(s.String()+"/"+tr.String(), func(t *testing.T) {
				k := MustNew(Config{Limits: DefaultLimits()})
				a := k.agents[Root]
				a.state = s
				k.out = k.out[:0]
				if k.fire(a, tr) {
					t.Fatal("fire accepted an undeclared pair")
				}
				if a.state != s {
					t.Fatalf("state moved to %s", a.state)
				}
				if len(k.out) != 2 || k.out[0].Kind != EffError || k.out[1].Life.Kind != LifeRejected {
					t.Fatalf("want [error, rejected], got %v", k.out)
				}
				e := k.out[0]
				if e.Code != ErrCodeUndeclared || e.State != s || e.Trigger != tr {
					t.Fatalf("error effect %s", e.Describe())
				}
				if !strings.Contains(e.Detail, s.String()) || !strings.Contains(e.Detail, tr.String()) {
					t.Fatalf("detail %q must name state and trigger", e.Detail)
				}
			})
		}
	}
	if n == 0 {
		t.Fatal("no undeclared pairs?")
	}
}

// TestUndeclaredThroughStep shows undeclared pairs reached by real inputs:
// a submit while the root works (interject is the declared input) is refused
// with an error naming the state and trigger, and nothing else happens.
func TestUndeclaredThroughStep(t *testing.T) {
	for _, st := range []fsm.State{fsm.Streaming, fsm.Tooling, fsm.Delegating} {
		t.Run(st.String(), func(t *testing.T) {
			h := newHarness(t, nil)
			h.submit("hi")
			switch st {
			case fsm.Tooling:
				h.ask(Root, h.call("ls", `{}`))
			case fsm.Delegating:
				h.ask(Root, h.deleg("x", "t"))
			}
			histLen := len(h.k.Agent(Root).History())
			out := h.do(Submit(0, "again"))
			if len(out) != 2 || out[0].Kind != EffError || out[0].State != st || out[0].Trigger != fsm.Submit {
				t.Fatalf("want one error naming %s/Submit, got %v", st, out)
			}
			h.state(Root, st)
			if len(h.k.Agent(Root).History()) != histLen {
				t.Fatal("history changed")
			}
		})
	}
}

// TestBadInputs: malformed events are refused with a clear error, never a
// panic, and change nothing.
func TestBadInputs(t *testing.T) {
	h := newHarness(t, nil)
	for _, ev := range []Event{
		Submit(0, ""),
		Interject(0, ""),
		Cancel(0, 99),
		Cancel(0, -5),
		{Kind: EventKind(200)},
	} {
		out := h.do(ev)
		if len(out) != 2 || out[0].Kind != EffError || out[0].Code != ErrCodeBadInput || out[0].Detail == "" {
			t.Fatalf("%s: want one bad-input error, got %v", ev.Describe(), out)
		}
	}
	h.submit("hi")
	r := h.req(Root)
	// A tool result naming an LLM request op is refused, not misapplied.
	out := h.do(ToolResult(0, r, ToolOK, "x"))
	if out[0].Kind != EffError || !strings.Contains(out[0].Detail, "not a tool call") {
		t.Fatalf("got %v", out)
	}
	out = h.do(CallFragment(0, r, 1, CallDelta{Index: -1}))
	if out[0].Kind != EffError {
		t.Fatalf("negative call index accepted: %v", out)
	}
	h.state(Root, fsm.Streaming)
}

// TestMalformedAndRefusedCalls: bad tool arguments and over-limit
// delegations become error tool results the model reads; nothing crashes.
func TestMalformedAndRefusedCalls(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxDepth = 1; c.MaxChildren = 1 })
	h.submit("hi")
	bad := h.call("grep", `{"pattern":`)
	noTask := h.call("delegate", `{"name":"x"}`)
	ok := h.deleg("x", "t")
	over := h.deleg("y", "t")
	h.ask(Root, bad, noTask, ok, over)
	hist := h.k.Agent(Root).History()
	for id, want := range map[string]string{
		bad.ID:    `"status":"malformed"`,
		noTask.ID: `"status":"malformed"`,
		over.ID:   `"reason":"max_children"`,
	} {
		if c := toolContent(t, hist, id); !strings.Contains(c, want) {
			t.Fatalf("call %s: %s lacks %s", id, c, want)
		}
	}
	x := h.id("x")
	h.ask(x, h.deleg("z", "too deep"))
	if c := toolContent(t, h.k.Agent(x).History(), lastCallID(h, x)); !strings.Contains(c, `"reason":"max_depth","limit":1`) {
		t.Fatalf("max depth refusal: %s", c)
	}
	h.state(x, fsm.Streaming) // refused: x goes on at once
	h.say(x, "x done")
	h.say(Root, "done")
	h.quiescent()
}

// TestDuplicateAndStaleEvents (I8): duplicates and events for ended ops are
// recorded and change nothing.
func TestDuplicateAndStaleEvents(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("hi")
	r := h.req(Root)
	h.do(TextDelta(0, r, 1, "a"))
	out := h.do(TextDelta(0, r, 1, "a")) // duplicated chunk
	if len(out) != 1 || out[0].Life.Kind != LifeStale {
		t.Fatalf("duplicate chunk: %v", out)
	}
	h.do(LLMEnd(0, r))
	for _, ev := range []Event{LLMEnd(0, r), TextDelta(0, r, 9, "x"), LLMError(0, r, FailureStream, ""), TimerFired(0, 12345)} {
		before := slices.Clone(h.k.Agent(Root).History())
		out := h.do(ev)
		if len(out) != 1 || out[0].Life.Kind != LifeStale {
			t.Fatalf("%s: want one stale record, got %v", ev.Describe(), out)
		}
		if !reflect.DeepEqual(before, h.k.Agent(Root).History()) {
			t.Fatal("stale event changed history")
		}
	}
	if got := string(lastAssistant(h.k.Agent(Root).History()).Content); got != "a" {
		t.Fatalf("text %q", got)
	}
}

// TestShutdown aborts everything with reason shutdown and refuses new turns.
func TestShutdown(t *testing.T) {
	h := newHarness(t, nil)
	h.chain3()
	h.do(Shutdown(0))
	h.wait(h.k.Config().Grace)
	h.quiescent()
	h.outcome(Root, OutcomeInterrupted, ReasonShutdown)
	if out := h.do(Submit(0, "more")); out[0].Kind != EffError {
		t.Fatal("submit accepted after shutdown")
	}
}

// TestTimeNeverGoesBack: a driver bug is an assertion, with both times named.
func TestTimeNeverGoesBack(t *testing.T) {
	k := MustNew(Config{Limits: DefaultLimits()})
	k.Step(Submit(time.Second, "x"))
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "backwards") {
			t.Fatalf("want a panic about time going backwards, got %v", r)
		}
	}()
	k.Step(Cancel(0, Root))
}

// TestResumeHistory: a kernel seeded with a session's history continues it,
// keeps tool call ids unique across the old and new parts, and refuses a
// broken history with a clear error.
func TestResumeHistory(t *testing.T) {
	old := []Message{
		{Role: RoleSystem, Content: "be brief"},
		{Role: RoleUser, Content: "list"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "ls", Arguments: "{}"}}},
		{Role: RoleTool, ToolCallID: "call_1", Content: "a b"},
		{Role: RoleAssistant, Content: "a and b"},
	}
	h := newHarness(t, func(c *Config) { c.History = old; c.System = "be brief" })
	h.submit("more")
	h.ask(Root, ToolCall{ID: "call_1", Name: "ls", Arguments: "{}"}) // the model reuses an id
	hist := h.k.Agent(Root).History()
	if hist[0].Content != "be brief" || hist[5].Content != "more" {
		t.Fatalf("resumed history:\n%s", dumpHistory(hist))
	}
	if id := hist[6].ToolCalls[0].ID; id == "call_1" {
		t.Fatal("a reused call id must be made unique")
	}
	bad := append(slices.Clone(old[:3]), Message{Role: RoleUser, Content: "x"})
	if _, err := New(Config{Limits: DefaultLimits(), History: bad}); err == nil || !strings.Contains(err.Error(), "history") {
		t.Fatalf("broken history accepted: %v", err)
	}
	if _, err := New(Config{Limits: DefaultLimits(), History: old, System: "other"}); err == nil {
		t.Fatal("conflicting system prompt accepted")
	}
}
