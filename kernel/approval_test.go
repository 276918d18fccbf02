package kernel

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/fsm"
)

// Tests of docs/semantics.md, "Approvals": one per point of the section.

func asking(tools ...string) func(*Config) {
	return func(c *Config) { c.Ask = tools }
}

// requested is the approval_requested record of call id among effs.
func requested(t testing.TB, effs []Effect, id string) Lifecycle {
	t.Helper()
	for _, l := range lifes(effs, LifeApprovalRequested) {
		if l.CallID == id {
			return l
		}
	}
	t.Fatalf("no approval_requested for %s in%s", id, describeEffects(effs))
	return Lifecycle{}
}

func describeEffects(effs []Effect) string {
	var b strings.Builder
	for _, e := range effs {
		b.WriteString("\n  " + e.Describe())
	}
	return b.String()
}

// started reports whether effs start call id.
func started(effs []Effect, id string) bool {
	return slices.ContainsFunc(effs, func(e Effect) bool { return e.Kind == EffStartTool && e.Call.ID == id })
}

// resolved is the end of call id's wait among effs (ApprovalNone if none).
func resolved(effs []Effect, id string) Lifecycle {
	for _, l := range lifes(effs, LifeApprovalResolved) {
		if l.CallID == id {
			return l
		}
	}
	return Lifecycle{}
}

// TestDigest: the first 16 hex digits of the SHA-256 of the arguments,
// byte for byte, as `printf '%s' "$ARGS" | sha256sum | cut -c1-16` gives.
func TestDigest(t *testing.T) {
	for _, args := range []string{`{"command":"rm -rf build"}`, `{ "command": "rm -rf build" }`, ``, "é\x00"} {
		sum := sha256.Sum256([]byte(args))
		want := hex.EncodeToString(sum[:])[:16]
		if got := Digest(args); got != want || len(got) != DigestLen {
			t.Errorf("Digest(%q) = %s, want %s", args, got, want)
		}
	}
	if Digest(`{"command":"rm -rf build"}`) != "ad1686665270a1d1" {
		t.Error("the digest of the documented example changed")
	}
	if Digest(`{"a":1}`) == Digest(`{ "a": 1 }`) {
		t.Error("the digest normalises the arguments")
	}
}

// TestApprovalWhichCallsAsk: Config.Ask names the tools that ask; "*"
// every tool but the delegate tool, which never asks and may not be named.
func TestApprovalWhichCallsAsk(t *testing.T) {
	for _, c := range []struct {
		ask  []string
		want []string // the tools of {shell, read_file} that ask
	}{
		{nil, nil},
		{[]string{"shell"}, []string{"shell"}},
		{[]string{"*"}, []string{"shell", "read_file"}},
		{[]string{"write_file"}, nil},
	} {
		h := newHarness(t, asking(c.ask...))
		h.submit("go")
		h.ask(Root, h.call("shell", `{}`), h.call("read_file", `{}`), h.deleg("kid", "work"))
		var got []string
		for _, l := range lifes(h.all, LifeApprovalRequested) {
			got = append(got, l.Name)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Ask %q: %v ask, want %v", c.ask, got, c.want)
		}
		if len(h.k.Approvals(nil)) != len(c.want) {
			t.Errorf("Ask %q: Approvals lists %v", c.ask, h.k.Approvals(nil))
		}
		if h.k.Agent(h.id("kid")).State() != fsm.Streaming {
			t.Errorf("Ask %q: the delegation did not spawn its child at once", c.ask)
		}
	}
	for _, bad := range [][]string{{""}, {"delegate"}, {"shell", ""}} {
		if _, err := New(Config{Limits: DefaultLimits(), Ask: bad}); err == nil {
			t.Errorf("Ask %q accepted", bad)
		}
	}
	if _, err := New(Config{Limits: DefaultLimits(), Ask: []string{"delegate"}, DelegateTool: "spawn"}); err != nil {
		t.Errorf("a tool named delegate beside another delegate tool refused: %v", err)
	}
}

