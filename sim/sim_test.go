package sim

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/scenarios"
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

// mustLoad loads a scenario written inline, failing the test on bad input.
func mustLoad(t testing.TB, src string) *scenario.Scenario {
	t.Helper()
	s, err := scenario.Load(t.Name()+".yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mustRun runs s and fails the test on a run error (never on violations:
// callers judge those).
func mustRun(t testing.TB, s *scenario.Scenario, opt Options) *Result {
	t.Helper()
	r, err := Run(s, opt)
	if err != nil {
		t.Fatalf("run %s: %v", s.Name, err)
	}
	return r
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

// TestEmbeddedSuite: every embedded scenario passes, and running it twice
// gives the same trace SHA-256 (I6).
func TestEmbeddedSuite(t *testing.T) {
	ss := suite(t)
	if len(ss) < 25 {
		t.Fatalf("only %d scenarios", len(ss))
	}
	for _, s := range ss {
		t.Run(s.Name, func(t *testing.T) {
			r1 := mustRun(t, s, Options{})
			if !r1.Passed {
				t.Fatalf("violations: %v", r1.Violations)
			}
			r2 := mustRun(t, s, Options{})
			if r1.TraceSHA256 != r2.TraceSHA256 || len(r1.TraceSHA256) != 64 {
				t.Fatalf("trace hash differs between runs: %s vs %s", r1.TraceSHA256, r2.TraceSHA256)
			}
		})
	}
}

// TestSuiteCoversCatalogue: there is a scenario per failure F1–F14 and per
// situation the README's scenario list names.
func TestSuiteCoversCatalogue(t *testing.T) {
	names := map[string]bool{}
	about := ""
	for _, s := range suite(t) {
		names[s.Name] = true
		about += s.About
	}
	for i := 1; i <= 14; i++ {
		if !strings.Contains(about, "F"+strconv.Itoa(i)+".") {
			t.Errorf("no scenario describes F%d", i)
		}
	}
	for _, n := range []string{"parallel-delegation-cancel", "timeout-depth4-survived", "slow-steady-leaf-depth4",
		"tools-ignore-cancel", "interject-while-streaming", "interject-while-tooling", "cancel-single-child",
		"budget-exhaustion", "max-depth-refused", "rate-limit-then-success"} {
		if !names[n] {
			t.Errorf("missing scenario %s", n)
		}
	}
}

// TestPermutedOrdersHoldInvariants: whatever order same-instant events are
// delivered in, no invariant breaks (expectations may legitimately differ).
func TestPermutedOrdersHoldInvariants(t *testing.T) {
	notes := 0
	for _, s := range suite(t) {
		for seed := uint64(1); seed <= 8; seed++ {
			c := *s
			c.Seed = seed
			var buf bytes.Buffer
			r := mustRun(t, &c, Options{Permute: true, Trace: &buf})
			notes += strings.Count(buf.String(), `"note":"permute:`)
			for _, v := range r.Violations {
				if v.Invariant != "expect" {
					t.Errorf("%s seed %d: %s", s.Name, seed, v)
				}
			}
		}
	}
	if notes == 0 {
		t.Fatal("permutation mode never had a choice to make")
	}
}

// TestYAMLRoundTrip: the canonical YAML loads back to a scenario with the
// same canonical form and the same run.
func TestYAMLRoundTrip(t *testing.T) {
	for _, s := range suite(t) {
		y := s.YAML()
		s2, err := scenario.Load("roundtrip.yaml", y)
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.Name, err, y)
		}
		if !bytes.Equal(s2.YAML(), y) {
			t.Fatalf("%s: canonical form changed", s.Name)
		}
		r1 := mustRun(t, s, Options{})
		r2 := mustRun(t, s2, Options{})
		if r1.TraceSHA256 != r2.TraceSHA256 {
			t.Fatalf("%s: round-tripped scenario runs differently", s.Name)
		}
	}
}

// TestMaxDepthIsNotBadInput: a chain deeper than max_depth loads; the kernel
// refuses the delegation at run time.
func TestMaxDepthIsNotBadInput(t *testing.T) {
	s := mustLoad(t, "name: deep\nlimits: {max_depth: 0}\nagents:\n  main:\n    - calls: [{delegate: c, prompt: x}]\n  c: []\ninputs:\n  - {at: 0s, submit: go}\n")
	r := mustRun(t, s, Options{})
	if !r.Passed || r.Agents != 1 {
		t.Fatalf("passed=%v agents=%d %v", r.Passed, r.Agents, r.Violations)
	}
}

func fuzzSeeds(f *testing.F) {
	for _, s := range suite(f) {
		f.Add(s.YAML())
	}
	f.Add([]byte("name: t\nagents:\n  main:\n    - text: hi\n      calls: [{delegate: child, prompt: go}, {tool: grep, args: {p: x}}]\n  child:\n    - text: ok\ntools:\n  grep: {duration: 1s, result: r}\n" + "inputs:\n  - {at: 0s, submit: go}\n  - {at: 1s, cancel: child}\n"))
	f.Add([]byte("name: x\nagents: {main: [{text: a b c, rate: 0.001}]}\ninputs: [{at: 0s, submit: s}]\n"))
	f.Add([]byte("name: x\nagents: &a {main: []}\nexpect: {outcomes: {main: *a}}\n"))
	f.Add([]byte("name: x\nabout: caf\xe9\nagents: {main: []}\n"))
	f.Add([]byte("\xff\xfen\x00a\x00m\x00e\x00:\x00 \x00x\x00\n\x00"))
}

// FuzzRun also runs whatever the loader accepts through the simulator (with
// small limits): no panic, and the oracle's verdict is deterministic.
func FuzzRun(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := scenario.Load("fuzz.yaml", data)
		if err != nil {
			return
		}
		opt := Options{TimeLimit: time.Hour, MaxEvents: 5000}
		r1, r2 := mustRun(t, s, opt), mustRun(t, s, opt)
		if r1.TraceSHA256 != r2.TraceSHA256 {
			t.Fatal("nondeterministic run")
		}
	})
}

