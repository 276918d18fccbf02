package kernel

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
)

// harbour is a long answer: about 150 tokens by MessageTokens.
const harbour = "The harbour has three piers. The north pier takes the ferries to the islands, twice a day in summer and once in winter; " +
	"the east pier takes the container ships, with two cranes of forty tonnes each and a third that has been broken since the storm; " +
	"the old pier is left to the fishing boats, which land their catch at dawn and sell it on the quay before eight. " +
	"Four tugs work the harbour: the Bream, the Skate, the Ling and the Conger, the last of them kept in reserve for bad weather. " +
	"The harbour master keeps the tide board by the gate, and the pilots meet every ship at the outer buoy."

// compacting sets a window of 400 tokens with a threshold of 160: a second
// turn after a harbour-long answer compacts.
func compacting(c *Config) { c.ContextWindow, c.CompactPercent = 400, 40 }

// primed runs one turn with a long answer and submits a second one, whose
// request needs a compaction first: the compaction's request is live. It
// returns the history as it was when the compaction started.
func primed(t *testing.T, mutate func(*Config)) (*harness, []Message) {
	t.Helper()
	h := newHarness(t, func(c *Config) {
		compacting(c)
		if mutate != nil {
			mutate(c)
		}
	})
	h.submit("Describe the harbour.")
	h.say(Root, harbour)
	h.submit("And the lighthouse?")
	if !h.k.Agent(Root).Compacting() {
		t.Fatalf("the second turn did not compact first:%s", h.lastDescribe())
	}
	return h, slices.Clone(h.k.Agent(Root).History())
}

func compactStarts(effs []Effect) []Effect {
	var out []Effect
	for _, e := range effs {
		if e.Kind == EffStartLLM && e.Compact {
			out = append(out, e)
		}
	}
	return out
}

// sameMessages compares histories field by field (the messages are values;
// their reasoning is compared by content).
func sameMessages(a, b []Message) bool {
	return reflect.DeepEqual(a, b)
}

// TestCompactionReplacesAtomically: while the summary streams — and an
// interjection waits — the history is exactly the one before the
// compaction; in the step the summary's stream ends it is exactly its
// compacted form: the summary, then the kept tail, then the interjection.
func TestCompactionReplacesAtomically(t *testing.T) {
	h, before := primed(t, nil)
	for _, step := range []func(){
		func() { h.text(Root, "Three piers, ") },
		func() { h.do(Interject(0, "Keep it short.")) },
		func() { h.text(Root, "four tugs.") },
	} {
		step()
		if got := h.k.Agent(Root).History(); !sameMessages(got, before) {
			t.Fatalf("the history changed before the compaction completed:\n%s", dumpHistory(got))
		}
		if n := len(lifes(h.last, LifeDelta)); n != 0 {
			t.Fatalf("a summary chunk published %d delta record(s): a summary is no answer", n)
		}
	}
	h.end(Root)
	want := []Message{
		{Role: RoleUser, Content: summaryContent("Three piers, four tugs."), Summary: true},
		before[2], // the newest prompt: the kept tail
		{Role: RoleUser, Content: "Keep it short.", Interjection: true},
	}
	if got := h.k.Agent(Root).History(); !sameMessages(got, want) {
		t.Fatalf("compacted history:\n%swant\n%s", dumpHistory(got), dumpHistory(want))
	}
	c := expectLife(t, h.last, LifeCompacted)
	if c.N != 2 || c.Text != "Three piers, four tugs." {
		t.Fatalf("compacted record %s: want 2 messages summarised into the summary", c.Describe())
	}
	starts := 0
	for _, e := range h.last {
		if e.Kind == EffStartLLM {
			starts++
			if e.Compact || !sameMessages(e.Messages, want) {
				t.Fatalf("the request after the compaction sends %d messages (compact %v)", len(e.Messages), e.Compact)
			}
		}
	}
	if starts != 1 {
		t.Fatalf("%d requests after the compaction, want the one it preceded", starts)
	}
}

