package fsm

import (
	"context"
	"errors"
	"fmt"

	"github.com/qmuntal/stateless"
)

// Machine executes Table on qmuntal/stateless. It holds no agent state: Fire
// is pointed at the State field of the agent being stepped (external storage),
// so one Machine serves a whole tree. A Machine is not safe for concurrent use;
// the kernel owns it from a single goroutine (F9).
type Machine struct {
	sm     *stateless.StateMachine
	target *State
}

// NewMachine configures a stateless machine from Table. Configuration happens
// once, before any Fire, as stateless requires.
func NewMachine() *Machine {
	m := &Machine{}
	m.sm = stateless.NewStateMachineWithExternalStorage(
		func(context.Context) (stateless.State, error) {
			if m.target == nil {
				return nil, errNoTarget
			}
			return *m.target, nil
		},
		func(_ context.Context, s stateless.State) error {
			*m.target = s.(State)
			return nil
		},
		// Immediate: the kernel never fires from inside a callback, so the
		// queue (and its per-fire allocation) buys nothing.
		stateless.FiringImmediate,
	)
	for _, t := range Table() {
		cfg := m.sm.Configure(t.From)
		switch t.Kind {
		case Move:
			cfg.Permit(t.Trigger, t.To)
		case Internal, Ignore:
			// See the package doc: the kernel performs internal actions itself.
			cfg.Ignore(t.Trigger)
		}
	}
	m.sm.OnUnhandledTrigger(func(_ context.Context, state stateless.State, trigger stateless.Trigger, _ []string) error {
		return &UndeclaredError{State: state.(State), Trigger: trigger.(Trigger)}
	})
	return m
}

var errNoTarget = errors.New("fsm: Fire without a target state")

// aim points the machine at the state it is about to read and write. A
// target already set means another Fire is under way: one Machine shared by
// kernels that step at the same time (kernel.Config.Machine), which would
// write one agent's transition into another's state. It panics there,
// rather than corrupting a tree silently (most such interleavings meet it;
// the race detector sees the rest).
func (m *Machine) aim(s *State) {
	if m.target != nil {
		panic("fsm: a Machine fired by two callers at once (one Machine shared by kernels that step concurrently; see kernel.Config.Machine)")
	}
	m.target = s
}

// release ends what aim began, also when the library panics.
func (m *Machine) release() { m.target = nil }

// Fire applies trigger to the state stored at *s. On success *s holds the
// destination. On an undeclared pair it returns *UndeclaredError and leaves *s
// unchanged.
func (m *Machine) Fire(s *State, trigger Trigger) error {
	m.aim(s)
	defer m.release()
	return m.sm.Fire(trigger)
}

// CanFire reports whether trigger is declared in state s.
func (m *Machine) CanFire(s State, trigger Trigger) bool {
	m.aim(&s)
	defer m.release()
	ok, err := m.sm.CanFire(trigger)
	return ok && err == nil
}

// DOT returns stateless's own rendering of the configured machine. It is used
// by tests to show the library machine and Table agree; the CLI prints
// Render(FormatDOT), whose output is stable across runs.
func (m *Machine) DOT() string {
	var s State
	m.aim(&s)
	defer m.release()
	return m.sm.ToGraph()
}

func (m *Machine) String() string { return fmt.Sprintf("fsm.Machine(%d transitions)", len(Table())) }
