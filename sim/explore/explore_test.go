package explore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
)

func suite(t testing.TB) []*scenario.Scenario {
	t.Helper()
	ss, err := scenario.LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func byName(t testing.TB, name string) *scenario.Scenario {
	t.Helper()
	for _, s := range suite(t) {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %q", name)
	return nil
}

// TestExploreDeterministic: exploring a scenario twice gives the same
// counts and digest; the digest changes when the explored set does.
func TestExploreDeterministic(t *testing.T) {
	s := byName(t, "cancel-single-child")
	a, err := Scenario(s, Options{MaxInputs: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Scenario(s, Options{MaxInputs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two explorations differ:\n%+v\n%+v", a, b)
	}
	if a.Violation != nil || a.Stopped != "" || a.States < 100 || a.Schedules < 2 {
		t.Fatalf("want an exhaustive clean exploration of many states: %+v", a)
	}
	c, err := Scenario(s, Options{MaxInputs: 0})
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest == a.Digest || c.States >= a.States {
		t.Fatalf("a smaller scope gave the same digest or no fewer states: %+v vs %+v", c, a)
	}
}

// TestReductionKeepsStates: the sleep sets skip transitions, never states
// or verdicts — the same distinct states are explored with and without
// them, in scenarios where they skip something.
func TestReductionKeepsStates(t *testing.T) {
	for _, name := range []string{"cancel-single-child", "parallel-delegation-cancel", "cancel-third-child"} {
		s := byName(t, name)
		with, err := Scenario(s, Options{})
		if err != nil {
			t.Fatal(err)
		}
		without, err := Scenario(s, Options{NoReduction: true})
		if err != nil {
			t.Fatal(err)
		}
		if with.Slept == 0 || without.Slept != 0 {
			t.Fatalf("%s: slept %d with, %d without; the test needs a scenario the reduction acts on", name, with.Slept, without.Slept)
		}
		if with.States != without.States || with.Transitions >= without.Transitions || (with.Violation == nil) != (without.Violation == nil) {
			t.Fatalf("%s: with %+v\nwithout %+v", name, with, without)
		}
	}
}

// TestIndependentEventsCommute checks the reduction's rule where it acts:
// in the states an exploration (one input moved anywhere) visits, any two
// due events it calls independent reach one state in either order.
func TestIndependentEventsCommute(t *testing.T) {
	pairs := 0
	for _, name := range []string{"cancel-third-child", "interrupt-races-results"} {
		x, err := newExplorer(byName(t, name), Options{MaxInputs: 1, Nudge: time.Millisecond, NoReduction: true})
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		x.onVisit = func(r *run, due []sim.Due) {
			if checked >= 15 { // enough, and the suite stays quick under -race
				x.stop("enough")
				return
			}
			for i := range due {
				for j := i + 1; j < len(due); j++ {
					if !x.independent(r, due[i], due[j]) {
						continue
					}
					pairs++
					checked++
					ab := x.after(t, x.path, i, j)
					ba := x.after(t, x.path, j, i)
					if string(ab) != string(ba) {
						t.Fatalf("%s: %s and %s were called independent but do not commute", name, due[i].Identity(), due[j].Identity())
					}
				}
			}
			x.cur = nil // after() replayed on runs of its own; be safe
		}
		if err := x.explore(); err != nil {
			t.Fatal(err)
		}
	}
	if pairs == 0 {
		t.Fatal("no independent pair met: the test checks nothing")
	}
	t.Logf("%d independent pairs commute", pairs)
}

// after runs path, then the i-th and the j-th due item (j's index taken
// again after i), and returns the state.
func (x *explorer) after(t *testing.T, path []move, i, j int) []byte {
	t.Helper()
	r, err := x.fresh()
	if err != nil {
		t.Fatal(err)
	}
	for _, mv := range path {
		x.apply(r, mv)
	}
	due := r.m.Due()
	first, second := due[i], due[j]
	r.m.StepDue(first)
	for _, d := range r.m.Due() {
		if d.Identity() == second.Identity() {
			r.m.StepDue(d)
			b, _, _ := r.m.AppendState(nil, nil)
			return b
		}
	}
	t.Fatalf("%s disabled %s", first.Identity(), second.Identity())
	return nil
}

// opaqueCore hides the kernel's state encoding: the sim.Core methods only.
type opaqueCore struct{ sim.Core }

// TestExploreNeedsStateEncoding: a core that cannot encode its state is
// refused with an error that says why (it once panicked on the first due
// item, which it could not name).
func TestExploreNeedsStateEncoding(t *testing.T) {
	core := func(cfg kernel.Config) (sim.Core, error) {
		c, err := sim.KernelCore(cfg)
		return opaqueCore{c}, err
	}
	_, err := Scenario(byName(t, "cancel-single-child"), Options{MaxInputs: 1, Core: core})
	if err == nil || !strings.Contains(err.Error(), "StateEncoder") {
		t.Fatalf("exploring a core without a state encoding: %v; want an error naming sim.StateEncoder", err)
	}
}