// TestCompactionAbortLeavesHistory: whatever ends a compaction before its
// summary applies — a cancel, a shutdown, each deadline, the output cap, a
// failure, a summary without text — the history is the one before it plus
// exactly what the turn's end appends (its marker), and nothing of the
// summary. A crash leaves it untouched and asks the compaction again.
func TestCompactionAbortLeavesHistory(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    func(*Config)
		abort  func(h *harness)
		reason Reason
	}{
		{"cancel", nil, func(h *harness) { h.text(Root, "Three"); h.do(Cancel(0, Root)) }, ReasonUserCancel},
		{"shutdown", nil, func(h *harness) { h.text(Root, "Three"); h.do(Shutdown(0)) }, ReasonShutdown},
		{"first token", nil, func(h *harness) { h.wait(h.k.Config().FirstTokenTimeout) }, ReasonFirstTokenTimeout},
		{"stall", nil, func(h *harness) { h.text(Root, "Three"); h.wait(h.k.Config().StallTimeout) }, ReasonStallTimeout},
		{"turn", func(c *Config) { c.TurnTimeout = 5 * time.Second }, func(h *harness) {
			for range 4 {
				h.text(Root, "more ")
				h.wait(time.Second)
			}
			h.wait(time.Second)
		}, ReasonTurnTimeout},
		{"output cap", func(c *Config) { c.MaxMessageBytes = 700 }, func(h *harness) { h.text(Root, strings.Repeat("x", 701)) }, ReasonOutputLimit},
		{"failure", nil, func(h *harness) {
			h.text(Root, "Three")
			h.do(LLMError(0, h.req(Root), FailureServer, "HTTP 502"))
		}, ReasonCompactionFailed},
		{"no summary", nil, func(h *harness) { h.end(Root) }, ReasonCompactionFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, before := primed(t, c.cfg)
			c.abort(h)
			h.wait(h.k.Config().Grace) // whatever was cancelled is abandoned
			if _, r := h.k.Agent(Root).Outcome(); r != c.reason || h.k.Agent(Root).State() != fsm.Idle {
				t.Fatalf("turn ended %s/%s, want reason %s", h.k.Agent(Root).State(), r, c.reason)
			}
			got := h.k.Agent(Root).History()
			if len(got) != len(before)+1 || !sameMessages(got[:len(before)], before) || !got[len(before)].Marker {
				t.Fatalf("history after the aborted compaction:\n%swant the one before it and its marker:\n%s", dumpHistory(got), dumpHistory(before))
			}
			if strings.Contains(got[len(before)].Content, `partial="true"`) {
				t.Fatal("the marker says text was cut off: a summary is no part of the answer")
			}
			h.quiescent()
		})
	}
	t.Run("crash", func(t *testing.T) {
		h, before := primed(t, nil)
		h.text(Root, "Three")
		fresh := MustNew(h.k.Config())
		for _, ev := range h.events {
			fresh.Step(ev)
		}
		h.k, h.reqs, h.timers = fresh, map[AgentID]OpID{}, map[OpID]time.Duration{}
		out := h.do(Recover(h.now))
		if len(compactStarts(out)) != 1 {
			t.Fatalf("the recovery did not ask the compaction again:%s", h.lastDescribe())
		}
		if got := h.k.Agent(Root).History(); !sameMessages(got, before) {
			t.Fatalf("the crash changed the history:\n%s", dumpHistory(got))
		}
		h.say(Root, "Three piers.")
		if got := h.k.Agent(Root).History(); !got[0].Summary || got[0].Content != summaryContent("Three piers.") {
			t.Fatalf("the compaction asked again did not apply:\n%s", dumpHistory(got))
		}
	})
	t.Run("compaction turn", func(t *testing.T) {
		for _, abort := range []func(h *harness){
			func(h *harness) { h.do(Cancel(0, Root)) },
			func(h *harness) { h.do(LLMError(0, h.req(Root), FailureServer, "HTTP 500")) },
			func(h *harness) { h.wait(h.k.Config().FirstTokenTimeout) },
		} {
			h := newHarness(t, nil)
			h.submit("Describe the harbour.")
			h.say(Root, harbour)
			before := slices.Clone(h.k.Agent(Root).History())
			h.do(Compact(0, "piers"))
			h.text(Root, "Three")
			abort(h)
			h.wait(h.k.Config().Grace)
			if got := h.k.Agent(Root).History(); !sameMessages(got, before) {
				t.Fatalf("an aborted compaction turn changed the history:\n%s", dumpHistory(got))
			}
		}
	})
}

