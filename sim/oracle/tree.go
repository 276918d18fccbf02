package oracle

import (
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/scenario"
)

// Tree is what the simulator publishes to the oracle of the agent loop
// under test, beside each step's event and effects: every agent's View,
// its state, the lifecycle log as a late subscriber reads it, name
// lookups and the loop's own report of quiescence. The oracle judges from
// these and from nothing else of the loop (docs/semantics.md,
// "The oracle"): this package imports none of the kernel's machinery
// (TestOracleSeesOnlyWhatIsPublished), so a broken agent loop cannot hide
// from it.
type Tree interface {
	NumAgents() int
	View(kernel.AgentID) View
	AgentState(kernel.AgentID) fsm.State
	// LogRange replays the lifecycle log from seq, as a late subscriber
	// would read it (F10).
	LogRange(seq uint64, fn func(kernel.Lifecycle) bool) error
	// LogOldest is the oldest sequence number the log still holds.
	LogOldest() uint64
	// Find resolves a path or instance name (kernel.Kernel.Find).
	Find(name string) (kernel.AgentID, bool)
	// Quiescent is the loop's own report that nothing runs.
	Quiescent() bool
}

// View is what the oracle may see of an agent.
type View struct {
	Path    string
	Name    string
	Script  string
	Parent  kernel.AgentID
	State   fsm.State
	Turn    uint64
	Outcome kernel.Outcome
	History []kernel.Message
	// What a driver reads of the agent beside: how its last turn ended,
	// the children it spawned, the current turn's requests, deadline and
	// abort, and what it still waits for.
	Reason       kernel.Reason
	Summary      string
	Children     []kernel.AgentID
	Requests     int
	Deadline     time.Duration
	InFlight     int
	LiveChildren int
	Abort        kernel.Reason
	// Freed: the core has freed the agent (a child that finished before
	// this step); every other field is then empty (docs/semantics.md,
	// "Finished agents").
	Freed bool
}

// Matches reports whether the agent is the one a scenario's reference
// names (scenario.RefMatches: its path, its instance name, or — for its
// script's first instance — its script's name).
func (v View) Matches(ref string) bool { return scenario.RefMatches(ref, v.Path, v.Name, v.Script) }

// ReplayWindow is how many lifecycle records the oracle keeps to compare
// with what a late subscriber replays: a simulated log must not hold more
// (the engine checks its log capacity against it).
const ReplayWindow = emittedRing
