package kernel

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
)

// The failure catalogue's second half, F8–F14 (failures_test.go holds the
// table and F1–F7).

// F8: interject and cancel are separate; interjected text appears exactly
// once, after the partial it cut; repeated cancels are coalesced.
func f8Depth1(t *testing.T, h *harness) {
	h.submit("refactor")
	h.text(Root, "I will del")
	first := h.req(Root)
	out := h.do(Interject(0, "no, keep it"))
	if count(out, EffCancelLLM, Root) != 1 || count(out, EffStartLLM, Root) != 0 {
		t.Fatalf("F8: interject while streaming must cut now and restart after the debounce:%s", h.lastDescribe())
	}
	h.wait(50 * time.Millisecond)
	out = h.do(Interject(0, "and add tests"))
	if count(out, EffStartLLM, -1) != 0 || count(out, EffSetTimer, -1) != 0 {
		t.Fatalf("F8: a second interjection inside the window must join the pending restart:%s", h.lastDescribe())
	}
	m := h.mark()
	h.wait(50 * time.Millisecond)
	var req Effect
	for _, e := range h.since(m) {
		if e.Kind == EffStartLLM {
			req = e
		}
	}
	if req.Kind != EffStartLLM {
		t.Fatal("F8: no restart after the debounce window")
	}
	got := []string{}
	for _, msg := range req.Messages {
		got = append(got, string(msg.Role)+":"+msg.Content)
	}
	want := []string{"user:refactor", "assistant:I will del", "user:no, keep it", "user:and add tests"}
	if !slices.Equal(got, want) {
		t.Fatalf("F8: restart sends %q, want %q", got, want)
	}
	h.do(LLMError(0, first, FailureCancelled, "")) // the cut request acknowledges
	h.text(Root, "Kept.")
	// Rapid Esc: three cancels in 60 ms act once.
	h.do(Cancel(0, Root))
	h.wait(30 * time.Millisecond)
	h.do(Cancel(0, Root))
	h.wait(30 * time.Millisecond)
	h.do(Cancel(0, Root))
	if n := len(lifes(h.all, LifeInterrupted)); n != 1 {
		t.Fatalf("F8: %d interrupts from three rapid cancels", n)
	}
	if n := markers(h.k.Agent(Root).History()); n != 1 {
		t.Fatalf("F8: %d markers", n)
	}
	if n := len(lifes(h.all, LifeIgnored)); n != 2 {
		t.Fatalf("F8: want the 2 repeats recorded as ignored, got %d", n)
	}
}

func f8Depth3(t *testing.T, h *harness) {
	main, a, b := h.chain3()
	out := h.do(Interject(0, "also check b"))
	if count(out, EffCancelLLM, -1) != 0 || count(out, EffStartLLM, -1) != 0 {
		t.Fatalf("F8: an interjection while delegating must only queue:%s", h.lastDescribe())
	}
	if l := lifes(out, LifeInterjected); len(l) != 1 || !l[0].Queued {
		t.Fatalf("F8: want one queued interjection")
	}
	h.say(b, "b done")
	m := h.mark()
	h.say(a, "a done")
	var req Effect
	for _, e := range h.since(m) {
		if e.Kind == EffStartLLM && e.Agent == main {
			req = e
		}
	}
	n := 0
	for i, msg := range req.Messages {
		if msg.Content == "also check b" {
			n++
			if !msg.Interjection || req.Messages[i-1].Role != RoleTool {
				t.Fatalf("F8: interjection must follow a's result:\n%s", dumpHistory(req.Messages))
			}
		}
	}
	if n != 1 {
		t.Fatalf("F8: interjection appears %d times", n)
	}
	// It never reached the children.
	for _, id := range []AgentID{a, b} {
		for _, msg := range h.k.Agent(id).History() {
			if msg.Content == "also check b" {
				t.Fatal("F8: interjection leaked into a child")
			}
		}
	}
}

// F9: one owner, no polling: an interrupt takes effect inside the Step that
// delivers it; the kernel starts no goroutines and has no locks, channels or
// goroutine statements in its source.
func f9Depth1(t *testing.T, h *harness) {
	before := runtime.NumGoroutine()
	h.submit("work")
	c := h.call("grep", `{}`)
	h.ask(Root, c)
	out := h.do(Cancel(0, Root))
	if count(out, EffCancelTool, Root) != 1 || h.k.Agent(Root).State() != fsm.Interrupted {
		t.Fatal("F9: the cancel did not act within its own Step")
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("F9: goroutines %d → %d", before, after)
	}
	checkNoConcurrency(t)
}