// TestApprovalRequestAndApprove: the waiting call's request names the
// agent, call, tool, arguments and digest; a call that needs no approval
// runs meanwhile; the approval starts the call in its step, its tool
// deadline from then; the follow-up goes once both have results, the tool
// messages in the order the calls got them.
func TestApprovalRequestAndApprove(t *testing.T) {
	h := newHarness(t, asking("shell"))
	h.submit("go")
	sh, ls := h.call("shell", `{"command":"make"}`), h.call("list_dir", `{}`)
	h.ask(Root, sh, ls)
	r := requested(t, h.last, sh.ID)
	if r.Agent != Root || r.Name != "shell" || r.Text != sh.Arguments || r.Digest != Digest(sh.Arguments) || r.Delay != 5*time.Minute {
		t.Fatalf("request %+v", r)
	}
	if started(h.last, sh.ID) || !started(h.last, ls.ID) {
		t.Fatalf("want list_dir running and shell waiting:%s", describeEffects(h.last))
	}
	h.state(Root, fsm.Tooling)
	h.result(ls.ID, "a b")
	h.wait(time.Minute)
	out := h.do(Approve(0, Root, sh.ID, r.Digest))
	if l := resolved(out, sh.ID); l.Approval != ApprovalApproved || l.Since != 0 || l.Reason != ReasonNone {
		t.Fatalf("resolved %+v", l)
	}
	if !started(out, sh.ID) {
		t.Fatalf("the approval did not start the call:%s", describeEffects(out))
	}
	if d := timerOf(out, TimerTool); d.At != time.Minute+h.k.Config().ToolTimeout {
		t.Fatalf("tool deadline at %v, want from the call's start", d.At)
	}
	if count(out, EffStopTimer, -1) != 1 {
		t.Fatalf("the expiry timer was not stopped:%s", describeEffects(out))
	}
	h.result(sh.ID, "built")
	expectEffect(t, h.last, EffStartLLM)
	hist := h.k.Agent(Root).History()
	if hist[2].ToolCallID != ls.ID || hist[3].ToolCallID != sh.ID {
		t.Fatalf("results not in the order they came:\n%s", dumpHistory(hist))
	}
}

// TestApprovalApprovedWaitsForSlot: a call approved while every slot is
// taken waits for one, in call order with the calls already waiting.
func TestApprovalApprovedWaitsForSlot(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Ask = []string{"shell"}; c.MaxParallelTools = 1 })
	h.submit("go")
	a, sh, b := h.call("grep", `{}`), h.call("shell", `{}`), h.call("grep", `{"n":2}`)
	h.ask(Root, a, sh, b) // a runs; sh asks; b waits for the slot
	out := h.do(Approve(0, Root, sh.ID, Digest(sh.Arguments)))
	if started(out, sh.ID) || resolved(out, sh.ID).Approval != ApprovalApproved {
		t.Fatalf("an approval with no free slot:%s", describeEffects(out))
	}
	h.result(a.ID, "1")
	if !started(h.last, sh.ID) || started(h.last, b.ID) {
		t.Fatalf("the freed slot went to the wrong call:%s", describeEffects(h.last))
	}
	h.result(sh.ID, "ok")
	if !started(h.last, b.ID) {
		t.Fatalf("b never started:%s", describeEffects(h.last))
	}
	// Approved after a later call took the slot it freed: it waits, and
	// starts when that one ends.
	h = newHarness(t, func(c *Config) { c.Ask = []string{"shell"}; c.MaxParallelTools = 1 })
	h.submit("go")
	a, sh, b = h.call("grep", `{}`), h.call("shell", `{}`), h.call("grep", `{"n":2}`)
	h.ask(Root, a, sh, b)
	h.result(a.ID, "1") // b takes the slot; sh still waits for a person
	h.do(Approve(0, Root, sh.ID, Digest(sh.Arguments)))
	h.result(b.ID, "2")
	if !started(h.last, sh.ID) {
		t.Fatalf("the approved call did not take the freed slot:%s", describeEffects(h.last))
	}
}

// TestApprovalDenied: the call never runs; its typed result carries the
// note; the agent goes on; a denial needs no digest.
func TestApprovalDenied(t *testing.T) {
	h := newHarness(t, asking("*"))
	h.submit("go")
	c := h.call("write_file", `{"path":"prod"}`)
	h.ask(Root, c)
	out := h.do(Deny(0, Root, c.ID, `use "staging"`))
	if l := resolved(out, c.ID); l.Approval != ApprovalDenied || l.Reason != ReasonApprovalDenied || l.Text != `use "staging"` {
		t.Fatalf("resolved %+v", l)
	}
	fin := expectLife(t, out, LifeCallFinished)
	if fin.Status != CallDenied || fin.Reason != ReasonApprovalDenied || started(h.all, c.ID) {
		t.Fatalf("finished %+v", fin)
	}
	var got map[string]string
	content := toolContent(t, h.k.Agent(Root).History(), c.ID)
	if err := json.Unmarshal([]byte(content), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"type": "tool_not_approved", "status": "denied", "reason": "approval_denied", "note": `use "staging"`}
	if !mapsEqual(got, want) {
		t.Fatalf("result %s", content)
	}
	expectEffect(t, out, EffStartLLM)
	// Without a note there is no "note" field.
	h2 := newHarness(t, asking("*"))
	h2.submit("go")
	c2 := h2.call("x", `{}`)
	h2.ask(Root, c2)
	h2.do(Deny(0, Root, c2.ID, ""))
	if got := toolContent(t, h2.k.Agent(Root).History(), c2.ID); got != `{"type":"tool_not_approved","status":"denied","reason":"approval_denied"}` {
		t.Fatalf("result %s", got)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestApprovalExpires: the wait ends expired exactly at its asking +
// approval_timeout, never before; the call never runs; the turn goes on.
func TestApprovalExpires(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Ask = []string{"deploy"}; c.ApprovalTimeout = 30 * time.Second })
	h.submit("go")
	h.wait(time.Second)
	c := h.call("deploy", `{}`)
	h.ask(Root, c)
	mark := h.mark()
	h.wait(30*time.Second - time.Nanosecond)
	if n := len(lifes(h.since(mark), LifeApprovalResolved)); n != 0 {
		t.Fatal("expired early")
	}
	h.wait(time.Nanosecond)
	l := resolved(h.last, c.ID)
	if l.Approval != ApprovalExpired || l.Reason != ReasonApprovalTimeout || l.At != 31*time.Second || l.Since != time.Second {
		t.Fatalf("resolved %+v", l)
	}
	if got := toolContent(t, h.k.Agent(Root).History(), c.ID); got != `{"type":"tool_not_approved","status":"expired","reason":"approval_timeout"}` {
		t.Fatalf("result %s", got)
	}
	if started(h.all, c.ID) {
		t.Fatal("an expired call ran")
	}
	expectEffect(t, h.last, EffStartLLM)
	// An approval after the expiry is stale and starts nothing.
	out := h.do(Approve(0, Root, c.ID, Digest(c.Arguments)))
	if len(out) != 1 || out[0].Life.Kind != LifeStale || !strings.Contains(out[0].Life.Text, "expired") {
		t.Fatalf("a late approval:%s", describeEffects(out))
	}
}

