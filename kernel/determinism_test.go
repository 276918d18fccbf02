package kernel

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// busyScenario exercises parallel tool calls, parallel children, an
// interjection, a single-child cancel, a tool timeout, a stall timeout and a
// root cancel with a stubborn tool.
func busyScenario(h *harness) {
	h.submit("big job")
	g, l := h.call("grep", `{"pattern":"x"}`), h.call("ls", `{}`)
	h.ask(Root, g, l, h.deleg("x", "explore x"), h.deleg("y", "explore y"), h.deleg("z", "explore z"))
	x, y, z := h.id("x"), h.id("y"), h.id("z")
	h.wait(100 * time.Millisecond)
	h.text(x, "x thinks")
	h.text(y, "y thinks")
	h.text(z, "z partial")
	h.result(l.ID, "a b c")
	h.ask(y, h.call("cat", `{"path":"y"}`), h.call("hang", `{}`), h.deleg("w", "deeper"))
	w := h.id("w")
	h.do(Interject(0, "also look at z"))
	h.wait(time.Second)
	h.do(Cancel(0, x))
	h.text(w, "w")
	h.wait(h.k.Config().StallTimeout) // w stalls; x's cancel is abandoned after grace
	h.result(g.ID, "3 matches")
	h.do(ToolResult(0, h.tool(lastCallIDOf(h, y, 0)), ToolOK, "y content"))
	h.wait(h.k.Config().ToolTimeout) // y's "hang" times out
	h.do(Cancel(0, Root))
	h.wait(h.k.Config().Grace)
	h.submit("again")
	h.say(Root, "fine")
}

func lastCallIDOf(h *harness, a AgentID, i int) string {
	hist := h.k.Agent(a).History()
	for j := len(hist) - 1; j >= 0; j-- {
		if len(hist[j].ToolCalls) > 0 {
			return hist[j].ToolCalls[i].ID
		}
	}
	h.t.Fatalf("no calls")
	return ""
}

// TestDeterminism (I6): the same event sequence fed twice yields deep-equal
// effect sequences, and replaying the recorded events into a fresh kernel
// reproduces them too.
func TestDeterminism(t *testing.T) {
	h1 := newHarness(t, nil)
	busyScenario(h1)
	h2 := newHarness(t, nil)
	busyScenario(h2)
	if !reflect.DeepEqual(h1.all, h2.all) {
		t.Fatal("two runs of the same scenario produced different effects")
	}
	if len(h1.all) < 100 {
		t.Fatalf("scenario too small to mean anything: %d effects", len(h1.all))
	}
	k := MustNew(Config{Limits: DefaultLimits()})
	var replay []Effect
	for _, ev := range h1.events {
		replay = append(replay, slices.Clone(k.Step(ev))...)
	}
	if !reflect.DeepEqual(replay, h1.all) {
		for i := range replay {
			if i >= len(h1.all) || !reflect.DeepEqual(replay[i], h1.all[i]) {
				t.Fatalf("replay diverges at effect %d: %s", i, replay[i].Describe())
			}
		}
		t.Fatal("replay shorter")
	}
	if !k.Quiescent() {
		t.Fatal("busy scenario did not end quiescent")
	}
	kinds := map[EffectKind]int{}
	for _, e := range replay {
		kinds[e.Kind]++
	}
	for _, kind := range []EffectKind{EffStartLLM, EffCancelLLM, EffStartTool, EffCancelTool, EffSetTimer, EffStopTimer, EffEmit} {
		if kinds[kind] == 0 {
			t.Errorf("scenario never produced %s", kind)
		}
	}
}