func f9Depth3(t *testing.T, h *harness) {
	before := runtime.NumGoroutine()
	main, _, b := h.chain3()
	out := h.do(Cancel(0, main))
	if count(out, EffCancelLLM, b) != 1 {
		t.Fatal("F9: the grandchild's stream was not cancelled in the same Step")
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("F9: goroutines %d → %d", before, after)
	}
}

// checkNoConcurrency parses kernel/ and fsm/ and fails on go statements,
// channel types or sync imports.
func checkNoConcurrency(t *testing.T) {
	t.Helper()
	for _, dir := range []string{".", "../fsm"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "sync" || p == "sync/atomic" {
					t.Errorf("F9: %s imports %s", f, p)
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch n.(type) {
				case *ast.GoStmt:
					t.Errorf("F9: %s starts a goroutine", f)
				case *ast.ChanType:
					t.Errorf("F9: %s uses a channel", f)
				}
				return true
			})
		}
	}
}

// F10: the lifecycle log is replayable from any sequence number.
func f10Depth1(t *testing.T, h *harness) {
	h.submit("hi")
	c := h.call("ls", `{}`)
	h.ask(Root, c)
	h.result(c.ID, "a b")
	h.say(Root, "done")
	var emitted []Lifecycle
	for _, e := range h.all {
		if e.Kind == EffEmit {
			emitted = append(emitted, e.Life)
		}
	}
	got, err := h.k.Log().From(1, nil)
	if err != nil || !slices.Equal(got, emitted) {
		t.Fatalf("F10: log from 1 differs from emitted events (err %v)", err)
	}
	for _, start := range []uint64{2, uint64(len(emitted) / 2), uint64(len(emitted))} {
		late, _ := h.k.Log().From(start, nil)
		if !slices.Equal(late, emitted[start-1:]) {
			t.Fatalf("F10: a subscriber starting at %d missed events", start)
		}
	}
	if tail, _ := h.k.Log().From(h.k.Log().Next(), nil); len(tail) != 0 {
		t.Fatal("F10: reading from Next must return nothing")
	}
}

func f10Depth3(t *testing.T, h *harness) {
	_, a, b := h.chain3()
	h.say(b, "b")
	h.say(a, "a")
	h.say(Root, "main")
	var emitted []Lifecycle
	for _, e := range h.all {
		if e.Kind == EffEmit {
			emitted = append(emitted, e.Life)
		}
	}
	if _, err := h.k.Log().From(1, nil); !errors.Is(err, ErrCompacted) {
		t.Fatalf("F10: want ErrCompacted for a compacted start, got %v", err)
	}
	oldest := h.k.Log().Oldest()
	got, err := h.k.Log().From(oldest, nil)
	if err != nil || len(got) != 16 || !slices.Equal(got, emitted[len(emitted)-16:]) {
		t.Fatalf("F10: resync from oldest=%d: %d events, err %v", oldest, len(got), err)
	}
}