// TestApprovalClampedByTurnDeadline: a wait gets an expiry timer only when
// its expiry comes strictly before its agent's turn deadline (a child's:
// its ancestor's); otherwise the turn deadline withdraws it.
func TestApprovalClampedByTurnDeadline(t *testing.T) {
	for _, c := range []struct {
		name          string
		timeout, turn time.Duration
		timer         bool
	}{
		{"expiry first", time.Minute, 2 * time.Minute, true},
		{"same instant", 2 * time.Minute, 2 * time.Minute, false},
		{"turn first", 5 * time.Minute, 2 * time.Minute, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(cfg *Config) {
				cfg.Ask, cfg.ApprovalTimeout, cfg.TurnTimeout = []string{"shell"}, c.timeout, c.turn
			})
			h.submit("go")
			sh := h.call("shell", `{}`)
			h.ask(Root, sh)
			if got := timerOf(h.last, TimerApproval).Op != 0; got != c.timer {
				t.Fatalf("expiry timer set: %v, want %v", got, c.timer)
			}
			if d := requested(t, h.last, sh.ID).Delay; d != min(c.timeout, c.turn) {
				t.Fatalf("request says it may wait %v", d)
			}
			h.wait(c.turn)
			l := resolved(h.all, sh.ID)
			switch {
			case c.timer && (l.Approval != ApprovalExpired || l.At != c.timeout):
				t.Fatalf("want expired at %v, got %+v", c.timeout, l)
			case !c.timer && (l.Approval != ApprovalWithdrawn || l.Reason != ReasonTurnTimeout || l.At != c.turn):
				t.Fatalf("want withdrawn by the turn deadline at %v, got %+v", c.turn, l)
			}
		})
	}
	// A child's wait is clamped by its parent's deadline, which it inherits;
	// the parent's deadline withdraws it with parent_cancelled.
	h := newHarness(t, func(c *Config) {
		c.Ask, c.TurnTimeout, c.FirstTokenTimeout = []string{"shell"}, 2*time.Minute, 5*time.Minute
	})
	h.submit("go")
	h.ask(Root, h.deleg("kid", "work"))
	h.wait(90 * time.Second)
	kid := h.id("kid")
	sh := h.call("shell", `{}`)
	h.ask(kid, sh)
	if timerOf(h.last, TimerApproval).Op != 0 || requested(t, h.last, sh.ID).Delay != 30*time.Second {
		t.Fatalf("the child's wait was not clamped by the parent's deadline:%s", describeEffects(h.last))
	}
	h.wait(30 * time.Second)
	if l := resolved(h.all, sh.ID); l.Approval != ApprovalWithdrawn || l.Reason != ReasonParentCancelled {
		t.Fatalf("resolved %+v", l)
	}
	h.outcome(Root, OutcomeTimedOut, ReasonTurnTimeout)
}

