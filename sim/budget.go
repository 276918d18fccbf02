package sim

import (
	"errors"
	"fmt"

	"github.com/escapement/escapement/kernel"
)

// A scenario of a few hundred bytes can ask for a tree that never fits in
// memory: sixteen delegations a reply, eight deep, is 16^8 agents, and the
// limits it may set reach millions of agents. A run therefore has a memory
// budget, counted deterministically as it goes — every agent spawned, every
// request and tool call started, every byte streamed, each at about what
// the simulator keeps of it (the kernel's tree, the world, the oracle's
// record, which keeps every agent and op of the run) — and a run that
// passes it stops with ErrBudget: the input is too big, not a check that
// failed (the CLI exits 2 naming it). Counted, not measured: a run's verdict
// never depends on the machine it ran on.

// ErrBudget is what a run that passed its memory budget returns (wrapped,
// with the counts).
var ErrBudget = errors.New("the run passed the simulator's memory budget")

// DefaultMemoryBudget is a run's memory budget unless Options.MemoryBudget
// says otherwise: far above any scenario of the suite or generated world
// (a few MB), and reached by a runaway fan-out within seconds — the
// oracle's work per step grows with the agents it watches — not minutes.
const DefaultMemoryBudget = 128 << 20

// What the budget counts for each thing a run holds, in bytes: about what
// a run keeps of each (the heap after a runaway fan-out of 24,000 agents
// was 178 MiB, and after 16 MB streamed to 256 leaves 52 MiB).
const (
	costAgent    = 6 << 10
	costOp       = 3 << 9
	costStreamed = 4 // the history, the oracle's copy, the delegation result
)

// budget counts what a run holds.
type budget struct {
	limit    int64
	agents   int
	ops      int
	streamed int64
}

// step counts one delivered event and the effects it caused; agents is how
// many agents the tree has held in all.
func (b *budget) step(ev *kernel.Event, effs []kernel.Effect, agents int) {
	b.agents = agents
	b.streamed += int64(len(ev.Text))
	if c := ev.Call; c != nil {
		b.streamed += int64(len(c.ID) + len(c.Name) + len(c.Args))
	}
	for i := range effs {
		if k := effs[i].Kind; k == kernel.EffStartLLM || k == kernel.EffStartTool {
			b.ops++
		}
	}
}

func (b *budget) cost() int64 {
	return int64(b.agents)*costAgent + int64(b.ops)*costOp + b.streamed*costStreamed
}

func (b *budget) spent() bool { return b.cost() > b.limit }

// err says what the run held when it stopped.
func (b *budget) err(name string, events int) error {
	return fmt.Errorf("scenario %s: %w (%d MiB by its count: %d agents, %d requests and tool calls, %d bytes streamed, in %d events); its limits and scripts let the tree grow that far: lower max_agents, max_children or max_depth, or shorten its scripts",
		name, ErrBudget, b.limit>>20, b.agents, b.ops, b.streamed, events)
}