// TestChildCompactsUnderAncestorDeadline: a child compacts its own history
// (a tool result made it too long) under its parent's turn deadline; when
// that deadline fires, the child's compaction is cut like any request: one
// cancel, its history as it was plus its marker, its outcome
// parent_cancelled.
func TestChildCompactsUnderAncestorDeadline(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		compacting(c)
		c.TurnTimeout, c.StallTimeout, c.FirstTokenTimeout = time.Minute, 2*time.Minute, 2*time.Minute
	})
	h.submit("Survey the coast.")
	h.ask(Root, h.deleg("surveyor", "read the harbour file"))
	kid := h.id("surveyor")
	h.ask(kid, h.call("read_file", `{"path":"harbour.txt"}`))
	h.result("call_2", harbour)
	if !h.k.Agent(kid).Compacting() {
		t.Fatalf("the child did not compact before its follow-up:%s", h.lastDescribe())
	}
	before := slices.Clone(h.k.Agent(kid).History())
	op := h.req(kid)
	h.text(kid, "The file describes")
	h.wait(time.Minute)
	if h.cancels[op] != 1 {
		t.Fatalf("the child's compaction got %d cancels, want 1", h.cancels[op])
	}
	h.wait(h.k.Config().Grace)
	h.outcome(kid, OutcomeInterrupted, ReasonParentCancelled)
	h.outcome(Root, OutcomeTimedOut, ReasonTurnTimeout)
	got := h.k.Agent(kid).History()
	if len(got) != len(before)+1 || !sameMessages(got[:len(before)], before) || !got[len(before)].Marker {
		t.Fatalf("the child's history:\n%s", dumpHistory(got))
	}
}

// TestServerRefusalOneCompactionOneRetry: a request the server refuses as
// too long gets exactly one compaction and one more request; refused
// again, the turn ends context_exhausted. With no request budget left
// after the compaction, the turn ends budget_exhausted instead.
func TestServerRefusalOneCompactionOneRetry(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("Describe the harbour.")
	h.say(Root, harbour)
	mark := h.mark()
	h.submit("And the lighthouse?")
	h.do(LLMError(0, h.req(Root), FailureContextLength, "maximum context length is 100 tokens"))
	h.say(Root, "The harbour: three piers.")
	h.do(LLMError(0, h.req(Root), FailureContextLength, "maximum context length is 100 tokens"))
	all := h.since(mark)
	if n := len(compactStarts(all)); n != 1 {
		t.Fatalf("%d compactions, want 1", n)
	}
	if n := count(all, EffStartLLM, Root); n != 3 {
		t.Fatalf("%d requests (the compaction's included), want the refused one, the compaction and one retry", n)
	}
	h.outcome(Root, OutcomeFailed, ReasonContextExhausted)
	if l := lifes(all, LifeTurnEnded); !strings.Contains(l[0].Detail, "maximum context length is 100 tokens") {
		t.Fatalf("the detail does not quote the server: %q", l[0].Detail)
	}

	for _, tc := range []struct {
		name   string
		mutate func(*Config)
	}{
		{"tree budget", func(c *Config) { c.MaxRequests = 1 }},
		{"profile budget", func(c *Config) {
			c.Profiles = []Profile{{Name: "lead", AllTools: true, MaxRequests: 1}}
			c.RootProfile = "lead"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.mutate)
			h.submit("Describe the harbour.")
			h.do(LLMError(0, h.req(Root), FailureContextLength, "too long"))
			h.say(Root, "The user asked about the harbour.")
			h.outcome(Root, OutcomeBudgetExhausted, ReasonBudget)
		})
	}
}