// TestApprovalWithdrawn: every abort of the turn withdraws the wait in its
// step — a cancel, a shutdown, an ancestor's cancel at depth 2 — and the
// call gets the abort's result marked withdrawn, never a denial's; a
// decision after that is stale; nothing ever starts the call.
func TestApprovalWithdrawn(t *testing.T) {
	for _, c := range []struct {
		name   string
		abort  func(h *harness) Event
		reason Reason
	}{
		{"cancel", func(h *harness) Event { return Cancel(0, h.id("c")) }, ReasonUserCancel},
		{"root cancel", func(h *harness) Event { return Cancel(0, Root) }, ReasonParentCancelled},
		{"middle cancel", func(h *harness) Event { return Cancel(0, h.id("b")) }, ReasonParentCancelled},
		{"shutdown", func(h *harness) Event { return Shutdown(0) }, ReasonParentCancelled},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, asking("shell"))
			h.submit("go")
			h.ask(Root, h.deleg("b", "b"))
			h.ask(h.id("b"), h.deleg("c", "c"))
			cid := h.id("c")
			sh := h.call("shell", `{}`)
			h.ask(cid, sh)
			if requested(t, h.last, sh.ID).Agent != cid || h.k.AgentPath(cid) != "main/b/c" {
				t.Fatal("the request does not name the agent at depth 2")
			}
			out := h.do(c.abort(h))
			l := resolved(out, sh.ID)
			if l.Approval != ApprovalWithdrawn || l.Reason != c.reason || count(out, EffStopTimer, cid) != 1 {
				t.Fatalf("resolved %+v in%s", l, describeEffects(out))
			}
			want := `{"type":"tool_aborted","status":"cancelled","reason":"` + c.reason.String() + `","approval":"withdrawn"}`
			if got := toolContent(t, h.k.Agent(cid).History(), sh.ID); got != want {
				t.Fatalf("result %s, want %s", got, want)
			}
			if fin := lifes(out, LifeCallFinished)[0]; fin.Status != CallCancelled || fin.Reason != c.reason {
				t.Fatalf("finished %+v", fin)
			}
			before := stateOf(h.k)
			late := h.do(Approve(0, cid, sh.ID, Digest(sh.Arguments)))
			if len(late) != 1 || late[0].Life.Kind != LifeStale || !bytes.Equal(before, stateOf(h.k)) {
				t.Fatalf("a decision after the withdrawal:%s", describeEffects(late))
			}
			h.wait(time.Hour)
			if started(h.all, sh.ID) || len(h.k.Approvals(nil)) != 0 {
				t.Fatal("a withdrawn call ran")
			}
			h.quiescent()
		})
	}
}

// TestApprovalFreedChild: a child that asked and finished is freed
// (docs/semantics.md, "Finished agents"); a decision naming it is stale,
// for a call it asked or any other (what it asked was freed with it), and
// one that names no call is still refused; the waits of the agents the
// tree holds are counted, asked again after a crash and approved by a
// grant with the freed slot among them.
func TestApprovalFreedChild(t *testing.T) {
	h := newHarness(t, asking("shell"))
	h.submit("go")
	rs := h.call("shell", `{"c":"root"}`)
	h.ask(Root, rs, h.deleg("kid", "work"))
	kid := h.id("kid")
	ks := h.call("shell", `{"c":"kid"}`)
	h.ask(kid, ks)
	h.do(Deny(0, kid, ks.ID, "no"))
	h.say(kid, "done without it")
	if h.k.Agent(kid).State() != fsm.Idle || len(h.k.Approvals(nil)) != 1 {
		t.Fatalf("the child did not finish with the root's call waiting: %v", h.k.Approvals(nil))
	}
	for _, callID := range []string{ks.ID, "call_never"} {
		before := stateOf(h.k)
		out := h.do(Approve(0, kid, callID, Digest(ks.Arguments)))
		if !h.k.Agent(kid).Freed() {
			t.Fatal("the finished child was not freed")
		}
		if len(out) != 1 || out[0].Life.Kind != LifeStale || out[0].Life.Agent != kid || out[0].Life.CallID != callID || h.k.Target(Approve(0, kid, callID, "")) != kid {
			t.Fatalf("a decision for %s of the freed child:%s", callID, describeEffects(out))
		}
		if !bytes.Equal(before, stateOf(h.k)) {
			t.Fatalf("a decision for %s of the freed child changed the state", callID)
		}
	}
	if w := h.k.Approvals(nil); len(w) != 1 || w[0].CallID != rs.ID {
		t.Fatalf("waiting with the child freed: %+v", w)
	}
	out := h.do(Approve(0, kid, "", Digest(ks.Arguments)))
	if errs := effectsOf(out, EffError); len(errs) != 1 || !errors.Is(errs[0].Err, ErrNotWaiting) {
		t.Fatalf("a decision naming no call of the freed child:%s", describeEffects(out))
	}
	out = h.recover()
	if got := expectLife(t, out, LifeRecovered).Text; got != "1 approval request(s) asked again" {
		t.Fatalf("recovered %q", got)
	}
	if r := lifes(out, LifeApprovalRequested); len(r) != 1 || r[0].CallID != rs.ID || r[0].Agent != Root {
		t.Fatalf("asked again:%s", describeEffects(out))
	}
	out = h.do(Decide(0, Root, rs.ID, Digest(rs.Arguments), VerdictApproveTool, ""))
	if !started(out, rs.ID) || len(lifes(out, LifeApprovalGranted)) != 1 {
		t.Fatalf("a grant with a freed child in the tree:%s", describeEffects(out))
	}
	h.result(rs.ID, "ok")
	h.say(Root, "done")
	h.quiescent()
}

