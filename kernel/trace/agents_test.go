package trace

import (
	"bytes"
	"strings"
	"testing"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// paths is a Tree whose agents a test frees by hand.
type paths map[kernel.AgentID]string

func (p paths) AgentPath(id kernel.AgentID) string  { return p[id] }
func (p paths) AgentState(kernel.AgentID) fsm.State { return fsm.Idle }
func (p paths) step(w *Writer, id kernel.AgentID)   { w.Step(p, kernel.Cancel(0, id), id, fsm.Idle, nil) }

// TestAgentTextFollowsTheTree: a step line names its agent by what the
// tree says now, not by what the writer cached — an agent the tree has
// freed is named by no path, even right after a line that named it (so a
// writer continuing a log after a recovery writes what a replay from the
// start writes) — and the writer keeps at most agentCache agents' texts
// however many agents the tree ever held
// (docs/semantics.md, "Finished agents").
func TestAgentTextFollowsTheTree(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, Header{Source: "live", Name: "t"})
	tree := paths{}
	for id := kernel.AgentID(0); id < 1000; id++ {
		tree[id] = "main/c" + strings.Repeat("x", int(id%7))
		tree.step(w, id)
	}
	if len(w.agents) > agentCache {
		t.Fatalf("the writer keeps %d agents' texts, want at most %d", len(w.agents), agentCache)
	}
	tree.step(w, 999)
	delete(tree, 999)
	tree.step(w, 999)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	named, freed := lines[len(lines)-2], lines[len(lines)-1]
	if !strings.Contains(named, `"agent":"main/c`) || strings.Contains(freed, `"agent":"`) {
		t.Fatalf("a freed agent is still named by its path:\n%s\n%s", named, freed)
	}
}