// TestNoRequestPastKnownWindow: over 30 turns of long answers, every
// request goes out within the window (its estimate is the measure: no
// usage is reported), every summarising request within the threshold, and
// no two compactions precede one request.
func TestNoRequestPastKnownWindow(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.ContextWindow, c.CompactPercent, c.System = 800, 40, "You are the harbour's archivist."
	})
	compactions := 0
	for turn := range 30 {
		h.submit(fmt.Sprintf("Question %d about the harbour?", turn))
		for range 2 { // a compaction, then the request; or the request
			for _, e := range h.last {
				if e.Kind != EffStartLLM {
					continue
				}
				limit := h.k.Config().ContextWindow
				if e.Compact {
					limit = h.k.threshold()
				}
				if est := EstimateTokens(e.Messages); est > limit {
					t.Fatalf("turn %d: a request (compact %v) estimated %d tokens, past %d", turn, e.Compact, est, limit)
				}
			}
			if h.k.Agent(Root).Compacting() {
				compactions++
				h.say(Root, fmt.Sprintf("Summary of questions up to %d: the harbour has three piers.", turn))
				if h.k.Agent(Root).Compacting() {
					t.Fatalf("turn %d: a second compaction precedes one request", turn)
				}
				continue
			}
			h.say(Root, harbour)
			break
		}
		h.outcome(Root, OutcomeCompleted, ReasonNone)
	}
	if compactions < 10 {
		t.Fatalf("only %d compactions in 30 turns", compactions)
	}
}

// TestPlanNeverSplitsCalls: the kept tail starts at a cut point — never at
// a tool message, a marker or an interjection — whatever the budget.
func TestPlanNeverSplitsCalls(t *testing.T) {
	hist := []Message{
		{Role: RoleSystem, Content: "sys"},
		{Role: RoleUser, Content: "q1"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "a", Name: "t", Arguments: "{}"}, {ID: "b", Name: "t", Arguments: "{}"}}},
		{Role: RoleTool, ToolCallID: "a", Content: strings.Repeat("r", 40)},
		{Role: RoleTool, ToolCallID: "b", Content: strings.Repeat("r", 40)},
		{Role: RoleAssistant, Content: "cut off", Partial: true},
		{Role: RoleUser, Content: "wait", Interjection: true},
		{Role: RoleAssistant, Content: "so", Partial: true},
		{Role: RoleUser, Content: markerContent(OutcomeInterrupted, ReasonUserCancel, true), Marker: true},
		{Role: RoleUser, Content: "q2"},
	}
	a := &agent{history: hist}
	seen := map[int]bool{}
	for keep := 0; keep <= EstimateTokens(hist); keep++ {
		c := planCompaction(a, whyThreshold, keep, 0)
		seen[c.cut] = true
		if c.first != 1 {
			t.Fatalf("keep %d: first %d, want the message after the system prompt", keep, c.first)
		}
		if c.cut < len(hist) && !cutPoint(hist[c.cut]) {
			t.Fatalf("keep %d: the tail starts at message %d (%s), which is no cut point", keep, c.cut, hist[c.cut].Role)
		}
		if EstimateTokens(hist[c.cut:]) > keep {
			t.Fatalf("keep %d: the tail measures %d", keep, EstimateTokens(hist[c.cut:]))
		}
		rest := append([]Message{{Role: RoleUser, Content: "summary", Summary: true}}, hist[c.cut:]...)
		if err := ValidateTranscript(rest, false); err != nil {
			t.Fatalf("keep %d: the compacted history is no transcript: %v", keep, err)
		}
	}
	// Every cut point is reached by some budget, and nothing else is.
	for i := 1; i <= len(hist); i++ {
		if want := i == len(hist) || cutPoint(hist[i]); seen[i] != want {
			t.Errorf("cut before message %d reached %v, want %v", i, seen[i], want)
		}
	}
}