// TestApprovalBinding: a decision acts only on the call it names, while it
// waits, for its arguments' digest; every other decision is refused (an
// error value, the state unchanged) or stale (a record, nothing else).
func TestApprovalBinding(t *testing.T) {
	h := newHarness(t, asking("shell"))
	h.submit("go")
	sh, rd := h.call("shell", `{"command":"ls"}`), h.call("read_file", `{}`)
	h.ask(Root, sh, rd, h.deleg("kid", "work"))
	kid := h.id("kid")
	h.ask(kid, ToolCall{ID: sh.ID, Name: "shell", Arguments: `{"command":"ls /"}`}) // the same id in another agent
	digest := Digest(sh.Arguments)
	for _, c := range []struct {
		name string
		ev   Event
		want error
	}{
		{"wrong digest", Approve(0, Root, sh.ID, "0000000000000000"), ErrDigestMismatch},
		{"no digest", Approve(0, Root, sh.ID, ""), ErrDigestMismatch},
		{"another agent's digest", Approve(0, kid, sh.ID, digest), ErrDigestMismatch},
		{"a denial for other arguments", Decide(0, Root, sh.ID, "ffffffffffffffff", VerdictDeny, "no"), ErrDigestMismatch},
		{"a call that never asked", Approve(0, Root, rd.ID, Digest(rd.Arguments)), ErrNotWaiting},
		{"no such call", Approve(0, Root, "nope", digest), ErrNotWaiting},
		{"no call", Approve(0, Root, "", digest), ErrNotWaiting},
		{"no such agent", Approve(0, 99, sh.ID, digest), ErrUnknownAgent},
		{"no verdict", Decide(0, Root, sh.ID, digest, VerdictNone, ""), nil},
		{"an unknown verdict", Decide(0, Root, sh.ID, digest, Verdict(99), ""), nil},
	} {
		before := stateOf(h.k)
		out := h.do(c.ev)
		errs := effectsOf(out, EffError)
		if len(errs) != 1 || (c.want != nil && !errors.Is(errs[0].Err, c.want)) || len(out) != 2 {
			t.Errorf("%s: want one refusal wrapping %v, got%s", c.name, c.want, describeEffects(out))
		}
		if !bytes.Equal(before, stateOf(h.k)) {
			t.Errorf("%s: a refused decision changed the state", c.name)
		}
	}
	if n := len(h.k.Approvals(nil)); n != 2 {
		t.Fatalf("%d calls wait, want both still waiting", n)
	}
	// The child's decision reaches only the child's call.
	out := h.do(Approve(0, kid, sh.ID, Digest(`{"command":"ls /"}`)))
	if starts := effectsOf(out, EffStartTool); len(starts) != 1 || starts[0].Agent != kid {
		t.Fatalf("the child's approval:%s", describeEffects(out))
	}
	if w := h.k.Approvals(nil); len(w) != 1 || w[0].Agent != Root || w[0].CallID != sh.ID {
		t.Fatalf("waiting: %+v", w)
	}
	// A denial without a digest denies whatever the call asks.
	out = h.do(Deny(0, Root, sh.ID, ""))
	if resolved(out, sh.ID).Approval != ApprovalDenied {
		t.Fatalf("a denial without digest:%s", describeEffects(out))
	}
	// Duplicates after the end are stale, whatever they say.
	for _, ev := range []Event{Approve(0, Root, sh.ID, digest), Deny(0, Root, sh.ID, "again"), Approve(0, Root, sh.ID, "bad")} {
		before := stateOf(h.k)
		out := h.do(ev)
		if len(out) != 1 || out[0].Life.Kind != LifeStale || out[0].Life.Agent != Root || !bytes.Equal(before, stateOf(h.k)) {
			t.Fatalf("%s after the wait ended:%s", ev.Describe(), describeEffects(out))
		}
	}
}

// TestApprovalGrants: approve_args grants the tool with these arguments,
// approve_tool with any; the grant approves, in its step, every waiting
// call it covers (any agent, agent order then call order), and a later
// call it covers does not ask.
func TestApprovalGrants(t *testing.T) {
	h := newHarness(t, asking("shell", "deploy"))
	h.submit("go")
	t1, t2, vet, dep := h.call("shell", `{"c":"test"}`), h.call("shell", `{"c":"test"}`), h.call("shell", `{"c":"vet"}`), h.call("deploy", `{"c":"test"}`)
	h.ask(Root, t1, t2, vet, dep, h.deleg("kid", "work"))
	kid := h.id("kid")
	kt := h.call("shell", `{"c":"test"}`)
	h.ask(kid, kt)
	out := h.do(Decide(0, Root, t1.ID, Digest(t1.Arguments), VerdictApproveArgs, ""))
	var order []string
	for _, l := range lifes(out, LifeApprovalResolved) {
		order = append(order, h.k.AgentPath(l.Agent)+":"+l.CallID)
	}
	if want := []string{"main:" + t1.ID, "main:" + t2.ID, "main/kid:" + kt.ID}; !slices.Equal(order, want) {
		t.Fatalf("an args grant approved %v, want %v", order, want)
	}
	g := expectLife(t, out, LifeApprovalGranted)
	if g.Name != "shell" || g.Text != t1.Arguments || g.Digest != Digest(t1.Arguments) {
		t.Fatalf("granted %+v", g)
	}
	out = h.do(Decide(0, Root, vet.ID, Digest(vet.Arguments), VerdictApproveTool, ""))
	if g := expectLife(t, out, LifeApprovalGranted); g.Name != "shell" || g.Text != "" || g.Digest != "" {
		t.Fatalf("granted %+v", g)
	}
	if w := h.k.Approvals(nil); len(w) != 1 || w[0].CallID != dep.ID {
		t.Fatalf("a shell grant touched another tool's wait: %+v", w)
	}
	// Later calls of the granted tool do not ask, in any agent; another
	// tool still does.
	h.result(kt.ID, "ok")
	h.ask(kid, h.call("shell", `{"c":"anything"}`), h.call("deploy", `{"c":"x"}`))
	if n := len(lifes(h.last, LifeApprovalRequested)); n != 1 || count(h.last, EffStartTool, kid) != 1 {
		t.Fatalf("after the grant:%s", describeEffects(h.last))
	}
}

