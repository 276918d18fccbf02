package oracle

import (
	"slices"
	"testing"

	"github.com/escapement/escapement/kernel"
)

// TestOpTable: ops below and above the dense bound are found, missing ones
// are nil, and ids come back in increasing order across both parts.
func TestOpTable(t *testing.T) {
	var tab opTable
	ids := []kernel.OpID{denseOps + 7, 3, 1, denseOps, 1 << 62, denseOps - 1}
	for i, id := range ids {
		tab.set(id, &opObs{agent: kernel.AgentID(i)})
	}
	for i, id := range ids {
		if op := tab.get(id); op == nil || op.agent != kernel.AgentID(i) {
			t.Fatalf("get(%d) = %+v", id, op)
		}
	}
	for _, id := range []kernel.OpID{0, 2, 4, denseOps + 1, 1<<62 + 1} {
		if op := tab.get(id); op != nil {
			t.Fatalf("get(%d) = %+v, want nil", id, op)
		}
	}
	want := []kernel.OpID{1, 3, denseOps - 1, denseOps, denseOps + 7, 1 << 62}
	if got := tab.ids(); !slices.Equal(got, want) {
		t.Fatalf("ids() = %v, want %v", got, want)
	}
}