// TestSummaryRequestFits: however long the summarised messages, the
// summarising request stays within the threshold: clipped message by
// message, or in its middle when even the headings do not fit; with the
// window unknown nothing is clipped.
func TestSummaryRequestFits(t *testing.T) {
	k := MustNew(Config{Limits: DefaultLimits()})
	k.cfg.ContextWindow, k.cfg.CompactPercent = 1000, 50
	for _, c := range []struct {
		name string
		hist []Message
		note string
	}{
		{"fits", []Message{{Role: RoleUser, Content: "q"}, {Role: RoleAssistant, Content: "a"}}, ""},
		{"one giant", []Message{{Role: RoleUser, Content: "q"}, {Role: RoleAssistant, Content: strings.Repeat("é", 20000)}}, "bytes left out"},
		{"many", slices.Repeat([]Message{{Role: RoleUser, Content: strings.Repeat("u", 300)}, {Role: RoleAssistant, Content: strings.Repeat("a", 300)}}, 40), "bytes left out"},
		{"headings", slices.Repeat([]Message{{Role: RoleUser, Content: "u"}}, 2000), "bytes left out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &agent{history: append([]Message{{Role: RoleSystem, Content: "sys"}}, c.hist...)}
			plan := planCompaction(a, whyRequested, 0, 0)
			msgs, ok := k.summaryRequest(a, plan)
			if !ok {
				t.Fatal("no room to ask")
			}
			if est := EstimateTokens(msgs); est > k.threshold() {
				t.Fatalf("the summarising request estimates %d tokens, past the threshold %d", est, k.threshold())
			}
			body := msgs[len(msgs)-1].Content
			if c.note != "" && !strings.Contains(body, c.note) || c.note == "" && strings.Contains(body, "left out") {
				t.Fatalf("clipping: want note %q in the request", c.note)
			}
			if !strings.HasPrefix(body, compactInstruction) || !strings.HasSuffix(body, "</conversation>") {
				t.Fatal("the instruction or the frame was clipped")
			}
			if !strings.Contains(body, "[user]") {
				t.Fatal("no message heading survived")
			}
			if strings.ContainsRune(body, '\uFFFD') {
				t.Fatal("a cut split a character")
			}
		})
	}
	unknown := MustNew(Config{Limits: DefaultLimits()})
	a := &agent{history: []Message{{Role: RoleUser, Content: strings.Repeat("x", 1<<20)}}}
	msgs, ok := unknown.summaryRequest(a, planCompaction(a, whyRequested, 0, 0))
	if !ok || strings.Contains(msgs[0].Content, "left out") {
		t.Fatal("with the window unknown the summarising request is clipped")
	}
}

// TestClipMiddleBounds: a clipped body never grows, fits its limit when the
// limit leaves room for the note, and is monotone in the limit (what the
// search in fitItems relies on).
func TestClipMiddleBounds(t *testing.T) {
	for _, s := range []string{"", "short", strings.Repeat("ab", 500), strings.Repeat("日本", 300)} {
		prev := -1
		for limit := 0; limit <= len(s)+5; limit++ {
			got := clipMiddle(s, limit)
			if len(got) > len(s) {
				t.Fatalf("clipMiddle(%d bytes, %d) grew to %d", len(s), limit, len(got))
			}
			if got != s && len(got) > limit && limit >= 40 {
				t.Fatalf("clipMiddle(%d bytes, %d) = %d bytes", len(s), limit, len(got))
			}
			if len(got) < prev {
				t.Fatalf("clipMiddle is not monotone at %d: %d after %d", limit, len(got), prev)
			}
			prev = len(got)
		}
	}
}