// TestApprovalAroundTheWait: while a call waits its agent is Tooling: an
// interjection is queued for the next request, a submission refused; a
// waiting call holds a max_calls slot but no max_parallel_tools slot.
func TestApprovalAroundTheWait(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Ask = []string{"shell"}; c.MaxCalls = 2; c.MaxParallelTools = 1 })
	h.submit("go")
	sh, a, b := h.call("shell", `{}`), h.call("grep", `{}`), h.call("grep", `{"n":2}`)
	h.ask(Root, sh, a, b)
	if !started(h.last, a.ID) {
		t.Fatal("a call that needs no approval waited for one that does (it holds no slot)")
	}
	fins := lifes(h.last, LifeCallFinished)
	if len(fins) != 1 || fins[0].CallID != b.ID || fins[0].Reason != ReasonMaxCalls {
		t.Fatalf("the waiting call does not hold a max_calls slot:%s", describeEffects(h.last))
	}
	out := h.do(Interject(0, "also this"))
	if l := expectLife(t, out, LifeInterjected); !l.Queued {
		t.Fatal("interjection not queued")
	}
	out = h.do(Submit(0, "another"))
	var undeclared *fsm.UndeclaredError
	if errs := effectsOf(out, EffError); len(errs) != 1 || !errors.As(errs[0].Err, &undeclared) || undeclared.State != fsm.Tooling {
		t.Fatalf("submission while waiting:%s", describeEffects(out))
	}
	h.result(a.ID, "1")
	h.do(Deny(0, Root, sh.ID, "no"))
	msgs := effectsOf(h.last, EffStartLLM)[0].Messages
	if m := msgs[len(msgs)-1]; m.Content != "also this" || !m.Interjection {
		t.Fatalf("the interjection is not last in the follow-up: %+v", m)
	}
}

// TestApprovalRecover: after a crash a waiting call is asked again — never
// decided by the restart — with its expiry at its old deadline; an
// approved call waiting for a slot starts once the lost op frees it; a
// denied call never runs; a grant is kept. A kernel rebuilt from the
// events answers every one as the crashed kernel did and holds its state.
func TestApprovalRecover(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.Ask = []string{"shell", "deploy"}
		c.MaxParallelTools = 1
		c.ApprovalTimeout = time.Minute
	})
	h.submit("go")
	bk, mig, dep, drop := h.call("backup", `{}`), h.call("shell", `{"c":"migrate"}`), h.call("deploy", `{}`), h.call("shell", `{"c":"drop"}`)
	h.ask(Root, bk, mig, dep, drop)
	// The expiry timers, in the order the calls asked: mig's, dep's, drop's.
	expiries := slices.DeleteFunc(effectsOf(h.last, EffSetTimer), func(e Effect) bool { return e.Timer != TimerApproval })
	depExpiry := expiries[1]
	h.wait(10 * time.Second)
	h.do(Decide(0, Root, mig.ID, Digest(mig.Arguments), VerdictApprove, ""))
	h.do(Deny(0, Root, drop.ID, "never"))
	h.wait(10 * time.Second)

	// Rebuild from the events, as a host does from its log.
	k := MustNew(h.k.Config())
	var replayed []Effect
	for _, ev := range h.events {
		replayed = append(replayed, slices.Clone(k.Step(ev))...)
	}
	for i := range replayed {
		if replayed[i].Describe() != h.all[i].Describe() {
			t.Fatalf("replayed effect %d: %s, logged %s", i, replayed[i].Describe(), h.all[i].Describe())
		}
	}
	if !bytes.Equal(stateOf(k), stateOf(h.k)) {
		t.Fatal("the rebuilt kernel holds another state")
	}
	out := h.recover()
	if got := expectLife(t, out, LifeRecovered).Text; got != "1 tool call(s) lost, 1 approval request(s) asked again" {
		t.Fatalf("recovered %q", got)
	}
	r := requested(t, out, dep.ID)
	if r.Digest != Digest(dep.Arguments) || r.Delay != depExpiry.At-h.now {
		t.Fatalf("asked again: %+v", r)
	}
	if n := len(lifes(out, LifeApprovalRequested)); n != 1 || len(lifes(out, LifeApprovalResolved)) != 0 {
		t.Fatalf("the restart decided or re-asked what it must not:%s", describeEffects(out))
	}
	if !slices.ContainsFunc(out, func(e Effect) bool { return e.Kind == EffSetTimer && e.Op == depExpiry.Op && e.At == depExpiry.At }) {
		t.Fatalf("expiry not armed again at %v:%s", depExpiry.At, describeEffects(out))
	}
	if starts := effectsOf(out, EffStartTool); len(starts) != 1 || starts[0].Call.ID != mig.ID {
		t.Fatalf("want the approved call started once:%s", describeEffects(out))
	}
	h.result(mig.ID, "migrated")
	h.wait(time.Hour)
	n := 0
	for _, e := range effectsOf(h.all, EffStartTool) {
		switch e.Call.ID {
		case mig.ID:
			n++
		case drop.ID, dep.ID:
			t.Fatalf("%s ran", e.Call.ID)
		}
	}
	if n != 1 {
		t.Fatalf("the approved call started %d times", n)
	}
	if l := resolved(h.all, dep.ID); l.Approval != ApprovalExpired || l.At != depExpiry.At {
		t.Fatalf("after the recovery the wait ended %+v, want expired at %v", l, depExpiry.At)
	}
}

