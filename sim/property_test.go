package sim_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/gen"
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
func writeFailure(s *sim.Scenario, r *sim.Result) string {
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
			"submit":    func(t *rapid.T) { m.Input(sim.Input{Submit: text("s")}) },
			"interject": func(t *rapid.T) { m.Input(sim.Input{Interject: text("i")}) },
			"cancel": func(t *rapid.T) {
				n := m.Core().NumAgents()
				id := rapid.IntRange(0, n-1).Draw(t, "agent")
				in := sim.Input{Cancel: m.Core().AgentPath(kernelID(id))}
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
				m.Input(sim.Input{Shutdown: true})
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
	counts := map[sim.Probe]int{}
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
	for _, p := range sim.Probes() {
		t.Logf("%-28s %d", p, counts[p])
		if counts[p] == 0 && !testing.Short() {
			t.Errorf("probe %s never reached in %d worlds", p, n)
		}
	}
}

// recordingTB lets a test run rapid.Check and look at the outcome instead of
// failing: it records errors and logs, and stops on FailNow.
type recordingTB struct {
	name   string
	logs   []string
	errs   []string
	failed bool
}

var errFailNow = errors.New("recordingTB: FailNow")

func (r *recordingTB) Helper()      {}
func (r *recordingTB) Name() string { return r.name }
func (r *recordingTB) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Log(args ...any)                  { r.logs = append(r.logs, fmt.Sprint(args...)) }
func (r *recordingTB) Skipf(format string, args ...any) { r.Logf(format, args...); panic(errFailNow) }
func (r *recordingTB) Skip(args ...any)                 { r.Log(args...); panic(errFailNow) }
func (r *recordingTB) SkipNow()                         { panic(errFailNow) }
func (r *recordingTB) Errorf(format string, args ...any) {
	r.failed = true
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}
func (r *recordingTB) Error(args ...any) {
	r.failed = true
	r.errs = append(r.errs, fmt.Sprint(args...))
}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(errFailNow)
}
func (r *recordingTB) Fatal(args ...any) { r.Error(args...); panic(errFailNow) }
func (r *recordingTB) FailNow()          { r.failed = true; panic(errFailNow) }
func (r *recordingTB) Fail()             { r.failed = true }
func (r *recordingTB) Failed() bool      { return r.failed }

// checkRecorded runs rapid.Check against a recording TB.
func checkRecorded(rec *recordingTB, prop func(*rapid.T)) {
	defer func() {
		if v := recover(); v != nil && v != errFailNow {
			panic(v)
		}
	}()
	rapid.Check(rec, prop)
}

var (
	afterTests = regexp.MustCompile(`failed after (\d+) tests`)
	shrunkLine = regexp.MustCompile(`^SHRUNK agents=(\d+) events=(\d+) scripts=(\d+) replies=(\d+) calls=(\d+) inputs=(\d+) faults=(\d+)`)
)

// teethHunt runs prop in up to teethRounds rounds of rapid's checks, each
// with fresh seeds, until it fails (the rarest loop, F13, a child's
// timeout, needed more than one round of 100 worlds in about 1 run in 40),
// then reads rapid's report and the SHRUNK line prop logged: how many
// checks it took and the shrunk world's size (agents, events, and the
// line's fields). none says what was not found, for the failure.
func teethHunt(t *testing.T, rec *recordingTB, prop func(*rapid.T), none string) (checks, agents, events int, size []string) {
	t.Helper()
	perRound, _ := strconv.Atoi(flag.Lookup("rapid.checks").Value.String())
	before := 0
	for round := 0; round < teethRounds && !rec.failed; round++ {
		checkRecorded(rec, prop)
		if !rec.failed {
			before += perRound
		}
	}
	if !rec.failed {
		t.Fatalf("%s in %d checks", none, before)
	}
	found := afterTests.FindStringSubmatch(strings.Join(rec.errs, "\n"))
	for _, l := range rec.logs {
		if m := shrunkLine.FindStringSubmatch(l); m != nil {
			size = m
		}
	}
	if found == nil || size == nil {
		t.Fatalf("could not read rapid's report:\n%s\n%s", strings.Join(rec.errs, "\n"), strings.Join(rec.logs, "\n"))
	}
	agents, _ = strconv.Atoi(size[1])
	events, _ = strconv.Atoi(size[2])
	after, _ := strconv.Atoi(found[1])
	return before + after, agents, events, size
}

// maxShrunkAgents and maxShrunkEvents bound the counterexample a teeth
// test's shrink must reach (TestOracleTeethRapid,
// TestCrashCatchesBrokenRecoveries).
const maxShrunkAgents, maxShrunkEvents = 5, 80

// teethRounds bounds the search of TestOracleTeethRapid: rounds of rapid's
// checks (100 worlds each by default).
const teethRounds = 3

// teethOptions are the worlds TestOracleTeethRapid draws: depth up to 4
// and at most 8 agents, so a counterexample shrinks well within rapid's
// time bound (wider fan-outs are the sweeps' and TestWorlds').
var teethOptions = func() gen.Options {
	o := gen.DefaultOptions(4)
	o.MaxAgents = 8
	return o
}()

// TestOracleTeethRapid: for every F-bug, and for every invariant no F-bug
// breaks first, a deliberately broken agent loop runs against random
// worlds; rapid must find a violation of the invariant that names it within
// teethRounds rounds of checks, and shrink the world to a small one.
func TestOracleTeethRapid(t *testing.T) {
	for _, bl := range append(sim.BrokenLoops(), sim.InvariantLoops()...) {
		id := bl.Failure[:strings.Index(bl.Failure, ":")]
		t.Run(id, func(t *testing.T) {
			if why := bl.ScenarioOnly(); why != "" {
				t.Skip(why)
			}
			// Not parallel: rapid's shrinking is bounded by wall time
			// (TestMain), so fifteen shrinks sharing two cores left some
			// counterexamples unshrunk on a loaded machine.
			rec := &recordingTB{name: strings.ReplaceAll(t.Name(), "/", "_")} // F13 and F13#01 apart
			t.Cleanup(func() { os.RemoveAll(filepath.Join("testdata", "rapid", rec.name)) })
			start := time.Now()
			prop := func(rt *rapid.T) {
				s := gen.World(teethOptions).Draw(rt, "world")
				r, err := sim.Run(s, sim.Options{Core: bl.Core})
				if err != nil {
					rt.Fatal(err)
				}
				for _, v := range r.Violations {
					if v.Invariant == bl.Invariant {
						scripts, replies, calls, inputs, faults := s.Size()
						rt.Logf("SHRUNK agents=%d events=%d scripts=%d replies=%d calls=%d inputs=%d faults=%d\n%s",
							r.Agents, r.Events, scripts, replies, calls, inputs, faults, s.YAML())
						rt.Fatalf("%s: %s", bl.Failure, v)
					}
				}
			}
			checks, agents, events, size := teethHunt(t, rec, prop, fmt.Sprintf("%s: no %s violation", bl.Failure, bl.Invariant))
			t.Logf("%s → %s found after %d checks, shrunk to %d agent(s), %d events (scripts=%s replies=%s calls=%s inputs=%s faults=%s) in %v",
				bl.Failure, bl.Invariant, checks, agents, events, size[3], size[4], size[5], size[6], size[7], time.Since(start).Round(time.Millisecond))
			if agents > maxShrunkAgents || events > maxShrunkEvents {
				t.Errorf("the shrunk counterexample is not small: %d agents, %d events\n%s", agents, events, strings.Join(rec.logs, "\n"))
			}
		})
	}
}

func kernelID(i int) kernel.AgentID { return kernel.AgentID(i) }