// TestUsageTotals: a turn's total counts its own requests and every
// descendant's, each once; a request that reports nothing counts as
// unreported; a request cut by an interjection that acknowledges after the
// turn ended counts unreported in the turn and shows its usage on its own
// record.
func TestUsageTotals(t *testing.T) {
	h := newHarness(t, nil)
	end := func(a AgentID, u *Usage) {
		ev := LLMEnd(0, h.req(a))
		ev.Usage = u
		h.do(ev)
	}
	h.submit("go")
	h.ask(Root, h.deleg("a", "task a")) // no usage
	a := h.id("a")
	h.ask(a, h.deleg("b", "task b"))
	b := h.id("b")
	h.text(b, "done")
	end(b, &Usage{PromptTokens: 10, CompletionTokens: 1, CachedTokens: 4})
	if u := h.k.Agent(b).Usage(); *u != (Usage{PromptTokens: 10, CompletionTokens: 1, CachedTokens: 4, Requests: 1}) {
		t.Fatalf("b's total %+v", *u)
	}
	h.text(a, "done")
	end(a, &Usage{PromptTokens: 20, CompletionTokens: 2, ReasoningTokens: 1})
	if u := h.k.Agent(a).Usage(); *u != (Usage{PromptTokens: 30, CompletionTokens: 3, CachedTokens: 4, ReasoningTokens: 1, Requests: 3, Unreported: 1}) {
		t.Fatalf("a's total %+v: want its two requests (one unreported) and b's", *u)
	}
	cut := h.req(Root)
	h.text(Root, "par")
	h.do(Interject(0, "more"))
	h.wait(h.k.Config().Debounce)
	h.text(Root, "final")
	end(Root, &Usage{PromptTokens: 100, CompletionTokens: 10})
	want := Usage{PromptTokens: 130, CompletionTokens: 13, CachedTokens: 4, ReasoningTokens: 1, Requests: 6, Unreported: 3}
	ended := lifes(h.last, LifeTurnEnded)
	if len(ended) != 1 || ended[0].Usage == nil || *ended[0].Usage != want {
		t.Fatalf("the root's turn_ended usage %v, want %+v", ended, want)
	}
	late := LLMEnd(0, cut)
	late.Usage = &Usage{PromptTokens: 7}
	h.do(late)
	ops := lifes(h.last, LifeOpEnded)
	if len(ops) != 1 || ops[0].Usage == nil || ops[0].Usage.PromptTokens != 7 {
		t.Fatalf("the late acknowledgement's record: %v", ops)
	}
	if u := h.k.Agent(Root).Usage(); *u != want {
		t.Fatalf("a request that ended after its turn changed the turn's total: %+v", *u)
	}
	// A request that reports nothing has no usage on its record.
	h.submit("again")
	h.say(Root, "ok")
	if ops := lifes(h.last, LifeOpEnded); ops[0].Usage != nil {
		t.Fatalf("unknown usage recorded as %+v", *ops[0].Usage)
	}
}

// TestEstimateUsesReportedPrompt: the estimate is the last reported prompt
// plus the measure of what was added since; a compaction forgets the report.
func TestEstimateUsesReportedPrompt(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("hello")
	if got, want := h.k.Agent(Root).Estimate(), EstimateTokens(h.k.Agent(Root).History()); got != want {
		t.Fatalf("estimate %d before any report, want the measure %d", got, want)
	}
	h.text(Root, "hi there")
	ev := LLMEnd(0, h.req(Root))
	ev.Usage = &Usage{PromptTokens: 500, CompletionTokens: 3}
	h.do(ev)
	h.submit("and?")
	hist := h.k.Agent(Root).History()
	if got, want := h.k.Agent(Root).Estimate(), 500+EstimateTokens(hist[1:]); got != want {
		t.Fatalf("estimate %d, want 500 plus the measure of the two messages added since: %d", got, want)
	}
	h.say(Root, "ok")
	h.do(Compact(0, ""))
	h.say(Root, "summary")
	if got, want := h.k.Agent(Root).Estimate(), EstimateTokens(h.k.Agent(Root).History()); got != want {
		t.Fatalf("estimate %d after a compaction, want the measure %d", got, want)
	}
}

