package live_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/live"
	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/scenarios"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
)

// TestDifferentialSimVsLive runs a nested-delegation scenario twice: through
// the simulator, and through the live driver under testing/synctest with an
// in-memory model and in-memory tools that follow the same scripts at the
// same virtual times (no network). Both must end with the same outcomes and
// the same transcripts. The scenario avoids same-instant coincidences: the
// simulator orders those by insertion, synctest by the scheduler.
func TestDifferentialSimVsLive(t *testing.T) {
	all, err := scenario.LoadFS(scenarios.FS, ".", "scenarios")
	if err != nil {
		t.Fatal(err)
	}
	var s *scenario.Scenario
	for _, x := range all {
		if x.Name == "nested-delegation" {
			s = x
		}
	}
	if s == nil {
		t.Fatal("scenario nested-delegation is missing")
	}

	// 1. The simulator. Each agent's transcript is read when its turn
	// ends (a child is freed after), the root's at the end.
	simHist := map[string][]string{}
	m, err := sim.New(s, sim.Options{Observe: func(si sim.StepInfo) {
		for _, e := range si.Effects {
			if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded {
				v := si.Core.View(e.Life.Agent)
				simHist[v.Path] = canonical(v.History)
			}
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Finish()
	if err != nil || !res.Passed {
		t.Fatalf("simulator: %v %v", err, res.Violations)
	}

	// 2. The live driver, in a synctest bubble.
	liveOut := map[string]string{}
	liveHist := map[string][]string{}
	synctest.Test(t, func(t *testing.T) {
		w := newScriptedWorld(s)
		var mu sync.Mutex // the observer runs on the driver's goroutine
		read := func(a kernel.AgentView) {
			o, _ := a.Outcome()
			mu.Lock()
			liveOut[a.Path()] = o.String()
			liveHist[a.Path()] = canonical(a.History())
			mu.Unlock()
		}
		d, err := live.New(live.Config{Kernel: s.KernelConfig(), Model: w, Tools: w, Observer: func(st ports.Step) {
			for _, e := range st.Effects {
				if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeTurnEnded {
					read(st.Kernel.Agent(e.Life.Agent))
				}
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		start := time.Now()
		for _, in := range s.Inputs {
			time.Sleep(in.At - time.Since(start))
			switch {
			case in.Submit != "":
				err = d.Submit(t.Context(), in.Submit)
			case in.Interject != "":
				err = d.Interject(t.Context(), in.Interject)
			case in.Cancel != "":
				var id kernel.AgentID
				var ok bool
				if err = d.Inspect(t.Context(), func(k *kernel.Kernel) { id, ok = k.Find(in.Cancel) }); err == nil && !ok {
					err = fmt.Errorf("no agent %s at %v", in.Cancel, in.At)
				}
				if err == nil {
					err = d.Cancel(t.Context(), id, in.Turn)
				}
			}
			if err != nil {
				t.Fatalf("input %+v: %v", in, err)
			}
		}
		// Let the tree finish, then stop an idle driver (a shutdown then
		// changes nothing).
		const poll = 100 * time.Millisecond
		for {
			time.Sleep(poll)
			quiet := false
			if err := d.Inspect(t.Context(), func(k *kernel.Kernel) { quiet = k.Quiescent() }); err != nil {
				t.Fatal(err)
			}
			if quiet {
				break
			}
		}
		// Virtual time: the poll sees quiescence at the first poll after the
		// instant the simulator reports, never before it and at most one
		// poll interval later.
		if at := time.Since(start); at < res.QuiescentAt || at > res.QuiescentAt+poll {
			t.Errorf("live tree seen quiescent at %v, simulated quiescent at %v (polling every %v)", at, res.QuiescentAt, poll)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		read(d.Kernel().Agent(kernel.Root))
	})

	// 3. Compare.
	if len(liveOut) != len(res.Outcomes) {
		t.Fatalf("agents: live %v, simulated %v", liveOut, res.Outcomes)
	}
	for path, want := range res.Outcomes {
		if got := liveOut[path]; got != want {
			t.Errorf("%s: live outcome %s, simulated %s", path, got, want)
		}
	}
	for path, want := range simHist {
		got := liveHist[path]
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: transcripts differ\nlive:\n  %s\nsimulated:\n  %s", path, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
	if res.Outcomes["main/planner/tester"] != "interrupted" || len(simHist["main/planner"]) != 5 {
		t.Fatalf("the scenario did not exercise what it should: %v", res.Outcomes)
	}
}

// canonical renders a history with tool call ids renamed by first
// appearance: the two worlds name calls differently, nothing else may differ.
func canonical(h []kernel.Message) []string {
	ids := map[string]string{}
	id := func(s string) string {
		if _, ok := ids[s]; !ok {
			ids[s] = fmt.Sprintf("id%d", len(ids)+1)
		}
		return ids[s]
	}
	var out []string
	for _, m := range h {
		line := string(m.Role) + " " + fmt.Sprintf("%q", m.Content)
		for _, c := range m.ToolCalls {
			line += fmt.Sprintf(" call[%s %s %s]", id(c.ID), c.Name, c.Arguments)
		}
		if m.ToolCallID != "" {
			line += " answers " + id(m.ToolCallID)
		}
		line += fmt.Sprintf(" partial=%v marker=%v synthetic=%v interjection=%v", m.Partial, m.Marker, m.Synthetic, m.Interjection)
		out = append(out, line)
	}
	return out
}

// scriptedWorld is the scenario's world as ports.Model and ports.Tools: each
// agent answers from its script (by path), streaming text and calls at the
// scenario's first-token latency and rate; tools take their duration and
// react to a cancel as scripted.
type scriptedWorld struct {
	s      *scenario.Scenario
	mu     sync.Mutex
	cursor map[string]int
	calls  int
}

func newScriptedWorld(s *scenario.Scenario) *scriptedWorld {
	return &scriptedWorld{s: s, cursor: map[string]int{}}
}

// scriptOf maps "main/planner/tester#2" to "tester".
func scriptOf(path string) string {
	name := path[strings.LastIndex(path, "/")+1:]
	if i := strings.IndexByte(name, '#'); i >= 0 {
		name = name[:i]
	}
	return name
}

// sleep waits d or until ctx is cancelled.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *scriptedWorld) Stream(ctx context.Context, req ports.Request, sink ports.Sink) error {
	w.mu.Lock()
	script := w.s.Agents[scriptOf(req.Path)]
	n := w.cursor[req.Path]
	w.cursor[req.Path] = n + 1
	reply := scenario.Reply{FirstToken: scenario.DefaultFirstToken, Rate: scenario.DefaultRate}
	if n < len(script) {
		reply = script[n]
	}
	type frag struct {
		text string
		call *kernel.CallDelta
	}
	var plan []frag
	text := reply.Text
	for len(text) > 0 {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			plan = append(plan, frag{text: text})
			break
		}
		plan = append(plan, frag{text: text[:i+1]})
		text = text[i+1:]
	}
	for i, c := range reply.Calls {
		w.calls++
		id := fmt.Sprintf("live_%d", w.calls)
		name, args := c.Tool, c.ArgsRaw
		switch {
		case c.Delegate != "":
			b, _ := json.Marshal(struct {
				Task string `json:"task"`
				Name string `json:"name"`
			}{c.Prompt, c.Delegate})
			name, args = "delegate", string(b)
		case args == "" && c.Args != nil:
			b, _ := json.Marshal(c.Args)
			args = string(b)
		case args == "":
			args = "{}"
		}
		half := len(args) / 2
		plan = append(plan,
			frag{call: &kernel.CallDelta{Index: i, ID: id, Name: name}},
			frag{call: &kernel.CallDelta{Index: i, Args: args[:half]}},
			frag{call: &kernel.CallDelta{Index: i, Args: args[half:]}})
	}
	w.mu.Unlock()
	interval := time.Duration(float64(time.Second) / reply.Rate)
	wait := reply.FirstToken
	for _, f := range plan {
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		if f.call != nil {
			sink.Call(*f.call)
		} else {
			sink.Text(f.text)
		}
		wait = interval
	}
	return sleep(ctx, wait)
}

func (w *scriptedWorld) Run(ctx context.Context, call ports.Call) ports.ToolResult {
	spec, ok := w.s.Tools[call.Name]
	if !ok {
		return ports.ToolResult{Status: kernel.ToolError, Content: "unknown tool " + call.Name}
	}
	start := time.Now()
	if err := sleep(ctx, spec.Duration); err != nil {
		switch spec.OnCancel {
		case scenario.CancelIgnore:
			time.Sleep(spec.Duration - time.Since(start))
		case scenario.CancelDelay:
			time.Sleep(spec.CancelDelay)
			return ports.ToolResult{Status: kernel.ToolCancelled}
		default:
			return ports.ToolResult{Status: kernel.ToolCancelled}
		}
	}
	if spec.Error != "" {
		return ports.ToolResult{Status: kernel.ToolError, Content: spec.Error}
	}
	return ports.ToolResult{Status: kernel.ToolOK, Content: spec.Result}
}
