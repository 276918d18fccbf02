package explore

import (
	"testing"

	"github.com/escapement/escapement/sim/scenario"
)

// BenchmarkExploreFamily explores each member of the everyday family with
// two inputs movable (`escapement sim explore --family`), one
// sub-benchmark each, and reports its states, its moves and the states
// explored per second. The time of the largest members is the README's
// "under a minute each" (docs/semantics.md, "Exploration"):
//
//	go test ./sim/explore -run '^$' -bench 'ExploreFamily' -benchtime 1x -count 5
func BenchmarkExploreFamily(b *testing.B) {
	for _, e := range Family() {
		b.Run(e.String(), func(b *testing.B) {
			benchExplore(b, e.Scenario(), Options{MaxInputs: 2})
		})
	}
}

// BenchmarkExploreSuite explores every embedded scenario with two inputs
// movable (`escapement sim explore`), one after another.
func BenchmarkExploreSuite(b *testing.B) {
	ss := suite(b)
	states, moves := 0, 0
	for b.Loop() {
		states, moves = 0, 0
		for _, s := range ss {
			rep := explore1(b, s, Options{MaxInputs: 2})
			states += rep.States
			moves += rep.Transitions
		}
	}
	report(b, states, moves)
}

func benchExplore(b *testing.B, s *scenario.Scenario, opt Options) {
	var rep *Report
	for b.Loop() {
		rep = explore1(b, s, opt)
	}
	report(b, rep.States, rep.Transitions)
}

// explore1 explores s, which must pass exhaustively.
func explore1(b *testing.B, s *scenario.Scenario, opt Options) *Report {
	rep, err := Scenario(s, opt)
	if err != nil {
		b.Fatal(err)
	}
	if !rep.Passed() || rep.Stopped != "" {
		b.Fatalf("%s: stopped %q, violation %v, unmet %v", s.Name, rep.Stopped, rep.Violation, rep.Unmet())
	}
	return rep
}

// report adds the counts of one exploration (the same in every round) and
// its rate.
func report(b *testing.B, states, moves int) {
	b.ReportMetric(float64(states), "states")
	b.ReportMetric(float64(moves), "moves")
	b.ReportMetric(float64(states)*float64(b.N)/b.Elapsed().Seconds(), "states/s")
}