// TestReasoningKeptWithItsMessage: the reasoning riding on a stream's end
// stays with the message that end appends (a text answer or a message with
// calls), never in a record; a cut stream's text and a summary keep none.
func TestReasoningKeptWithItsMessage(t *testing.T) {
	h := newHarness(t, nil)
	r := &Reasoning{Text: "I should look.", Field: "reasoning_content"}
	h.submit("go")
	h.stream(Root, 0, h.call("ls", `{}`))
	ev := LLMEnd(0, h.req(Root))
	ev.Reasoning = r
	h.do(ev)
	if m := lastAssistant(h.k.Agent(Root).History()); m.Reasoning == nil || *m.Reasoning != *r {
		t.Fatalf("the message with calls lost its reasoning: %+v", m)
	}
	for _, e := range h.all {
		if e.Kind == EffEmit && strings.Contains(e.Life.Describe(), r.Text) {
			t.Fatalf("reasoning shown in a record: %s", e.Life.Describe())
		}
	}
	h.result("call_1", "a b")
	h.text(Root, "par")
	h.do(Cancel(0, Root))
	if m := lastAssistant(h.k.Agent(Root).History()); !m.Partial || m.Reasoning != nil {
		t.Fatalf("cut text: %+v", m)
	}
}

// TestCompactInput: the compact input is refused after a shutdown and
// while the root works, is a recorded no-op with nothing to compact, and
// an interjection typed during a compaction turn starts the next turn.
func TestCompactInput(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.System = "sys" })
	out := h.do(Compact(0, ""))
	if l := expectLife(t, out, LifeIgnored); l.Text != "nothing to compact" {
		t.Fatalf("ignored: %q", l.Text)
	}
	h.submit("hi")
	out = h.do(Compact(0, ""))
	expectEffect(t, out, EffError)
	if e := out[0]; !strings.Contains(e.Detail, "working") || e.Err == nil || !errors.Is(e.Err, ErrNotIdle) {
		t.Fatalf("refusal while streaming: %+v", e)
	}
	h.say(Root, "hello")
	h.do(Compact(0, "greetings"))
	if l := expectLife(t, h.last, LifeCompactionStarted); l.Name != whyRequested || l.Text != "greetings" {
		t.Fatalf("compaction_started %s", l.Describe())
	}
	h.do(Interject(0, "and then?"))
	h.say(Root, "They said hello.")
	h.outcome(Root, OutcomeNone, ReasonNone) // the next turn runs
	if got := h.k.Agent(Root).History(); len(got) != 3 || !got[1].Summary || got[2].Content != "and then?" {
		t.Fatalf("history after the compaction turn:\n%s", dumpHistory(got))
	}
	h.say(Root, "nothing")
	h.do(Shutdown(0))
	out = h.do(Compact(0, ""))
	if e := out[0]; e.Kind != EffError || !errors.Is(e.Err, ErrShutdown) {
		t.Fatalf("compact after shutdown: %+v", e)
	}
}

// TestAppendStateSeesContext: every field of an agent's token accounting
// and compaction reaches the state encoding.
func TestAppendStateSeesContext(t *testing.T) {
	base := contextState{compaction: &compaction{why: "a", focus: "b", first: 1, cut: 2, estimate: 3}}
	enc := func(c contextState) []byte {
		e := stateEnc{r: NewFirstSight()}
		e.appendContext(&c)
		return e.b
	}
	for name, edit := range map[string]func(*contextState){
		"prompt":      func(c *contextState) { c.usage.total.PromptTokens++ },
		"completion":  func(c *contextState) { c.usage.total.CompletionTokens++ },
		"cached":      func(c *contextState) { c.usage.total.CachedTokens++ },
		"reasoning":   func(c *contextState) { c.usage.total.ReasoningTokens++ },
		"requests":    func(c *contextState) { c.usage.total.Requests++ },
		"reported n":  func(c *contextState) { c.usage.reported++ },
		"reported":    func(c *contextState) { c.reported++ },
		"reportedAt":  func(c *contextState) { c.reportedAt++ },
		"compacted":   func(c *contextState) { c.compacted = true },
		"compactTurn": func(c *contextState) { c.compactTurn = true },
		"none":        func(c *contextState) { c.compaction = nil },
		"why":         func(c *contextState) { x := *c.compaction; x.why = "z"; c.compaction = &x },
		"focus":       func(c *contextState) { x := *c.compaction; x.focus = "z"; c.compaction = &x },
		"first":       func(c *contextState) { x := *c.compaction; x.first = 9; c.compaction = &x },
		"cut":         func(c *contextState) { x := *c.compaction; x.cut = 9; c.compaction = &x },
		"estimate":    func(c *contextState) { x := *c.compaction; x.estimate = 9; c.compaction = &x },
	} {
		c := base
		edit(&c)
		if bytes.Equal(enc(c), enc(base)) {
			t.Errorf("%s: the encoding does not see it", name)
		}
	}
	m := Message{Role: RoleAssistant, Content: "x"}
	msgEnc := func(m Message) []byte {
		e := stateEnc{r: NewFirstSight()}
		e.msg(m)
		return e.b
	}
	for name, edit := range map[string]func(*Message){
		"summary":   func(m *Message) { m.Summary = true },
		"reasoning": func(m *Message) { m.Reasoning = &Reasoning{} },
		"text":      func(m *Message) { m.Reasoning = &Reasoning{Text: "t"} },
		"field":     func(m *Message) { m.Reasoning = &Reasoning{Field: "f"} },
		"details":   func(m *Message) { m.Reasoning = &Reasoning{Details: "d"} },
	} {
		x := m
		edit(&x)
		if bytes.Equal(msgEnc(x), msgEnc(m)) {
			t.Errorf("message %s: the encoding does not see it", name)
		}
	}
}

