package sim_test

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
	"github.com/escapement/escapement/sim/oracle"
	"github.com/escapement/escapement/sim/scenario"
	"pgregory.net/rapid"
)

// The property suites. With rapid's default of 100 checks per
// property they run 1000 checks in `make test`: six depths of random worlds
// (600), permuted worlds (100), the determinism re-run (100) and the
// state-machine test at two depths (200); `make soak` raises RAPID_CHECKS
// for all of them.

// failureDir is where a failing world is written as a scenario file that
// `escapement sim` reproduces.
func failureDir() string {
	if d := os.Getenv("ESCAPEMENT_FAILURES"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "escapement-failures")
}

// writeFailure saves the world and returns the command that reproduces it.
func writeFailure(s *scenario.Scenario, r *sim.Result) string {
	y := s.YAML()
	sum := sha256.Sum256(y)
	c := s.Clone()
	c.Name = "failure-" + hex.EncodeToString(sum[:6])
	if len(r.Violations) > 0 {
		c.About = "Found by the property suites: " + r.Violations[0].String()
	}
	dir := failureDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "(could not write the world: " + err.Error() + ")"
	}
	path := filepath.Join(dir, c.Name+".yaml")
	if err := os.WriteFile(path, c.YAML(), 0o644); err != nil {
		return "(could not write the world: " + err.Error() + ")"
	}
	return "escapement sim " + path
}

func worldProperty(depth int, permute bool) func(*rapid.T) {
	return func(t *rapid.T) {
		s := gen.World(gen.DefaultOptions(depth)).Draw(t, "world")
		r, err := sim.Run(s, sim.Options{Permute: permute})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Passed {
			t.Fatalf("%d violation(s); first: %s\nworld: %d agents, %d events\nreproduce: %s\n%s",
				len(r.Violations), r.Violations[0], r.Agents, r.Events, writeFailure(s, r), s.YAML())
		}
	}
}

// TestWorlds: random worlds of depth 1..6 break no invariant.
func TestWorlds(t *testing.T) {
	for depth := 1; depth <= 6; depth++ {
		t.Run("depth="+strconv.Itoa(depth), rapid.MakeCheck(worldProperty(depth, false)))
	}
}

// TestWorldsPermuted: the same with same-instant events delivered in an
// order drawn from the world's seed.
func TestWorldsPermuted(t *testing.T) {
	rapid.Check(t, worldProperty(6, true))
}

// TestRerunDeterminism: a sample of generated worlds run twice give
// the same trace hash.
func TestRerunDeterminism(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := gen.World(gen.DefaultOptions(6)).Draw(t, "world")
		permute := rapid.Bool().Draw(t, "permute")
		r1, err1 := sim.Run(s, sim.Options{Permute: permute})
		r2, err2 := sim.Run(s.Clone(), sim.Options{Permute: permute})
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if r1.TraceSHA256 != r2.TraceSHA256 {
			t.Fatalf("same world, two traces: %s, %s\nreproduce: %s", r1.TraceSHA256, r2.TraceSHA256, writeFailure(s, r1))
		}
	})
}

// TestStateMachine: the user's inputs and the passage of time are
// rapid actions — submit, cancel (of any agent that exists, sometimes bound
// to a turn), interject, a rare shutdown, advance the clock, deliver the next
// pending world event, deliver a hostile one, crash and recover the host —
// with the oracle
// as the invariant after every action.
func TestStateMachine(t *testing.T) {
	for _, depth := range []int{3, 6} {
		t.Run("depth="+strconv.Itoa(depth), rapid.MakeCheck(stateMachine(depth)))
	}
}

