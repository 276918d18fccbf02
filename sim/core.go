package sim

import (
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/oracle"
)

// Core is what the simulator drives: the kernel, or — in tests only — a
// deliberately broken agent loop wrapped around it, so the suite can prove
// the oracle catches each failure of the catalogue (docs/semantics.md).
type Core interface {
	// Tree is what the oracle reads of the core: its agents' views, the
	// lifecycle log, name lookups, quiescence.
	oracle.Tree
	Step(kernel.Event) []kernel.Effect
	// Target is the agent an event is addressed to (kernel.Kernel.Target).
	Target(kernel.Event) kernel.AgentID
	AgentPath(kernel.AgentID) string
}

type kernelCore struct{ k *kernel.Kernel }

func (c kernelCore) Step(ev kernel.Event) []kernel.Effect   { return c.k.Step(ev) }
func (c kernelCore) Target(ev kernel.Event) kernel.AgentID  { return c.k.Target(ev) }
func (c kernelCore) NumAgents() int                         { return c.k.NumAgents() }
func (c kernelCore) AgentPath(id kernel.AgentID) string     { return c.k.AgentPath(id) }
func (c kernelCore) AgentState(id kernel.AgentID) fsm.State { return c.k.AgentState(id) }
func (c kernelCore) LogRange(seq uint64, fn func(kernel.Lifecycle) bool) error {
	return c.k.Log().Range(seq, fn)
}
func (c kernelCore) LogOldest() uint64                       { return c.k.Log().Oldest() }
func (c kernelCore) Find(name string) (kernel.AgentID, bool) { return c.k.Find(name) }
func (c kernelCore) Quiescent() bool                         { return c.k.Quiescent() }
func (c kernelCore) AppendState(b []byte, r kernel.Renamer) []byte {
	return c.k.AppendState(b, r)
}
func (c kernelCore) View(id kernel.AgentID) oracle.View {
	a := c.k.Agent(id)
	o, r := a.Outcome()
	return oracle.View{
		Path: a.Path(), Name: a.Name(), Script: a.Script(), Parent: a.Parent(),
		State: a.State(), Turn: a.Turn(), Outcome: o, History: a.History(),
		Reason: r, Summary: a.Summary(), Children: a.Children(), Requests: a.Requests(),
		Deadline: a.Deadline(), InFlight: a.InFlight(), LiveChildren: a.LiveChildren(), Abort: a.Abort(),
		Freed: a.Freed(),
	}
}

// CoreFactory builds the Core for one run.
type CoreFactory func(kernel.Config) (Core, error)

// SimLogCapacity is the lifecycle ring a simulated kernel keeps: enough for
// the replay check of F10 over a run's recent history without growing a
// large ring for every generated world.
const SimLogCapacity = 256

// The oracle compares every record a late subscriber can replay with what
// was emitted: its window must hold a simulated kernel's whole log.
const _ = uint(oracle.ReplayWindow - SimLogCapacity)

// SequentialKernelCore is KernelCore for runs made one after another on
// one goroutine (a sweep's worker, a world and its re-runs): its kernels
// share one configured state machine (kernel.Config.Machine) instead of
// each configuring its own, which costs more than the rest of a kernel's
// construction. Kernels it builds must never step at the same time: give
// each goroutine (each worker of a pool) its own factory; a Machine fired
// by two kernels at once panics.
func SequentialKernelCore() CoreFactory {
	m := fsm.NewMachine()
	return func(cfg kernel.Config) (Core, error) {
		if cfg.Machine == nil {
			cfg.Machine = m
		}
		return KernelCore(cfg)
	}
}

// KernelCore is the default CoreFactory: the real kernel.
func KernelCore(cfg kernel.Config) (Core, error) {
	if cfg.LogCapacity == 0 {
		cfg.LogCapacity = SimLogCapacity
	}
	k, err := kernel.New(cfg)
	if err != nil {
		return nil, err
	}
	return kernelCore{k}, nil
}