// TestApprovalGrantSurvivesRecovery: a grant is state the events rebuild.
func TestApprovalGrantSurvivesRecovery(t *testing.T) {
	h := newHarness(t, asking("shell"))
	h.submit("go")
	c := h.call("shell", `{}`)
	h.ask(Root, c)
	h.do(Decide(0, Root, c.ID, Digest(c.Arguments), VerdictApproveTool, ""))
	h.result(c.ID, "ok")
	k := MustNew(h.k.Config())
	for _, ev := range h.events {
		k.Step(ev)
	}
	if !bytes.Equal(stateOf(k), stateOf(h.k)) {
		t.Fatal("the rebuilt kernel lost the grant")
	}
	h.recover()
	h.ask(Root, h.call("shell", `{"x":1}`))
	if len(lifes(h.last, LifeApprovalRequested)) != 0 {
		t.Fatal("a granted tool asked again after the recovery")
	}
}

// TestApprovalStateEncoding: a wait, its end and a grant are state: each
// changes the encoding, and equal waits reached in other orders encode
// alike.
func TestApprovalStateEncoding(t *testing.T) {
	run := func(ask []string, decide func(h *harness, c ToolCall)) []byte {
		h := newHarness(t, asking(ask...))
		h.submit("go")
		c := ToolCall{ID: "c1", Name: "shell", Arguments: `{}`}
		h.ask(Root, c, ToolCall{ID: "c2", Name: "grep", Arguments: `{}`})
		if decide != nil {
			decide(h, c)
		}
		return stateOf(h.k)
	}
	plain := run(nil, nil)
	waiting := run([]string{"shell"}, nil)
	if bytes.Equal(plain, waiting) {
		t.Fatal("a wait is not in the state")
	}
	denied := run([]string{"shell"}, func(h *harness, c ToolCall) { h.do(Deny(0, Root, c.ID, "")) })
	expired := run([]string{"shell"}, func(h *harness, c ToolCall) { h.wait(5 * time.Minute) })
	if bytes.Equal(denied, expired) {
		t.Fatal("how a wait ended is not in the state")
	}
	once := run([]string{"shell"}, func(h *harness, c ToolCall) { h.do(Approve(0, Root, c.ID, Digest(c.Arguments))) })
	granted := run([]string{"shell"}, func(h *harness, c ToolCall) {
		h.do(Decide(0, Root, c.ID, Digest(c.Arguments), VerdictApproveTool, ""))
	})
	if bytes.Equal(once, granted) {
		t.Fatal("a grant is not in the state")
	}
	// How a wait ended is encoded on its own (a stale decision's record
	// says it), not only through the history it left.
	h := newHarness(t, asking("shell"))
	h.submit("go")
	h.ask(Root, ToolCall{ID: "c1", Name: "shell", Arguments: `{}`})
	h.do(Deny(0, Root, "c1", ""))
	before := stateOf(h.k)
	h.k.agents[Root].approval.ended[0].end = ApprovalExpired
	if bytes.Equal(before, stateOf(h.k)) {
		t.Fatal("the end of a wait is not in the encoding")
	}
	// Two grants made in either order are one state.
	order := func(first, second string) []byte {
		h := newHarness(t, asking("a", "b"))
		h.submit("go")
		h.ask(Root, ToolCall{ID: "x", Name: first, Arguments: `{}`}, ToolCall{ID: "y", Name: second, Arguments: `{}`})
		h.do(Decide(0, Root, "y", Digest(`{}`), VerdictApproveTool, ""))
		h.do(Decide(0, Root, "x", Digest(`{}`), VerdictApproveTool, ""))
		return stateOf(h.k)
	}
	if !bytes.Equal(order("a", "b"), order("a", "b")) {
		t.Fatal("one run encodes two ways")
	}
}

