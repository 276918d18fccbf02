package kernel

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/escapement/escapement/fsm"
)

// TestMessageByteCap: a stream that goes past MaxMessageBytes is cut like
// an abort with reason output_limit: what fit is kept as partial text (cut
// at a rune boundary), the turn ends failed with the cap in its detail, and
// nothing of the overflowing chunk beyond the cap is kept.
func TestMessageByteCap(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxMessageBytes = 10 })
	h.submit("hi")
	h.text(Root, "héllo") // 6 bytes
	h.text(Root, "wörld!!")
	expectEffect(t, h.last, EffCancelLLM)
	h.state(Root, fsm.Interrupted)
	hist := h.k.Agent(Root).History()
	p := hist[len(hist)-2]
	if !p.Partial || p.Content != "héllowör" {
		t.Fatalf("partial = %+v, want the 10 bytes that fit cut at a rune: %q", p, "héllowör")
	}
	if m := lastMsg(hist); !m.Marker || !strings.Contains(m.Content, `reason="output_limit"`) || !strings.Contains(m.Content, `partial="true"`) {
		t.Fatalf("marker = %q", m.Content)
	}
	// The cancelled stream acknowledges; the turn ends failed, typed, with
	// the cause in its detail.
	mark := h.mark()
	h.do(LLMError(0, h.cancelled(), FailureCancelled, "cancelled"))
	h.outcome(Root, OutcomeFailed, ReasonOutputLimit)
	end := lifes(h.since(mark), LifeTurnEnded)
	if len(end) != 1 || !strings.Contains(end[0].Detail, "max_message_bytes (10 bytes)") || end[0].Text != "héllowör" {
		t.Fatalf("turn_ended = %+v", end)
	}
	h.quiescent()
}

// TestMessageByteCapCalls: tool-call fragments count against the cap too
// (id, name, arguments, and a fixed overhead per new call), so a message of
// endless calls is cut and its half-streamed calls are dropped, never run.
// (A fragment that adds nothing opens no call: TestEmptyFragmentIsNoProgress.)
func TestMessageByteCapCalls(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxMessageBytes = 100 })
	h.submit("hi")
	r := h.req(Root)
	var chunk uint32
	for i := 0; h.k.Agent(Root).State() == fsm.Streaming; i++ {
		if i > 100 {
			t.Fatal("the cap never cut the stream")
		}
		chunk++
		h.do(CallFragment(0, r, chunk, CallDelta{Index: i * 1000, Args: "x"}))
	}
	// 100 bytes / (16 + 1) per one-byte call: the sixth call does not fit.
	if got := len(lifes(h.all, LifeCallDropped)); got != 5 {
		t.Fatalf("%d calls dropped, want the 5 that fit", got)
	}
	if n := count(h.all, EffStartTool, -1); n != 0 {
		t.Fatalf("%d tools started from a cut stream (F12)", n)
	}
}

// TestCallsCap: calls beyond MaxCalls in one message each get a refusal
// result that says why; the first MaxCalls run; delegations beyond the cap
// are refused, never spawned.
func TestCallsCap(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxCalls = 3; c.MaxParallelTools = 10 })
	h.submit("hi")
	var calls []ToolCall
	for i := 0; i < 5; i++ {
		calls = append(calls, h.call(fmt.Sprintf("t%d", i), `{}`))
	}
	calls = append(calls, h.deleg("late", "never"))
	h.ask(Root, calls...)
	if n := count(h.last, EffStartTool, Root); n != 3 {
		t.Fatalf("%d tools started, want 3", n)
	}
	if h.k.NumAgents() != 1 {
		t.Fatal("a delegation beyond the cap spawned a child")
	}
	h.state(Root, fsm.Tooling)
	hist := h.k.Agent(Root).History()
	refused := 0
	for _, m := range hist {
		if m.Role == RoleTool && strings.Contains(m.Content, `"reason":"max_calls"`) && strings.Contains(m.Content, `"limit":3`) {
			refused++
		}
	}
	if refused != 3 {
		t.Fatalf("%d refusal results, want 3:\n%s", refused, dumpHistory(hist))
	}
	for _, c := range calls[:3] {
		h.result(c.ID, "ok")
	}
	h.state(Root, fsm.Streaming)
}