func stateMachine(depth int) func(*rapid.T) {
	return func(t *rapid.T) {
		s := gen.Script(gen.DefaultOptions(depth)).Draw(t, "world")
		// Tools a crash may run again.
		var idempotent []string
		for _, name := range slices.Sorted(maps.Keys(s.Tools)) {
			if rapid.Bool().Draw(t, "idempotent_"+name) {
				idempotent = append(idempotent, name)
			}
		}
		// Durable: a crash rebuilds the kernel from the host's log (I24).
		m, err := sim.New(s, sim.Options{Idempotent: idempotent, Durable: true})
		if err != nil {
			t.Fatal(err)
		}
		texts := 0
		text := func(kind string) string {
			texts++
			return kind + strconv.Itoa(texts)
		}
		t.Repeat(map[string]func(*rapid.T){
			"submit":    func(t *rapid.T) { m.Input(scenario.Input{Submit: text("s")}) },
			"interject": func(t *rapid.T) { m.Input(scenario.Input{Interject: text("i")}) },
			"cancel": func(t *rapid.T) {
				n := m.Core().NumAgents()
				id := rapid.IntRange(0, n-1).Draw(t, "agent")
				in := scenario.Input{Cancel: m.Core().AgentPath(kernelID(id))}
				if rapid.IntRange(0, 3).Draw(t, "bound") == 0 {
					// A cancel bound to a turn — the current one, an
					// ended one, or one not started yet (F14).
					cur := int(m.Core().View(kernelID(id)).Turn)
					in.Turn = uint64(rapid.IntRange(max(1, cur-1), cur+1).Draw(t, "turn"))
				}
				m.Input(in)
			},
			"shutdown": func(t *rapid.T) {
				if rapid.IntRange(0, 19).Draw(t, "rare") != 0 {
					t.Skip("shutdown is rare: it ends the session")
				}
				m.Input(scenario.Input{Shutdown: true})
			},
			"crash": func(t *rapid.T) {
				if rapid.IntRange(0, 4).Draw(t, "rare") != 0 {
					t.Skip("a crash is rare")
				}
				m.Recover()
			},
			"hostile": func(t *rapid.T) {
				// An event a buggy driver or provider could send: a world
				// event naming some op (live, ended, a timer, of another
				// kind or none) that is malformed, stale, an early answer
				// or progress after its cancel; an empty text; a cancel of
				// an agent that may not exist.
				op := kernel.OpID(rapid.IntRange(1, 40).Draw(t, "op"))
				switch rapid.IntRange(0, 9).Draw(t, "hostile_kind") {
				case 8, 9:
					// What an adapter sent just before a cancel reached it:
					// a retry notice or a chunk for a request the kernel
					// cancelled and that has not acknowledged yet.
					if ids := m.CancellingRequests(); len(ids) > 0 {
						op = rapid.SampledFrom(ids).Draw(t, "cancelling")
					}
					if rapid.Bool().Draw(t, "retry") {
						m.Deliver(kernel.LLMRetry(0, op, 1, time.Second, "429 Too Many Requests"))
					} else {
						m.Deliver(kernel.TextDelta(0, op, 0, "late "))
					}
				case 5:
					m.Deliver(kernel.Submit(0, ""))
				case 6:
					m.Deliver(kernel.Interject(0, ""))
				case 7:
					m.Deliver(kernel.Cancel(0, kernel.AgentID(rapid.IntRange(-1, 60).Draw(t, "agent"))))
				case 0:
					// Mostly aimed at a stream that is live: the refused
					// fragment must leave no draft behind and must not use
					// up the chunk number the stream sends next.
					chunk := uint32(0)
					if rapid.IntRange(0, 3).Draw(t, "aimed") != 0 {
						for _, d := range m.Due() {
							if d.Kind == sim.DueWorld && d.Event.Kind == kernel.EvLLMDelta && !d.Dup {
								op, chunk = d.Event.Op, d.Event.Chunk
								break
							}
						}
					}
					m.Deliver(kernel.CallFragment(0, op, chunk, kernel.CallDelta{Index: -1, Name: "x"}))
				case 1:
					m.Deliver(kernel.ToolResult(0, op, kernel.ToolOK, "early"))
				case 2:
					m.Deliver(kernel.LLMEnd(0, op))
				case 3:
					m.Deliver(kernel.LLMError(0, op, kernel.FailureServer, "hostile"))
				default:
					m.Deliver(kernel.Event{Kind: kernel.EventKind(200), Op: op})
				}
			},
			"advance": func(t *rapid.T) {
				m.Advance(rapid.SampledFrom([]time.Duration{10 * time.Millisecond, 0, 100 * time.Millisecond, time.Second, 30 * time.Second}).Draw(t, "by"))
			},
			"deliver": func(t *rapid.T) {
				if m.Pending() == 0 {
					t.Skip("nothing pending")
				}
				m.Step()
			},
			"": func(t *rapid.T) {
				if v := m.Violations(); len(v) > 0 {
					t.Fatalf("%s", v[0])
				}
			},
		})
		r, err := m.Finish()
		if err != nil {
			t.Fatal(err)
		}
		if !r.Passed {
			t.Fatalf("at the end: %s", r.Violations[0])
		}
	}
}

// TestProbesReached: over a fixed set of seeds every probe is
// reached, so the generators cannot silently stop covering a situation.
func TestProbesReached(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 400
	}
	g := gen.World(gen.DefaultOptions(6))
	counts := map[oracle.Probe]int{}
	for seed := 0; seed < n; seed++ {
		r, err := sim.Run(g.Example(seed), sim.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Passed {
			t.Fatalf("seed %d: %s", seed, r.Violations[0])
		}
		for p, c := range r.Probes {
			counts[p] += c
		}
	}
	for _, p := range oracle.Probes() {
		t.Logf("%-28s %d", p, counts[p])
		if counts[p] == 0 && !testing.Short() {
			t.Errorf("probe %s never reached in %d worlds", p, n)
		}
	}
}

func kernelID(i int) kernel.AgentID { return kernel.AgentID(i) }
