// Package simtest holds broken agent loops that tests of more than one
// package run the simulator with (test code: production never builds a
// broken core).
package simtest

import (
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
)

// DropFirstStep wraps a core and loses the effects of its first Step: the
// request that step started is never seen by the world, so the run stalls
// (liveness) and its trace differs from a sound run's.
type DropFirstStep struct {
	sim.Core
	stepped bool
}

// Step forwards ev and returns nothing the first time.
func (d *DropFirstStep) Step(ev kernel.Event) []kernel.Effect {
	out := d.Core.Step(ev)
	if !d.stepped {
		d.stepped = true
		return nil
	}
	return out
}

// DropsFirstStep is a core factory for DropFirstStep over the real kernel.
func DropsFirstStep(cfg kernel.Config) (sim.Core, error) {
	c, err := sim.KernelCore(cfg)
	if err != nil {
		return nil, err
	}
	return &DropFirstStep{Core: c}, nil
}
