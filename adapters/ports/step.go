package ports

import (
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// Step is what a driver hands its observer and its write-ahead hook (adapters/live, Config.Observer and Config.WriteAhead) of one kernel Step: the event as fed (At
// stamped), the agent it targeted and that agent's state before, and the
// effects. Kernel and Effects are valid only during the call: the effects
// slice is reused by the next Step, and the kernel must only be read (the
// observer runs on its owning goroutine, so reading is race-free).
type Step struct {
	Kernel  *kernel.Kernel
	Event   kernel.Event
	Target  kernel.AgentID
	Before  fsm.State
	Effects []kernel.Effect
}