// TestWorldFaultsFire: a stream fault armed before its request starts
// fires wherever After puts it — past the reply's last chunk, or in a reply
// with no text — instead of the stream ending cleanly; and rate-limit retries wait the fault's base plus jitter,
// never a compounding delay.
func TestWorldFaultsFire(t *testing.T) {
	for _, c := range []struct {
		name, reply, fault string
	}{
		{"error after the last chunk", `text: "two words"`, `{at: 0s, agent: main, fault: stream_error, after: 99}`},
		{"disconnect after the last chunk", `text: "two words"`, `{at: 0s, agent: main, fault: disconnect, after: 99}`},
		{"error in a calls-only reply", `calls: [{tool: t, args: {}}]`, `{at: 0s, agent: main, fault: stream_error}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := "name: f\nagents:\n  main:\n    - " + c.reply + "\ntools:\n  t: {duration: 1s, result: ok}\nfaults:\n  - " + c.fault +
				"\ninputs:\n  - {at: 1ms, submit: go}\nexpect:\n  outcomes: {main: failed}\n"
			s := mustLoad(t, src)
			r := mustRun(t, s, Options{})
			if !r.Passed {
				t.Fatalf("%v", r.Violations)
			}
		})
	}
	t.Run("rate limit does not compound", func(t *testing.T) {
		src := "name: r\nagents:\n  main:\n    - text: ok\nfaults:\n  - {at: 0s, agent: main, fault: rate_limit, attempts: 4, retry_after: 1s}\n" +
			"limits:\n  first_token_timeout: 1m\ninputs:\n  - {at: 0s, submit: go}\nexpect:\n  outcomes: {main: completed}\n"
		s := mustLoad(t, src)
		var delays []time.Duration
		r := mustRun(t, s, Options{Observe: func(st StepInfo) {
			if st.Event.Kind == kernel.EvLLMRetry {
				delays = append(delays, st.Event.Delay)
			}
		}})
		if !r.Passed || len(delays) != MaxRetries {
			t.Fatalf("passed=%v retries=%d: %v", r.Passed, len(delays), r.Violations)
		}
		for i, d := range delays {
			if d < time.Second || d > 1200*time.Millisecond {
				t.Errorf("retry %d waits %v, want 1s..1.2s", i+1, d)
			}
		}
	})
}

// TestAdvanceStopsAtItsBound: Advance(d) delivers nothing due after now+d,
// even when a dead item (a stopped timer) due earlier sits in the queue.
func TestAdvanceStopsAtItsBound(t *testing.T) {
	s := mustLoad(t, "name: a\nagents:\n  main:\n    - text: hi\n    - text: again\ninputs:\n  - {at: 0s, submit: one}\n  - {at: 40s, submit: two}\n")
	m, err := New(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.Advance(31 * time.Second) // the first turn's stopped watchdog (30s) is still queued
	if m.Now() != 31*time.Second {
		t.Fatalf("clock at %v after Advance(31s)", m.Now())
	}
	if v := m.Core().View(kernel.Root); v.Turn != 1 {
		t.Fatalf("the 40s submission was delivered early: turn %d", v.Turn)
	}
}

// TestMalformedCallsJustified: a call whose arguments are not JSON is
// answered malformed, and the oracle accepts that answer (its I13 check has
// no false positive here; TestOracleCatchesBrokenInvariants shows the other
// side).
func TestMalformedCallsJustified(t *testing.T) {
	src := "name: m\nagents:\n  main:\n    - calls: [{tool: grep, args_raw: '{\"bad json'}]\n    - text: done\n" +
		"tools:\n  grep: {duration: 1s, result: ok}\ninputs:\n  - {at: 0s, submit: go}\n" +
		"expect:\n  outcomes: {main: completed}\n  history:\n    main: {contains: ['\"status\":\"malformed\"']}\n"
	s := mustLoad(t, src)
	r := mustRun(t, s, Options{})
	if !r.Passed {
		t.Fatal(r.Violations)
	}
}

// TestSameInstantOrder: the other order of the two same-instant scenarios
// (docs/semantics.md, "One instant, one order"): the event delivered first
// wins and the second sees what it left. A first-token deadline fired
// before an Esc at the same instant times the turn out, and the Esc finds
// it Interrupted (a no-op); a stream that ended before an interjection at
// the same instant completed its turn, and the interjection starts the
// next one.
func TestSameInstantOrder(t *testing.T) {
	for _, c := range []struct {
		scenario string
		input    scenario.Input
		check    func(t *testing.T, r *Result, h []kernel.Message)
	}{
		{"same-instant-cancel-and-timeout", scenario.Input{Cancel: scenario.RootScript}, func(t *testing.T, r *Result, h []kernel.Message) {
			if got := r.Outcomes[scenario.RootScript]; got != "timed_out" || !inHistory(h, `reason="first_token_timeout"`) {
				t.Fatalf("outcome %s, history %+v", got, h)
			}
		}},
		{"same-instant-interject-and-stream-end", scenario.Input{Interject: "wait, one more thing"}, func(t *testing.T, r *Result, h []kernel.Message) {
			var partial bool
			for _, m := range h {
				partial = partial || m.Partial
			}
			if partial || r.LLMRequests[scenario.RootScript] != 2 || !inHistory(h, "Adjusted.") || len(h) != 4 {
				t.Fatalf("requests %d, history %+v", r.LLMRequests[scenario.RootScript], h)
			}
		}},
	} {
		t.Run(c.scenario, func(t *testing.T) {
			s := byName(t, c.scenario).Clone()
			at := s.Inputs[1].At
			s.Inputs = s.Inputs[:1]
			s.Expect = scenario.Expect{}
			m, err := New(s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			m.Advance(at) // delivers everything due at `at`, the timer or the stream's end included
			if m.Now() != at {
				t.Fatalf("clock at %v", m.Now())
			}
			m.Input(c.input) // then the input, at the same instant
			r, err := m.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if !r.Passed {
				t.Fatalf("violations: %v", r.Violations)
			}
			c.check(t, r, m.Core().View(kernel.Root).History)
		})
	}
}

// TestRecovery: a host crash at chosen instants (docs/semantics.md,
// "Recovery"): the world loses everything in flight, the kernel resolves
// it, and the oracle judges every step — a streaming request restarts with
// its text kept partial, an idempotent tool runs again and any other is
// answered tool_lost, an op being cancelled ends lost so the tree settles,
// a restart the budget refuses ends the turn, a debounce window survives,
// a child's stream restarts under its waiting parent. A restarted request
// is the same request asked again: it gets the reply the lost one was
// getting (the script's next reply is never reached) and counts once in
// the requests the model was asked.
func TestRecovery(t *testing.T) {
	const tools = "tools:\n  slow: {duration: 2s, result: slow result}\n  risky: {duration: 2s, result: risky result}\n  stuck: {duration: 30s, on_cancel: ignore, result: late}\n"
	for _, c := range []struct {
		name, src string
		crash     time.Duration
		outcome   string
		requests  int
		contains  []string
	}{
		{"stream", "agents:\n  main:\n    - {text: one two three four five six, rate: 10}\n    - {text: never asked}\ninputs:\n  - {at: 0s, submit: go}\n",
			350 * time.Millisecond, "completed", 1, []string{"one two ", "one two three four five six"}},
		{"tools", "agents:\n  main:\n    - calls: [{tool: slow, args: {n: 1}}, {tool: risky, args: {n: 2}}]\n    - {text: done}\n" + tools + "inputs:\n  - {at: 0s, submit: go}\n",
			time.Second, "completed", 2, []string{`"type":"tool_lost","status":"lost","reason":"crash"`, "slow result", "done"}},
		{"waiting", "limits: {max_parallel_tools: 1}\nagents:\n  main:\n    - calls: [{tool: risky, args: {n: 1}}, {tool: slow, args: {n: 2}}]\n    - {text: done}\n" + tools + "inputs:\n  - {at: 0s, submit: go}\n",
			time.Second, "completed", 2, []string{`"type":"tool_lost"`, "slow result", "done"}},
		{"interrupted", "agents:\n  main:\n    - calls: [{tool: stuck, args: {n: 1}}]\n" + tools + "inputs:\n  - {at: 0s, submit: go}\n  - {at: 500ms, cancel: main}\n",
			time.Second, "interrupted", 1, []string{`"status":"cancelled"`}},
		{"budget", "limits: {max_requests: 1}\nagents:\n  main:\n    - {text: one two three four five six, rate: 10}\ninputs:\n  - {at: 0s, submit: go}\n",
			350 * time.Millisecond, "budget_exhausted", 1, []string{`reason="budget" partial="true"`}},
		{"debounce", "agents:\n  main:\n    - {text: one two three four five six, rate: 10}\n    - {text: adjusted}\ninputs:\n  - {at: 0s, submit: go}\n  - {at: 350ms, interject: wait}\n",
			400 * time.Millisecond, "completed", 2, []string{"wait", "adjusted"}},
		{"child", "agents:\n  main:\n    - calls: [{delegate: kid, prompt: work}]\n    - {text: parent done}\n  kid:\n    - {text: kid works slowly here, rate: 5}\n    - {text: never asked}\ninputs:\n  - {at: 0s, submit: go}\n",
			time.Second, "completed", 2, []string{"kid works ", "kid works slowly here", `"summary":"kid works slowly here"`, "parent done"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := mustLoad(t, "name: "+c.name+"\n"+c.src)
			m, err := New(s, Options{Idempotent: []string{"slow"}})
			if err != nil {
				t.Fatal(err)
			}
			m.Advance(c.crash)
			m.Recover()
			r, err := m.Finish()
			if err != nil {
				t.Fatal(err)
			}
			if !r.Passed {
				t.Fatalf("violations: %v", r.Violations)
			}
			var all []kernel.Message
			for id := 0; id < r.Agents; id++ {
				all = append(all, m.Core().View(kernel.AgentID(id)).History...)
			}
			if got := r.Outcomes[scenario.RootScript]; got != c.outcome || r.LLMRequests[scenario.RootScript] != c.requests {
				t.Fatalf("outcome %s after %d requests, want %s after %d", got, r.LLMRequests[scenario.RootScript], c.outcome, c.requests)
			}
			for _, sub := range c.contains {
				if !inHistory(all, sub) {
					t.Errorf("no message contains %q", sub)
				}
			}
			if inHistory(all, "never asked") {
				t.Error("a restarted request got the script's next reply")
			}
		})
	}
}

// inHistory reports whether a message of h, or a call's arguments, holds
// sub.
func inHistory(h []kernel.Message, sub string) bool {
	for _, m := range h {
		if strings.Contains(m.Content, sub) {
			return true
		}
		for _, c := range m.ToolCalls {
			if strings.Contains(c.Arguments, sub) {
				return true
			}
		}
	}
	return false
}
