package fsm

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestEveryPair walks the full (state, trigger) product: a declared pair must
// land on the table's destination, an undeclared one must return
// *UndeclaredError naming both and leave the state untouched.
func TestEveryPair(t *testing.T) {
	m := NewMachine()
	for _, from := range States() {
		for _, trig := range Triggers() {
			want, declared := Lookup(from, trig)
			name := from.String() + "/" + trig.String()
			t.Run(name, func(t *testing.T) {
				s := from
				err := m.Fire(&s, trig)
				if declared {
					if err != nil {
						t.Fatalf("declared %s: Fire error %v", name, err)
					}
					if s != want.To {
						t.Fatalf("declared %s: landed in %s, table says %s", name, s, want.To)
					}
					if !m.CanFire(from, trig) {
						t.Fatalf("declared %s: CanFire false", name)
					}
					return
				}
				var ue *UndeclaredError
				if !errors.As(err, &ue) {
					t.Fatalf("undeclared %s: want *UndeclaredError, got %v", name, err)
				}
				if ue.State != from || ue.Trigger != trig {
					t.Fatalf("undeclared %s: error names %s/%s", name, ue.State, ue.Trigger)
				}
				if !strings.Contains(err.Error(), from.String()) || !strings.Contains(err.Error(), trig.String()) {
					t.Fatalf("message %q does not name state and trigger", err)
				}
				if s != from {
					t.Fatalf("undeclared %s: state moved to %s", name, s)
				}
				if m.CanFire(from, trig) {
					t.Fatalf("undeclared %s: CanFire true", name)
				}
			})
		}
	}
}

// TestInterruptedHasNoWayBack is F1 by construction: from Interrupted the only
// move is Settled → Idle.
func TestInterruptedHasNoWayBack(t *testing.T) {
	for _, tr := range Table() {
		if tr.From != Interrupted || tr.Kind != Move {
			continue
		}
		if tr.To != Idle || tr.Trigger != Settled {
			t.Errorf("Interrupted has a move %s → %s; only Settled → Idle is allowed (F1)", tr.Trigger, tr.To)
		}
	}
	for _, to := range []State{Streaming, Tooling, Delegating} {
		for _, trig := range Triggers() {
			if tr, ok := Lookup(Interrupted, trig); ok && tr.To == to {
				t.Errorf("Interrupted --%s--> %s exists (F1)", trig, to)
			}
		}
	}
}

func TestTableWellFormed(t *testing.T) {
	seen := map[[2]uint8]bool{}
	for _, tr := range Table() {
		key := [2]uint8{uint8(tr.From), uint8(tr.Trigger)}
		if seen[key] {
			t.Errorf("duplicate row %s/%s", tr.From, tr.Trigger)
		}
		seen[key] = true
		if tr.Kind != Move && tr.To != tr.From {
			t.Errorf("%s/%s is %s but changes state to %s", tr.From, tr.Trigger, tr.Kind, tr.To)
		}
		if tr.Kind == Move && tr.To == tr.From {
			t.Errorf("%s/%s is a move onto itself; declare it internal", tr.From, tr.Trigger)
		}
		if tr.Why == "" {
			t.Errorf("%s/%s has no explanation", tr.From, tr.Trigger)
		}
	}
	// Every state is reachable from Idle and every state can return to Idle.
	reach := map[State]bool{Idle: true}
	for changed := true; changed; {
		changed = false
		for _, tr := range Table() {
			if reach[tr.From] && !reach[tr.To] {
				reach[tr.To], changed = true, true
			}
		}
	}
	for _, s := range States() {
		if !reach[s] {
			t.Errorf("state %s unreachable from Idle", s)
		}
	}
	back := map[State]bool{Idle: true}
	for changed := true; changed; {
		changed = false
		for _, tr := range Table() {
			if back[tr.To] && !back[tr.From] {
				back[tr.From], changed = true, true
			}
		}
	}
	for _, s := range States() {
		if !back[s] {
			t.Errorf("state %s cannot return to Idle", s)
		}
	}
}

func TestRender(t *testing.T) {
	for _, f := range Formats() {
		out, err := Render(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, s := range States() {
			if !strings.Contains(out, s.String()) {
				t.Errorf("%s output lacks state %s", f, s)
			}
		}
		again, _ := Render(f)
		if again != out {
			t.Errorf("%s output not deterministic", f)
		}
	}
	mm, _ := Render(FormatMermaid)
	if !strings.HasPrefix(mm, "stateDiagram-v2\n") {
		t.Errorf("mermaid output does not start with stateDiagram-v2: %q", mm[:30])
	}
	if _, err := Render("svg"); err == nil {
		t.Error("unknown format accepted")
	}
	// The library's own rendering of the configured machine names every state
	// too: the stateless machine really was built from Table.
	dot := NewMachine().DOT()
	for _, s := range States() {
		if !strings.Contains(dot, s.String()) {
			t.Errorf("stateless DOT lacks %s", s)
		}
	}
}

func TestMatrixMatchesLookup(t *testing.T) {
	m := Matrix()
	for _, s := range States() {
		for _, tr := range Triggers() {
			_, ok := Lookup(s, tr)
			if m[s][tr] != ok {
				t.Errorf("Matrix[%s][%s]=%v, Lookup=%v", s, tr, m[s][tr], ok)
			}
		}
	}
}

// BenchmarkStatelessFire is the baseline docs/performance.md compares the kernel's Step
// against: a bare stateless Fire on a 5-state machine (external storage,
// immediate mode, a ring of Permit transitions).
func BenchmarkStatelessFire(b *testing.B) {
	m := NewMachine()
	ring := []Trigger{Submit, StreamTools, ResultsIn, StreamText}
	s := Idle
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := m.Fire(&s, ring[i&3]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// TestMachineRefusesTwoFiresAtOnce: a Fire that finds another one under way
// (one Machine shared by kernels that step concurrently) panics saying so,
// instead of writing one agent's transition into another's state; the
// Machine stays usable after a Fire returns.
func TestMachineRefusesTwoFiresAtOnce(t *testing.T) {
	m := NewMachine()
	other := Idle
	m.target = &other // a Fire of another kernel, under way
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "fired by two callers at once") {
				t.Fatalf("recovered %v", r)
			}
		}()
		s := Idle
		_ = m.Fire(&s, Submit)
		t.Fatal("Fire went on")
	}()
	if other != Idle {
		t.Fatalf("the other Fire's state was written: %s", other)
	}
	m.release()
	s := Idle
	if err := m.Fire(&s, Submit); err != nil || s != Streaming || m.target != nil {
		t.Fatalf("after: %v %s %v", err, s, m.target)
	}
}