// TestCallsCapCountsWhatRuns: MaxCalls, like MaxChildren, counts the
// calls of a message that run (docs/semantics.md, "Budgets and caps"): a
// malformed call and a delegation refused for max_children take no slot,
// so under MaxCalls 3 the three calls that can run all run — a child and
// two tools — and only the fourth that could is refused max_calls; a
// delegation refused for max_calls spawns nothing and spends nothing of
// max_children. An agent whose message spawned no child is Tooling.
func TestCallsCapCountsWhatRuns(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxCalls = 3; c.MaxChildren = 1; c.MaxParallelTools = 10 })
	h.submit("hi")
	bad := h.call("t0", `{"unterminated`)
	kid := h.deleg("kid", "work")
	second := h.deleg("second", "refused: max_children 1")
	t1, t2, t3 := h.call("t1", `{}`), h.call("t2", `{}`), h.call("t3", `{}`)
	h.ask(Root, bad, kid, second, t1, t2, t3)
	if n := count(h.last, EffStartTool, Root); n != 2 || h.k.NumAgents() != 2 {
		t.Fatalf("%d tools started and %d agents, want t1, t2 and the child kid", n, h.k.NumAgents())
	}
	h.state(Root, fsm.Delegating)
	want := map[string]string{bad.ID: `"status":"malformed"`, second.ID: `"reason":"max_children","limit":1`, t3.ID: `"reason":"max_calls","limit":3`}
	for _, m := range h.k.Agent(Root).History() {
		if m.Role != RoleTool {
			continue
		}
		if !strings.Contains(m.Content, want[m.ToolCallID]) || want[m.ToolCallID] == "" {
			t.Errorf("call %s answered %s, want %q", m.ToolCallID, m.Content, want[m.ToolCallID])
		}
		delete(want, m.ToolCallID)
	}
	if len(want) > 0 {
		t.Errorf("unanswered: %v", want)
	}

	// A delegation past max_calls is refused max_calls, not spawned, and the
	// message (no child spawned) leaves the agent Tooling.
	h2 := newHarness(t, func(c *Config) { c.MaxCalls = 1; c.MaxChildren = 1 })
	h2.submit("hi")
	h2.ask(Root, h2.call("t", `{}`), h2.deleg("late", "never"))
	h2.state(Root, fsm.Tooling)
	if h2.k.NumAgents() != 1 || !strings.Contains(lastMsg(h2.k.Agent(Root).History()).Content, `"reason":"max_calls"`) {
		t.Fatalf("a delegation past max_calls: %d agents\n%s", h2.k.NumAgents(), dumpHistory(h2.k.Agent(Root).History()))
	}
}

// TestParallelToolsCap: an agent runs at most MaxParallelTools tools at
// once; the rest start in call order as slots free (a result, a timed-out
// tool's acknowledgement or abandonment), each with its own deadline from
// its own start; a cancel closes the waiting ones unstarted.
func TestParallelToolsCap(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxParallelTools = 2 })
	h.submit("hi")
	a, b, c, d := h.call("a", `{}`), h.call("b", `{}`), h.call("c", `{}`), h.call("d", `{}`)
	h.ask(Root, a, b, c, d)
	started := func() []string {
		var ids []string
		for _, l := range lifes(h.all, LifeToolStarted) {
			ids = append(ids, l.CallID)
		}
		return ids
	}
	if got := strings.Join(started(), ","); got != a.ID+","+b.ID {
		t.Fatalf("started %s, want %s,%s", got, a.ID, b.ID)
	}
	h.wait(h.k.Config().ToolTimeout / 2)
	h.result(b.ID, "ok")
	if got := strings.Join(started(), ","); got != a.ID+","+b.ID+","+c.ID {
		t.Fatalf("after b's result started %s", got)
	}
	// c's deadline runs from its own start, not the message's.
	var cDeadline bool
	for _, e := range h.last {
		if e.Kind == EffSetTimer && e.Timer == TimerTool && e.At == h.now+h.k.Config().ToolTimeout {
			cDeadline = true
		}
	}
	if !cDeadline {
		t.Fatal("c's tool deadline does not start at its own start")
	}
	// a times out: its call is closed at once, but its process still runs,
	// so d waits until a acknowledges the cancel.
	h.wait(h.k.Config().ToolTimeout / 2)
	if len(started()) != 3 {
		t.Fatalf("d started while a still ran: %v", started())
	}
	h.do(ToolResult(0, h.tool(a.ID), ToolCancelled, ""))
	if len(started()) != 4 {
		t.Fatalf("d did not start when a's slot freed: %v", started())
	}
	// Cancel: the running ones get cancels; nothing waits any more.
	h.do(Cancel(0, Root))
	if n := count(h.last, EffCancelTool, Root); n != 2 {
		t.Fatalf("%d cancels, want 2 (c and d)", n)
	}
}

// TestParallelToolsCapCancelWaiting: a cancel while calls wait closes them
// with synthetic cancelled results; they never start, even when the running
// tools acknowledge.
func TestParallelToolsCapCancelWaiting(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxParallelTools = 1 })
	h.submit("hi")
	a, b := h.call("a", `{}`), h.call("b", `{}`)
	h.ask(Root, a, b)
	h.do(Cancel(0, Root))
	h.do(ToolResult(0, h.tool(a.ID), ToolCancelled, ""))
	if n := count(h.all, EffStartTool, Root); n != 1 {
		t.Fatalf("%d tools started, want only a", n)
	}
	h.state(Root, fsm.Idle)
	h.outcome(Root, OutcomeInterrupted, ReasonUserCancel)
	for _, m := range h.k.Agent(Root).History() {
		if m.ToolCallID == b.ID && (!m.Synthetic || !strings.Contains(m.Content, `"status":"cancelled"`)) {
			t.Fatalf("waiting call closed with %+v", m)
		}
	}
	h.quiescent()
}