// TestApprovalDescribe: decisions and approval records print on one line
// with what identifies them.
func TestApprovalDescribe(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Decide(time.Second, 2, "c1", "abcd", VerdictApproveArgs, "").Describe(), "@1s decision agent=2 call=c1 approve_args digest=abcd"},
		{Deny(0, 0, "c1", "use \"b\"").Describe(), `@0s decision agent=0 call=c1 deny note="use \"b\""`},
		{Lifecycle{Seq: 3, Kind: LifeApprovalRequested, CallID: "c1", Name: "shell", Text: `{"c":1}`, Digest: "ab", Delay: time.Minute}.Describe(),
			"#3 @0s approval_requested agent=0 call=c1 shell args=`{\"c\":1}` digest=ab within=1m0s"},
		{Lifecycle{Seq: 4, Kind: LifeApprovalResolved, CallID: "c1", Name: "shell", Approval: ApprovalDenied, Reason: ReasonApprovalDenied, Text: "no", Since: time.Second}.Describe(),
			`#4 @0s approval_resolved agent=0 call=c1 shell denied reason=approval_denied note="no" since=1s`},
		{Lifecycle{Seq: 5, Kind: LifeApprovalGranted, CallID: "c1", Name: "shell"}.Describe(), "#5 @0s approval_granted agent=0 call=c1 shell any args for the session"},
	} {
		if c.got != c.want {
			t.Errorf("got  %s\nwant %s", c.got, c.want)
		}
	}
	for _, name := range []string{"approve", "approve_args", "approve_tool", "deny"} {
		var v Verdict
		if err := v.UnmarshalText([]byte(name)); err != nil || v.String() != name {
			t.Errorf("verdict %s: %v %v", name, v, err)
		}
	}
	for _, name := range []string{"approved", "denied", "expired", "withdrawn"} {
		var e ApprovalEnd
		if err := e.UnmarshalText([]byte(name)); err != nil || e.String() != name {
			t.Errorf("approval end %s: %v %v", name, e, err)
		}
	}
}

// TestApprovalGrantsSeeded: Config.Grants — what a resumed session
// carries over — covers calls as the decisions that made them did: a
// tool grant any call of the tool, an exact grant only its arguments;
// Grants lists them as GrantOf reads them from the records that made
// them, so a session that records those and seeds the next kernel with
// them ends where it began. Bad grants are refused.
func TestApprovalGrantsSeeded(t *testing.T) {
	// The grants a session made, read back from their records.
	h := newHarness(t, asking("shell", "deploy"))
	h.submit("go")
	sh, dep := h.call("shell", `{"c":"x"}`), h.call("deploy", `{"env":"staging"}`)
	h.ask(Root, sh, dep)
	h.do(Decide(0, Root, sh.ID, Digest(sh.Arguments), VerdictApproveTool, ""))
	h.do(Decide(0, Root, dep.ID, Digest(dep.Arguments), VerdictApproveArgs, ""))
	var made []Grant
	for _, l := range lifes(h.all, LifeApprovalGranted) {
		made = append(made, GrantOf(l))
	}
	want := []Grant{{Tool: "shell"}, {Tool: "deploy", Args: `{"env":"staging"}`, Exact: true}}
	if !slices.Equal(made, want) {
		t.Fatalf("GrantOf the records: %+v, want %+v", made, want)
	}
	listed := h.k.Grants(nil)
	if !slices.Equal(listed, []Grant{{Tool: "shell"}, {Tool: "deploy", Args: `{"env":"staging"}`, Exact: true}}) {
		t.Fatalf("Grants: %+v", listed)
	}

	// A new kernel seeded with them asks none of the calls they cover.
	next := newHarness(t, func(c *Config) { c.Ask = []string{"shell", "deploy"}; c.Grants = made })
	if got := next.k.Grants(nil); !slices.Equal(got, listed) {
		t.Fatalf("seeded Grants: %+v, want %+v", got, listed)
	}
	next.submit("again")
	other := next.call("deploy", `{"env":"prod"}`)
	next.ask(Root, next.call("shell", `{"c":"anything"}`), next.call("deploy", `{"env":"staging"}`), other)
	reqs := lifes(next.last, LifeApprovalRequested)
	if len(reqs) != 1 || reqs[0].CallID != other.ID || count(next.last, EffStartTool, Root) != 2 {
		t.Fatalf("seeded grants: want only %s to ask:%s", other.ID, describeEffects(next.last))
	}
	// Without the seed, all three ask (the test can fail).
	bare := newHarness(t, asking("shell", "deploy"))
	bare.submit("again")
	bare.ask(Root, bare.call("shell", `{"c":"anything"}`), bare.call("deploy", `{"env":"staging"}`), bare.call("deploy", `{"env":"prod"}`))
	if n := len(lifes(bare.last, LifeApprovalRequested)); n != 3 {
		t.Fatalf("without grants %d calls asked, want 3", n)
	}

	for _, bad := range [][]Grant{{{Tool: ""}}, {{Tool: "delegate"}}, {{Tool: "shell", Args: "{}"}}} {
		if _, err := New(Config{Limits: DefaultLimits(), Grants: bad}); err == nil {
			t.Errorf("Grants %+v accepted", bad)
		}
	}
}
