package sim

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/scenario"
)

// TestStreamTokens: the world streams a reply's text a token at a time, each
// token a word with the space after it, and the chunks concatenate back to
// the text (leading, doubled and trailing spaces included); calls follow
// the text.
func TestStreamTokens(t *testing.T) {
	texts := []string{"one", "one two", "one two ", " lead", "a  b", "  ", "x y z  w   ", "a b c d e f g h"}
	for _, fault := range []string{"", "faults:\n  - {at: 0s, agent: main, fault: duplicate_event}\n"} {
		for _, text := range texts {
			streamTokens(t, text, fault)
		}
	}
}

// streamTokens runs one reply of text (under fault, if any) and checks its
// chunks; a chunk delivered twice (a duplicate_event fault) counts once.
func streamTokens(t *testing.T, text, fault string) {
	t.Helper()
	src := "name: tokens\nagents:\n  main:\n    - text: " + string(kernel.AppendJSONString(nil, text)) + "\n      calls: [{tool: t}]\n    - text: done\ntools:\n  t: {duration: 1s, result: ok}\ninputs:\n  - {at: 0s, submit: go}\n" + fault
	s := mustLoad(t, src)
	var got []string
	seen := map[uint32]bool{}
	calls, dups, afterCall := 0, 0, false
	mustRun(t, s, Options{Observe: func(si StepInfo) {
		ev := si.Event
		if ev.Kind != kernel.EvLLMDelta || ev.Op != 2 {
			return // the first request only
		}
		if seen[ev.Chunk] {
			dups++ // each chunk once
			return
		}
		seen[ev.Chunk] = true
		if ev.Call != nil {
			calls++
			return
		}
		if calls > 0 {
			afterCall = true
		}
		got = append(got, ev.Text)
	}})
	want := 0
	for rest := text; rest != ""; rest = rest[len(nextToken(rest)):] {
		want++
	}
	if (fault != "") != (dups > 0) {
		t.Errorf("text %q (fault %q): %d chunks delivered twice", text, fault, dups)
	}
	if joined := strings.Join(got, ""); joined != text || len(got) != want || calls != 3 || afterCall {
		t.Errorf("text %q (fault %q): streamed %q (%d chunks, want %d) and %d call fragments (want 3, after the text)", text, fault, got, len(got), want, calls)
	}
}

// TestDeadItemsAreNoPendingWork: a stopped timer beyond the run's time limit
// (a turn deadline longer than the limit) is not work pending; the run ends
// when its last live event is delivered, with no liveness violation.
func TestDeadItemsAreNoPendingWork(t *testing.T) {
	s := mustLoad(t, "name: long-deadline\nlimits: {turn_timeout: 2h}\nagents:\n  main:\n    - text: done\ninputs:\n  - {at: 0s, submit: go}\n")
	r := mustRun(t, s, Options{TimeLimit: time.Hour})
	if !r.Passed || r.End > time.Second {
		t.Fatalf("end %v, violations %v", r.End, r.Violations)
	}
}

// hidesChildren is a broken loop (test code): it drops every effect about an
// agent other than the root, so the oracle never sees the child it spawned.
type hidesChildren struct{ Core }

func (h hidesChildren) Step(ev kernel.Event) []kernel.Effect {
	return slices.DeleteFunc(h.Core.Step(ev), func(e kernel.Effect) bool {
		return e.Agent != kernel.Root || e.Life.Child != 0
	})
}

// TestFinishSeesEveryAgent: an agent whose every effect was hidden is still
// judged at the end of the run (and the result lists it) instead of the run
// panicking on an agent the oracle never observed.
func TestFinishSeesEveryAgent(t *testing.T) {
	s := mustLoad(t, "name: hidden-child\nlimits: {turn_timeout: 10s}\nagents:\n  main:\n    - calls: [{delegate: kid, prompt: go}]\n    - text: done\n  kid:\n    - text: hi\ninputs:\n  - {at: 0s, submit: go}\n")
	r := mustRun(t, s, Options{Core: func(cfg kernel.Config) (Core, error) {
		c, err := KernelCore(cfg)
		return hidesChildren{c}, err
	}})
	if r.Passed || r.Agents != 2 || len(r.LLMRequests) != 2 {
		t.Fatalf("passed=%v agents=%d requests=%v violations=%v", r.Passed, r.Agents, r.LLMRequests, r.Violations)
	}
}

// TestSeedFullRange: every uint64 seed loads, and a scenario's YAML (which a
// trace header embeds for replay) loads back to the same seed.
func TestSeedFullRange(t *testing.T) {
	for _, seed := range []uint64{1, 7, 1 << 63, 1<<64 - 1} { // 0 is "unset": the default 1
		s := mustLoad(t, "name: s\nseed: "+strconv.FormatUint(seed, 10)+"\nagents:\n  main: []\n")
		back := mustLoad(t, string(s.YAML()))
		if s.Seed != seed || back.Seed != seed {
			t.Errorf("seed %d loads as %d, its YAML as %d", seed, s.Seed, back.Seed)
		}
	}
	for _, bad := range []string{"-1", "18446744073709551616", "1.5", "x"} {
		if _, err := scenario.Load("bad.yaml", []byte("name: s\nseed: "+bad+"\nagents:\n  main: []\n")); err == nil || !strings.Contains(err.Error(), "bad.yaml:2") {
			t.Errorf("seed %s: %v, want an error at bad.yaml:2", bad, err)
		}
	}
}

// reusesOps is a broken loop (test code): every LLM request after the first
// goes out under the first request's op id.
type reusesOps struct {
	Core
	first kernel.OpID
}

func (r *reusesOps) Step(ev kernel.Event) []kernel.Effect {
	out := r.Core.Step(ev)
	for i := range out {
		if out[i].Kind != kernel.EffStartLLM {
			continue
		}
		if r.first == 0 {
			r.first = out[i].Op
		} else {
			out[i].Op = r.first
		}
	}
	return out
}

// TestOpStartedTwice: an op id started again is reported (I9), not silently
// taken as a new op.
func TestOpStartedTwice(t *testing.T) {
	s := mustLoad(t, "name: reuse\nagents:\n  main:\n    - calls: [{tool: t}]\n    - text: done\ntools:\n  t: {duration: 1s, result: ok}\ninputs:\n  - {at: 0s, submit: go}\n")
	r := mustRun(t, s, Options{Core: func(cfg kernel.Config) (Core, error) {
		c, err := KernelCore(cfg)
		return &reusesOps{Core: c}, err
	}})
	for _, v := range r.Violations {
		if v.Invariant == "I9" && strings.Contains(v.Detail, "started twice") {
			return
		}
	}
	t.Fatalf("no I9 'started twice' in %v", r.Violations)
}

// TestReplayKeepsRunOptions: a run stopped by its time or event limit
// replays byte for byte: the header records the limits it ran with.
func TestReplayKeepsRunOptions(t *testing.T) {
	s := mustLoad(t, "name: limited\nagents:\n  main:\n    - text: a b c d e f g h\ninputs:\n  - {at: 0s, submit: go}\n")
	for _, opt := range []Options{{TimeLimit: 300 * time.Millisecond}, {MaxEvents: 4}, {MaxEvents: 6, Permute: true}} {
		var tr bytes.Buffer
		opt.Trace = &tr
		if r := mustRun(t, s, opt); r.Passed {
			t.Fatalf("%+v: the limit did not stop the run", opt)
		}
		rr, err := Replay(&tr)
		if err != nil || !rr.Identical {
			t.Fatalf("%+v: replay %+v, %v", opt, rr, err)
		}
	}
}