// TestOpEnds: a request whose stream fails and a tool that reports an
// error end "failed"; a finished stream and an ok result "completed".
func TestOpEnds(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("hi")
	c := h.call("a", `{}`)
	h.ask(Root, c)
	if e := opEnds(h.last); e[0] != OpCompleted {
		t.Fatalf("finished stream ended %v", e)
	}
	h.do(ToolResult(0, h.tool(c.ID), ToolError, "boom"))
	if e := opEnds(h.last); e[0] != OpFailed {
		t.Fatalf("tool error ended %v", e)
	}
	mark := h.mark()
	h.do(LLMError(0, h.req(Root), FailureServer, "HTTP 500: upstream down"))
	if e := opEnds(h.last); e[0] != OpFailed {
		t.Fatalf("failed stream ended %v", e)
	}
	end := lifes(h.since(mark), LifeTurnEnded)
	if len(end) != 1 || end[0].Detail != "server: HTTP 500: upstream down" {
		t.Fatalf("turn_ended = %+v", end)
	}
}

func opEnds(effs []Effect) []OpEnd {
	var out []OpEnd
	for _, l := range lifes(effs, LifeOpEnded) {
		out = append(out, l.End)
	}
	return out
}

// TestTurnsContinue: a resumed root numbers its turns after the ones it had.
func TestTurnsContinue(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Turns = 4
		c.History = []Message{{Role: RoleUser, Content: "a"}, {Role: RoleAssistant, Content: "b"}}
	})
	h.submit("hi")
	if got := h.k.Agent(Root).Turn(); got != 5 {
		t.Fatalf("turn %d, want 5", got)
	}
	h.do(CancelTurn(0, Root, 4))
	expectLife(t, h.last, LifeIgnored)
}

// TestLimitTable: every Limits field is in the table once, defaults are
// valid, and Validate names the limit and its range.
func TestLimitTable(t *testing.T) {
	seen := map[string]bool{}
	l := DefaultLimits()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, s := range LimitTable() {
		if seen[s.Name] {
			t.Fatalf("%s twice", s.Name)
		}
		seen[s.Name] = true
		if (s.DurationPtr(&l) == nil) == (s.IntPtr(&l) == nil) {
			t.Fatalf("%s: exactly one of duration and count", s.Name)
		}
		bad := l
		s.Set(&bad, s.Min-1)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), s.Name) {
			t.Fatalf("%s below its minimum: %v", s.Name, err)
		}
		if s.Max < 1<<62 {
			s.Set(&bad, s.Max+1)
			if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), s.Name) {
				t.Fatalf("%s above its maximum: %v", s.Name, err)
			}
		}
	}
	// Every field of Limits is described, under its JSON name.
	lt := reflect.TypeFor[Limits]()
	if len(seen) != lt.NumField() {
		t.Fatalf("%d limits in the table; Limits has %d fields", len(seen), lt.NumField())
	}
	for i := range lt.NumField() {
		if tag := lt.Field(i).Tag.Get("json"); !seen[tag] {
			t.Fatalf("field %s (%s) is not in the table", lt.Field(i).Name, tag)
		}
	}
	// Each row reads and writes the field of its name, and LimitSpecs
	// yields the rows in LimitTable's order.
	table := LimitTable()
	n := 0
	for i, s := range LimitSpecs() {
		if n++; s.Name != table[i].Name {
			t.Fatalf("LimitSpecs row %d is %s; LimitTable's is %s", i, s.Name, table[i].Name)
		}
		var set Limits
		s.Set(&set, 7)
		v := reflect.ValueOf(set)
		for f := range lt.NumField() {
			want := int64(0)
			if lt.Field(f).Tag.Get("json") == s.Name {
				want = 7
			}
			if got := v.Field(f).Int(); got != want {
				t.Fatalf("%s.Set(7) left %s at %d", s.Name, lt.Field(f).Name, got)
			}
		}
		if got := s.Get(set); got != 7 {
			t.Fatalf("%s.Get = %d after Set(7)", s.Name, got)
		}
	}
	if n != len(table) {
		t.Fatalf("LimitSpecs yields %d rows; LimitTable has %d", n, len(table))
	}
}

// cancelled is the op of the last request the kernel cancelled.
func (h *harness) cancelled() OpID {
	h.t.Helper()
	for i := len(h.all) - 1; i >= 0; i-- {
		if h.all[i].Kind == EffCancelLLM {
			return h.all[i].Op
		}
	}
	h.t.Fatal("no request was cancelled")
	return 0
}