// compactionCases are TestDeclaredTransitions' cases for the compaction rows.
func compactionCases() map[[2]fsm.State]transitionCase {
	return map[[2]fsm.State]transitionCase{
		key(fsm.Idle, fsm.Compact): {run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.say(Root, "hello")
			out := h.do(Compact(0, ""))
			if len(compactStarts(out)) != 1 {
				t.Fatal("want the summarising request")
			}
			expectLife(t, out, LifeTurnStarted)
		}},
		key(fsm.Streaming, fsm.Compact): {cfg: compacting, run: func(t *testing.T, h *harness) {
			h.submit("Describe the harbour.")
			h.say(Root, harbour)
			out := h.do(Submit(0, "And the lighthouse?"))
			if len(compactStarts(out)) != 1 || count(out, EffStartLLM, Root) != 1 {
				t.Fatal("want the summarising request instead of the request")
			}
		}},
		key(fsm.Streaming, fsm.Compacted): {cfg: compacting, run: func(t *testing.T, h *harness) {
			h.submit("Describe the harbour.")
			h.say(Root, harbour)
			h.submit("And the lighthouse?")
			h.say(Root, "Three piers.")
			expectLife(t, h.last, LifeCompacted)
			if count(h.last, EffStartLLM, Root) != 1 || len(compactStarts(h.last)) != 0 {
				t.Fatal("want the request the compaction preceded")
			}
		}},
		key(fsm.Streaming, fsm.ContextExhausted): {cfg: func(c *Config) {
			c.ContextWindow, c.CompactPercent, c.System = 100, 50, strings.Repeat("s", 500)
		}, run: func(t *testing.T, h *harness) {
			h.submit("hi")
			h.outcome(Root, OutcomeFailed, ReasonContextExhausted)
			if count(h.all, EffStartLLM, -1) != 0 {
				t.Fatal("a request that cannot fit went out")
			}
		}},
	}
}

// TestCompactionCarriesProfile: a compaction's summarising request goes to
// its agent's model like every other request: it carries the agent's
// profile (docs/semantics.md, "Profiles").
func TestCompactionCarriesProfile(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Profiles = []Profile{{Name: "lead", AllTools: true}}
		c.RootProfile = "lead"
	})
	h.submit("Describe the harbour.")
	h.do(LLMError(0, h.req(Root), FailureContextLength, "too long"))
	n := 0
	for _, e := range h.last {
		if e.Kind == EffStartLLM && e.Compact {
			n++
			if e.Profile != "lead" {
				t.Fatalf("the summarising request carries profile %q, want lead", e.Profile)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d summarising requests, want 1", n)
	}
}