// F11: after anything, every history is a valid transcript: every call has
// exactly one result, no empty assistant message.
func f11Depth1(t *testing.T, h *harness) {
	h.submit("many tools")
	calls := []ToolCall{h.call("a", `{}`), h.call("b", `{}`), h.call("c", `{}`)}
	h.ask(Root, calls...)
	h.result(calls[1].ID, "b ok")
	h.do(Cancel(0, Root))
	hist := h.k.Agent(Root).History()
	if err := ValidateTranscript(hist, false); err != nil {
		t.Fatalf("F11: %v", err)
	}
	for _, c := range calls {
		n := 0
		for _, msg := range hist {
			if msg.Role == RoleTool && msg.ToolCallID == c.ID {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("F11: call %s has %d results", c.ID, n)
		}
	}
	h.wait(time.Minute)
	h.quiescent()
	// A stream that ends with nothing stores no empty assistant message; one
	// cut before its first token stores no partial.
	h.submit("say nothing")
	before := len(h.k.Agent(Root).History())
	h.end(Root)
	if got := len(h.k.Agent(Root).History()); got != before {
		t.Fatalf("F11: an empty reply added %d message(s)", got-before)
	}
	h.outcome(Root, OutcomeCompleted, ReasonNone)
	h.submit("again")
	h.do(Interject(0, "wait"))
	for _, msg := range h.k.Agent(Root).History() {
		if msg.Role == RoleAssistant && msg.Content == "" && len(msg.ToolCalls) == 0 {
			t.Fatal("F11: empty assistant message")
		}
	}
}

func f11Depth3(t *testing.T, h *harness) {
	h.submit("go")
	h.ask(Root, h.deleg("a", "a task"))
	a := h.id("a")
	h.ask(a, h.call("grep", `{}`), h.deleg("b", "b task"))
	b := h.id("b")
	h.ask(b, h.call("x", `{}`), h.call("y", `{}`))
	h.do(Cancel(0, Root))
	h.wait(time.Minute)
	h.quiescent()
	for _, id := range []AgentID{Root, a, b} {
		if err := ValidateTranscript(h.k.Agent(id).History(), false); err != nil {
			t.Fatalf("F11: %s: %v\n%s", h.k.Agent(id).Path(), err, dumpHistory(h.k.Agent(id).History()))
		}
	}
}

// F12: a tool call still being streamed when the interrupt came is dropped
// and recorded, never started.
func f12Depth1(t *testing.T, h *harness) {
	h.submit("edit")
	r := h.req(Root)
	h.chunk[r]++
	h.do(CallFragment(0, r, h.chunk[r], CallDelta{Index: 0, ID: "call_rm", Name: "shell"}))
	h.chunk[r]++
	h.do(CallFragment(0, r, h.chunk[r], CallDelta{Index: 0, Args: `{"command":"rm -rf /tmp/x`}))
	m := h.mark()
	h.do(Cancel(0, Root))
	if count(h.since(m), EffStartTool, -1) != 0 {
		t.Fatal("F12: a half-streamed call was started")
	}
	d := lifes(h.since(m), LifeCallDropped)
	if len(d) != 1 || d[0].CallID != "call_rm" || d[0].Text != `{"command":"rm -rf /tmp/x` {
		t.Fatalf("F12: dropped call not recorded: %v", d)
	}
	for _, msg := range h.k.Agent(Root).History() {
		if len(msg.ToolCalls) > 0 {
			t.Fatal("F12: a dropped call entered history")
		}
	}
	// The stream's end arriving after the cancel is only an acknowledgement.
	out := h.do(LLMEnd(0, r))
	if count(out, EffStartTool, -1) != 0 {
		t.Fatal("F12: a late stream end started the call")
	}
	h.quiescent()
}

func f12Depth3(t *testing.T, h *harness) {
	main, _, b := h.chain3()
	r := h.req(b)
	h.chunk[r]++
	h.do(CallFragment(0, r, h.chunk[r], CallDelta{Index: 0, ID: "call_w", Name: "write_file", Args: `{"path":"a.go","content":"pack`}))
	m := h.mark()
	h.do(Cancel(0, main))
	h.do(LLMEnd(0, r))
	if count(h.since(m), EffStartTool, -1) != 0 {
		t.Fatal("F12: the grandchild's half-streamed call was started")
	}
	if d := lifes(h.since(m), LifeCallDropped); len(d) != 1 || d[0].Agent != b {
		t.Fatalf("F12: want b's call recorded as dropped, got %v", d)
	}
	h.quiescent()
}

// F13: every abort carries its typed reason; a watchdog is never reported as
// a user cancel.
func f13Depth1(t *testing.T, h *harness) {
	h.submit("think")
	h.text(Root, "hmm")
	h.wait(h.k.Config().StallTimeout)
	to := lifes(h.all, LifeTimedOut)
	if len(to) != 1 || to[0].Reason != ReasonStallTimeout {
		t.Fatalf("F13: want one stall timeout, got %v", to)
	}
	last := lastMsg(h.k.Agent(Root).History())
	if !strings.Contains(last.Content, `reason="stall_timeout"`) || !strings.Contains(last.Content, `outcome="timed_out"`) {
		t.Fatalf("F13: marker %q", last.Content)
	}
	h.wait(h.k.Config().Grace)
	h.outcome(Root, OutcomeTimedOut, ReasonStallTimeout)
	h.quiescent()
	// First-token timeout is its own reason.
	h.submit("again")
	h.wait(h.k.Config().FirstTokenTimeout + h.k.Config().Grace)
	h.outcome(Root, OutcomeTimedOut, ReasonFirstTokenTimeout)
}

func f13Depth3(t *testing.T, h *harness) {
	main, a, b := h.chain3()
	h.text(b, "thinking")
	h.wait(h.k.Config().StallTimeout)
	h.wait(h.k.Config().Grace) // b's request never acknowledges: abandoned
	h.outcome(b, OutcomeTimedOut, ReasonStallTimeout)
	r := decodeResult(t, toolContent(t, h.k.Agent(a).History(), lastCallID(h, a)))
	if r.Outcome != OutcomeTimedOut || r.Reason != ReasonStallTimeout {
		t.Fatalf("F13: a sees b as %s/%s", r.Outcome, r.Reason)
	}
	h.state(a, fsm.Streaming) // a goes on
	h.state(main, fsm.Delegating)
	for _, l := range lifes(h.all, LifeInterrupted) {
		if l.Agent != b {
			t.Fatalf("F13: %s", l.Describe())
		}
	}
	// A tool deadline at a is a timed_out tool result; a continues.
	c := h.call("hang", `{}`)
	h.ask(a, c)
	h.wait(h.k.Config().ToolTimeout)
	got := toolContent(t, h.k.Agent(a).History(), c.ID)
	if got != `{"type":"tool_aborted","status":"timed_out","reason":"tool_timeout"}` {
		t.Fatalf("F13: tool timeout content %s", got)
	}
	h.state(a, fsm.Streaming)
	h.say(a, "a done")
	h.say(main, "done")
	h.outcome(main, OutcomeCompleted, ReasonNone)
	h.wait(h.k.Config().Grace)
	h.quiescent()
}

// F14: interrupts are bound to their turn; a child cannot start under a
// cancelled parent; one marker and one terminal outcome per turn.
func f14Depth1(t *testing.T, h *harness) {
	h.submit("one")
	h.say(Root, "done")
	turn1 := h.k.Agent(Root).Turn()
	out := h.do(Cancel(0, Root)) // arrives just after completion
	if l := lifes(out, LifeIgnored); len(l) != 1 || len(lifes(out, LifeTurnEnded)) != 0 {
		t.Fatalf("F14: a cancel after completion must be a recorded no-op:%s", h.lastDescribe())
	}
	h.submit("two")
	out = h.do(CancelTurn(0, Root, turn1)) // Esc pressed during turn 1, delivered late
	if len(lifes(out, LifeIgnored)) != 1 {
		t.Fatalf("F14: a cancel bound to an ended turn must be ignored:%s", h.lastDescribe())
	}
	h.state(Root, fsm.Streaming)
	c := h.call("stubborn", `{}`)
	h.ask(Root, c)
	h.do(Cancel(0, Root))
	h.wait(500 * time.Millisecond) // outside the debounce window, still settling
	h.do(Cancel(0, Root))
	h.wait(time.Minute)
	perTurn := map[uint64]int{}
	for _, l := range lifes(h.all, LifeTurnEnded) {
		perTurn[l.Turn]++
	}
	for turn, n := range perTurn {
		if n != 1 {
			t.Fatalf("F14: turn %d has %d terminal outcomes", turn, n)
		}
	}
	if n := markers(h.k.Agent(Root).History()); n != 1 {
		t.Fatalf("F14: %d markers for one interrupted turn", n)
	}
	calls := map[string]int{}
	for _, l := range lifes(h.all, LifeCallFinished) {
		calls[l.CallID]++
	}
	if calls[c.ID] != 1 {
		t.Fatalf("F14: call has %d terminal results", calls[c.ID])
	}
	h.quiescent()
}

func f14Depth3(t *testing.T, h *harness) {
	h.submit("go")
	h.ask(Root, h.deleg("a", "a task"))
	a := h.id("a")
	r := h.req(a)
	// a's delegation to b is fully streamed, but the cancel of a wins the
	// race: its stream end arrives after.
	d := h.deleg("b", "b task")
	h.stream(a, 0, d)
	m := h.mark()
	h.do(Cancel(0, a))
	out := h.do(LLMEnd(0, r))
	if count(out, EffStartLLM, a) != 0 || len(lifes(h.since(m), LifeDelegated)) != 0 || h.k.NumAgents() != 2 {
		t.Fatalf("F14: a child started under a cancelled parent:%s", h.lastDescribe())
	}
	if _, ok := h.k.Find("b"); ok {
		t.Fatal("F14: b exists")
	}
	h.state(a, fsm.Idle)
	h.outcome(a, OutcomeInterrupted, ReasonUserCancel)
	h.state(Root, fsm.Streaming) // main continues after a's typed result
	// Second delegation: b finishes, then a late cancel for b is a no-op.
	h.ask(Root, h.deleg("a", "again"))
	a2 := h.id("a#2")
	h.ask(a2, h.deleg("b", "b task"))
	b := h.id("b")
	h.say(b, "b done")
	out = h.do(Cancel(0, b))
	if len(lifes(out, LifeIgnored)) != 1 || len(lifes(out, LifeTurnEnded)) != 0 {
		t.Fatal("F14: cancel of a finished child must be a no-op")
	}
	h.say(a2, "a2 done")
	h.say(Root, "main done")
	h.quiescent()
	seen := map[[2]uint64]int{}
	for _, l := range lifes(h.all, LifeTurnEnded) {
		seen[[2]uint64{uint64(l.Agent), l.Turn}]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("F14: agent %d turn %d has %d outcomes", k[0], k[1], n)
		}
	}
	if len(seen) != 4 { // main, a, a#2, b
		t.Fatalf("F14: want 4 ended turns, got %d", len(seen))
	}
}
