package kernel

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/escapement/escapement/fsm"
)

// retained measures what a tree holds, deterministically: the agents it
// keeps (a freed child's slot is empty) and the bytes of their histories
// and stream buffers, the root's apart.
func retained(k *Kernel) (agents, rootBytes, childBytes int) {
	for _, a := range k.agents {
		if a == nil {
			continue
		}
		agents++
		n := cap(a.text)
		for _, m := range a.history {
			n += len(m.Content)
			for _, c := range m.ToolCalls {
				n += len(c.ID) + len(c.Name) + len(c.Arguments)
			}
		}
		if a.id == Root {
			rootBytes += n
		} else {
			childBytes += n
		}
	}
	return agents, rootBytes, childBytes
}

// TestFinishedChildrenAreFreed: a chat whose every turn delegates to a
// child that answers 4 KiB holds, after each turn, the root alone — every
// child is freed once its result reached the root and its ops ended
// (docs/semantics.md, "Finished agents") — so what the tree holds grows
// only with the root's own history, not by the children's 300 histories.
// A freed child's view says Freed and nothing else, Find no longer finds
// it, and a cancel naming it is a recorded no-op.
func TestFinishedChildrenAreFreed(t *testing.T) {
	h := newHarness(t, nil)
	answer := strings.Repeat("x", 4096)
	for turn := 1; turn <= 300; turn++ {
		h.check = turn <= 3 // each step's checks read every agent: a few turns suffice
		h.submit(fmt.Sprintf("turn %d", turn))
		h.ask(Root, h.deleg("helper", "do part "+fmt.Sprint(turn)))
		child := AgentID(h.k.NumAgents() - 1)
		for range 4 {
			h.text(child, answer[:1024])
		}
		h.end(child)
		h.say(Root, "done")
		h.outcome(Root, OutcomeCompleted, ReasonNone)
		agents, rootBytes, childBytes := retained(h.k)
		if agents != 1 || childBytes != 0 {
			t.Fatalf("after turn %d the tree holds %d agents, %d bytes of children (the root's: %d); want the root alone", turn, agents, childBytes, rootBytes)
		}
	}
	if n, held := h.k.NumAgents(), h.k.HeldAgents(); n != 301 || held != 1 {
		t.Fatalf("NumAgents %d, HeldAgents %d; want 301 ever, 1 held", n, held)
	}
	v := h.k.Agent(1)
	if !v.Freed() || v.Path() != "" || len(v.History()) != 0 || v.State() != fsm.Idle || v.Parent() != NoAgent {
		t.Fatalf("a freed child's view: freed=%v path=%q history=%d state=%s parent=%d", v.Freed(), v.Path(), len(v.History()), v.State(), v.Parent())
	}
	if got := h.k.Agent(Root).Children(); len(got) != 300 || got[0] != 1 {
		t.Fatalf("the root lists %d children, want every one it spawned", len(got))
	}
	if _, ok := h.k.Find("helper"); ok {
		t.Fatal("Find found a freed child")
	}
	mark := h.mark()
	h.do(Cancel(0, 1))
	if got := h.since(mark); len(got) != 1 || got[0].Life.Kind != LifeIgnored || got[0].Life.Agent != 1 {
		t.Fatalf("a cancel of a freed child caused %v, want one ignored record", got)
	}
}

// TestChildFreedOnlyOnceItsOpsEnded: a child whose turn ends while a tool
// it timed out is still in its grace is held until that tool ends; it is
// freed at the start of the step after.
func TestChildFreedOnlyOnceItsOpsEnded(t *testing.T) {
	h := newHarness(t, nil)
	cfg := h.k.Config()
	h.submit("go")
	h.ask(Root, h.deleg("helper", "slow work"))
	child := AgentID(1)
	c := h.call("build", `{}`)
	h.ask(child, c)
	h.wait(cfg.ToolTimeout) // the call times out; the tool gets its grace
	h.say(child, "gave up")
	h.outcome(child, OutcomeCompleted, ReasonNone)
	h.say(Root, "ok")
	if h.k.Agent(child).Freed() || h.k.HeldAgents() != 2 {
		t.Fatalf("the child was freed with a tool still in its grace (held %d)", h.k.HeldAgents())
	}
	h.do(ToolResult(0, h.tool(c.ID), ToolCancelled, "")) // its cancel acknowledged
	if h.k.Agent(child).Freed() {
		t.Fatal("the child was freed in the step its last op ended, before anyone could read it")
	}
	h.submit("next")
	if !h.k.Agent(child).Freed() || h.k.HeldAgents() != 1 {
		t.Fatalf("the child was not freed at the start of the next step (held %d)", h.k.HeldAgents())
	}
}

// TestChildNamesAreClipped: a delegation's name is clipped to MaxNameBytes
// (at a rune boundary), so the count per distinct name the tree keeps for
// its life stays small whatever names a model makes up.
func TestChildNamesAreClipped(t *testing.T) {
	h := newHarness(t, nil)
	h.submit("go")
	h.ask(Root, h.deleg(strings.Repeat("é", 100), "task"))
	if name := h.k.Agent(1).Name(); name != strings.Repeat("é", MaxNameBytes/2) {
		t.Fatalf("child named %q (%d bytes), want %d bytes of the name", name, len(name), MaxNameBytes)
	}
}

// TestLogTextIsBounded: the lifecycle log keeps at most LogTextBytes of
// text however long the answers it recorded (each turn's end repeats its
// answer), dropping its oldest events; what it holds replays intact.
func TestLogTextIsBounded(t *testing.T) {
	h := newHarness(t, nil)
	h.check = false
	chunk := strings.Repeat("y", 64<<10)
	for turn := range 40 {
		h.submit(fmt.Sprint("turn ", turn))
		for range 8 {
			h.text(Root, chunk)
		}
		h.end(Root)
	}
	log := h.k.Log()
	text, n := 0, 0
	err := log.Range(log.Oldest(), func(l Lifecycle) bool {
		if l.Seq != log.Oldest()+uint64(n) {
			t.Fatalf("event %d of the log has seq %d", n, l.Seq)
		}
		text += textBytes(&l)
		n++
		return true
	})
	if err != nil || log.Oldest()+uint64(n) != log.Next() {
		t.Fatalf("the log replays %d events from %d to %d: %v", n, log.Oldest(), log.Next(), err)
	}
	if text > LogTextBytes || log.Oldest() == 1 {
		t.Fatalf("the log holds %d bytes of text from seq %d; want at most %d, the oldest dropped", text, log.Oldest(), LogTextBytes)
	}
}

// TestLogTextCountsEveryString: every string a lifecycle record carries
// counts against LogTextBytes, so a field added later (an approval's
// digest) cannot grow the log past its bound unseen.
func TestLogTextCountsEveryString(t *testing.T) {
	var l Lifecycle
	v, want := reflect.ValueOf(&l).Elem(), 0
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			want += i + 1
			f.SetString(strings.Repeat("x", i+1))
		}
	}
	if got := textBytes(&l); got != want {
		t.Fatalf("textBytes counts %d bytes of a record's strings, want %d", got, want)
	}
}
