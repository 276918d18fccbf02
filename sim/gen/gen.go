// Package gen draws random simulator worlds with pgregory.net/rapid: trees
// of agents up to a depth, scripts with text, parallel tool calls and
// delegations, tools that honour, ignore or delay a cancel, swarm-selected
// faults, and bursts of user inputs at random virtual times.
//
// Structure is drawn through rapid, not from one seed fed to a private PRNG,
// so a failing world shrinks: to fewer levels, scripts, replies, calls,
// faults and inputs, and to shorter texts and durations. Times sit on a 10ms
// grid and token intervals are 10–100ms, so inputs, chunks, tool results and
// timers often fall on the same virtual instant.
//
// World and Script draw whole worlds (the property suites of package sim);
// Around keeps a program's own scripts, tools and limits and draws what the
// user and a faulty world do to them (Inputs, Faults). Example_property is a
// user's own rapid property test built that way; the oracle it runs is
// specified in docs/semantics.md.
package gen

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
	"pgregory.net/rapid"
)

// Options bound the worlds a generator draws.
type Options struct {
	// MaxDepth is the deepest delegation chain (0..MaxDepth); worlds draw a
	// depth from 0 (the root alone) to it.
	MaxDepth int
	// MaxInputs bounds the user inputs after the first submission.
	MaxInputs int
	// Faults enables fault injection (swarm: each world still draws which
	// kinds are on and how many).
	Faults bool
	// Shutdowns lets an episode (rarely) shut the session down: every turn
	// is aborted with reason shutdown and later input is refused.
	Shutdowns bool
	// MaxAgents bounds the agents a world can spawn (every delegation its
	// scripts hold carried out, none refused); 0 means DefaultMaxAgents.
	MaxAgents int
}

// DefaultOptions are what the property suites use.
func DefaultOptions(maxDepth int) Options {
	return Options{MaxDepth: maxDepth, MaxInputs: 14, Faults: true, Shutdowns: true}
}

// MaxDepth is the deepest delegation chain a generated world has (the
// kernel's default max_depth).
const MaxDepth = 8

const grid = 10 * time.Millisecond

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// World draws a whole scenario: scripts, tools, limits, faults and inputs.
func World(o Options) *rapid.Generator[*sim.Scenario] {
	return rapid.Custom(func(t *rapid.T) *sim.Scenario {
		s := Script(o).Draw(t, "script")
		s.Inputs = inputs(s, o).Draw(t, "inputs")
		return s
	})
}

// Script draws a world without user inputs (the state-machine test supplies
// them as actions).
func Script(o Options) *rapid.Generator[*sim.Scenario] {
	o.MaxDepth = min(max(o.MaxDepth, 0), MaxDepth)
	return rapid.Custom(func(t *rapid.T) *sim.Scenario {
		depth := rapid.IntRange(0, o.MaxDepth).Draw(t, "depth")
		s := &sim.Scenario{
			Name:   "generated",
			Seed:   uint64(rapid.IntRange(1, 1<<20).Draw(t, "seed")),
			Agents: map[string]sim.Script{},
			Tools:  map[string]sim.ToolSpec{},
		}
		s.Limits = drawLimits(t, depth)
		nTools := rapid.IntRange(1, 3).Draw(t, "tools")
		tools := make([]string, nTools)
		for i := range tools {
			tools[i] = "t" + strconv.Itoa(i)
			s.Tools[tools[i]] = drawTool(t, tools[i], s.Limits)
		}
		// Scripts per level: main at 0; one or two per level below.
		levels := [][]string{{sim.RootScript}}
		for l := 1; l <= depth; l++ {
			n := rapid.IntRange(1, 2).Draw(t, fmt.Sprintf("scripts_l%d", l))
			var names []string
			for i := 0; i < n; i++ {
				names = append(names, string(rune('a'+i))+strconv.Itoa(l))
			}
			levels = append(levels, names)
		}
		tree := &fanout{depth: depth, mult: map[string]int{sim.RootScript: 1}, agents: depth + 1, max: cmp.Or(o.MaxAgents, DefaultMaxAgents)}
		for l, names := range levels {
			for _, name := range names {
				var next []string
				if l+1 < len(levels) {
					next = levels[l+1]
				}
				s.Agents[name] = drawScript(t, name, l, next, tools, s.Limits, tree)
			}
		}
		if o.Faults {
			s.Faults = drawFaults(t, s)
		}
		return s
	})
}

func drawLimits(t *rapid.T, depth int) kernel.Limits {
	l := kernel.DefaultLimits()
	// The first value of each list is the benign default shrinking moves
	// towards; repeated entries make it likelier, the rest are the harsh
	// values that make timeouts, refusals and budgets happen.
	l.Grace = rapid.SampledFrom([]time.Duration{ms(500), ms(100), 2 * time.Second}).Draw(t, "grace")
	l.FirstTokenTimeout = rapid.SampledFrom([]time.Duration{30 * time.Second, 30 * time.Second, 2 * time.Second, ms(500)}).Draw(t, "first_token_timeout")
	l.StallTimeout = rapid.SampledFrom([]time.Duration{30 * time.Second, time.Second, ms(200), 30 * time.Second, time.Second}).Draw(t, "stall_timeout")
	l.ToolTimeout = rapid.SampledFrom([]time.Duration{2 * time.Minute, 5 * time.Second, time.Second}).Draw(t, "tool_timeout")
	l.TurnTimeout = rapid.SampledFrom([]time.Duration{10 * time.Minute, 20 * time.Second, 3 * time.Second}).Draw(t, "turn_timeout")
	l.Debounce = rapid.SampledFrom([]time.Duration{ms(100), 0, ms(50)}).Draw(t, "debounce")
	l.MaxDepth = rapid.SampledFrom([]int{MaxDepth, MaxDepth, depth, max(depth-1, 0)}).Draw(t, "max_depth")
	l.MaxChildren = rapid.SampledFrom([]int{16, 16, 2, 1, 3}).Draw(t, "max_children")
	l.MaxRequests = rapid.SampledFrom([]int{50, 50, 3, 2, 1}).Draw(t, "max_requests")
	// The caps on what a model sends, small now and then so they bite: a
	// reply holds up to a dozen words and a few calls of 30-70 bytes each.
	l.MaxMessageBytes = rapid.SampledFrom([]int{1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 40, 120}).Draw(t, "max_message_bytes")
	l.MaxCalls = rapid.SampledFrom([]int{64, 64, 64, 1, 2}).Draw(t, "max_calls")
	l.MaxParallelTools = rapid.SampledFrom([]int{8, 8, 8, 1, 2}).Draw(t, "max_parallel_tools")
	return l
}

func drawTool(t *rapid.T, name string, l kernel.Limits) sim.ToolSpec {
	tool := sim.ToolSpec{
		// One choice is exactly the tool deadline: result and timeout then
		// race at the same instant.
		Duration: rapid.SampledFrom([]time.Duration{ms(100), 0, ms(10), ms(500), 2 * time.Second, 10 * time.Second, time.Minute, l.ToolTimeout}).Draw(t, name+"_duration"),
		Result:   "r-" + name,
	}
	if rapid.IntRange(0, 9).Draw(t, name+"_fails") == 9 {
		tool.Error, tool.Result = "e-"+name, ""
	}
	switch rapid.SampledFrom([]int{0, 1, 2, 3, 4, 1}).Draw(t, name+"_on_cancel") {
	case 1:
		tool.OnCancel = sim.CancelIgnore
	case 2:
		tool.OnCancel, tool.CancelDelay = sim.CancelDelay, ms(50)
	case 3:
		tool.OnCancel, tool.CancelDelay = sim.CancelDelay, ms(500)
	case 4:
		tool.OnCancel, tool.CancelDelay = sim.CancelDelay, 5*time.Second
	}
	return tool
}

// words are what replies say; two hold characters JSON must escape (a tab,
// a quote, a line separator) or that are not ASCII, so results carry them.
var words = []string{"alpha ", "beta ", "gamma ", "delta ", "eps ", "zeta ", "eta ", "theta ", "t\tq\"u ", "é\u2028x "}

// DefaultMaxAgents bounds the agents a generated world can spawn unless
// Options.MaxAgents says otherwise.
const DefaultMaxAgents = 32

// fanout tracks how many agents a world's scripts can spawn while they are
// drawn, level by level from the root: mult is how many instances a script
// can have (a delegation to it from a script with k instances adds k), and
// agents how many the tree holds if no further delegation is drawn (each
// new instance brings its chain of first replies down to the last level).
type fanout struct {
	depth  int
	mult   map[string]int
	agents int
	max    int
}

// extra is how many more delegations a script at level with m instances
// may draw for one reply without the tree passing its bound.
func (f *fanout) extra(level, m int) int {
	cost := m * (f.depth - level)
	if cost <= 0 {
		return 0
	}
	return max(f.max-f.agents, 0) / cost
}

// drawScript draws one agent's replies. Any reply may delegate: the first
// reply of a script above the last level always delegates to the next
// level's first script (so the chain reaches the drawn depth unless
// shrinking cuts it), and any reply may add delegations to the next level —
// sometimes up to max_children and one beyond, so refusals and fan-outs of
// three or more children happen — within the world's bound on agents.
func drawScript(t *rapid.T, name string, level int, next, tools []string, lim kernel.Limits, tree *fanout) sim.Script {
	m := tree.mult[name]
	n := rapid.IntRange(1, 4).Draw(t, name+"_replies")
	script := make(sim.Script, n)
	for i := range script {
		key := fmt.Sprintf("%s_r%d", name, i)
		// One first-token choice is exactly the first-token deadline: the
		// chunk and the timeout race at the same instant.
		r := sim.Reply{
			FirstToken: rapid.SampledFrom([]time.Duration{ms(200), ms(10), ms(50), ms(100), time.Second, lim.FirstTokenTimeout}).Draw(t, key+"_first"),
			Rate:       float64(rapid.SampledFrom([]int{50, 10, 20, 100}).Draw(t, key+"_rate")),
		}
		// A delegating first reply says little before its calls, so the tree
		// grows before the user's inputs arrive; other replies say more.
		lengths := []int{3, 0, 1, 6, 12}
		if i == 0 && len(next) > 0 {
			lengths = []int{1, 0, 2}
		}
		var text strings.Builder
		for w := rapid.SampledFrom(lengths).Draw(t, key+"_words"); w > 0; w-- {
			text.WriteString(words[rapid.IntRange(0, len(words)-1).Draw(t, key+"_word")])
		}
		r.Text = strings.TrimSpace(text.String())
		if i == 0 && len(next) > 0 {
			r.Calls = append(r.Calls, sim.Call{Delegate: next[0], Prompt: "task for " + next[0]})
			tree.mult[next[0]] += m
		}
		if len(next) > 0 {
			// Mostly none; now and then a few, or as many as the
			// children a turn may have and one more.
			k := rapid.SampledFrom([]int{0, 0, 0, 0, 0, 1, 2, 3, lim.MaxChildren + 1}).Draw(t, key+"_children")
			for k = min(k, tree.extra(level, m)); k > 0; k-- {
				child := rapid.SampledFrom(next).Draw(t, key+"_child")
				prompt := "task for " + child
				if rapid.IntRange(0, 15).Draw(t, key+"_no_task") == 0 {
					prompt = "" // a delegation without a task: malformed
				}
				r.Calls = append(r.Calls, sim.Call{Delegate: child, Prompt: prompt})
				tree.mult[child] += m
				tree.agents += m * (tree.depth - level)
			}
		}
		for c := rapid.SampledFrom([]int{1, 0, 2, 3}).Draw(t, key+"_tools"); c > 0; c-- {
			tool := rapid.SampledFrom(tools).Draw(t, key+"_tool")
			r.Calls = append(r.Calls, sim.Call{Tool: tool, Args: map[string]any{"n": c}})
		}
		if i == n-1 && len(r.Calls) > 0 && rapid.Bool().Draw(t, key+"_end_with_text") {
			// Keep some turns ending on text rather than the script running out.
			script = append(script, sim.Reply{Text: "done", FirstToken: ms(10), Rate: 50})
		}
		script[i] = r
	}
	return script
}

// drawFaults is swarm testing: each world draws which fault kinds are on
// (possibly none) and how many of each, so some runs are fault-free and some
// saturated with one kind.
func drawFaults(t *rapid.T, s *sim.Scenario) []sim.Fault {
	names := slices.Sorted(maps.Keys(s.Agents))
	tools := slices.Sorted(maps.Keys(s.Tools))
	var out []sim.Fault
	for _, kind := range sim.FaultKinds() {
		// Each kind is on in about one world of four; a world with a kind
		// on gets one to three of it.
		if rapid.IntRange(0, 3).Draw(t, "fault_"+string(kind)+"_on") != 3 {
			continue
		}
		for n := rapid.IntRange(1, 3).Draw(t, "fault_"+string(kind)+"_n"); n > 0; n-- {
			key := "fault_" + string(kind)
			f := sim.Fault{
				At:    grid * time.Duration(rapid.IntRange(0, 300).Draw(t, key+"_at")),
				Agent: rapid.SampledFrom(names).Draw(t, key+"_agent"),
				Fault: kind,
			}
			switch kind {
			case sim.FaultStreamError, sim.FaultDisconnect:
				f.After = rapid.IntRange(0, 5).Draw(t, key+"_after")
			case sim.FaultRateLimit:
				f.Attempts = rapid.IntRange(1, sim.MaxRetries+1).Draw(t, key+"_attempts")
				f.RetryAfter = rapid.SampledFrom([]time.Duration{ms(100), time.Second}).Draw(t, key+"_retry_after")
			case sim.FaultLate:
				f.Delay = rapid.SampledFrom([]time.Duration{ms(100), time.Second, 5 * time.Second}).Draw(t, key+"_delay")
			}
			if kind == sim.FaultToolPanic || ((kind == sim.FaultDuplicate || kind == sim.FaultLate) && rapid.Bool().Draw(t, key+"_on_tool")) {
				if kind != sim.FaultToolPanic || rapid.Bool().Draw(t, key+"_named") {
					f.Tool = rapid.SampledFrom(tools).Draw(t, key+"_tool")
				}
			}
			out = append(out, f)
		}
	}
	return out
}

// inputs draws the user's inputs: a submission at 0, then submissions,
// interjections and cancels (of the root or any script's agent, sometimes
// bound to a turn), singly or in bursts. About half the times are anchors —
// instants the scripts make interesting (a chunk of a first reply along the
// delegation chain, a stream's end, a tool's result or deadline, a first-
// token deadline) or just after one — so inputs land mid-stream and on the
// same instant as chunks, results and timers; the rest come from a spread of
// phases.
func inputs(s *sim.Scenario, o Options) *rapid.Generator[[]sim.Input] {
	names := slices.Sorted(maps.Keys(s.Agents))
	anchors, deep := findAnchors(s, 128)
	return rapid.Custom(func(t *rapid.T) []sim.Input {
		ins := []sim.Input{{At: 0, Submit: "s0"}}
		at := time.Duration(0)
		n := 0
		// Episodes: an instant, then a burst of inputs at it or just after.
		episodes := rapid.IntRange(0, (o.MaxInputs+1)/2).Draw(t, "episodes")
		for e := 0; e < episodes && n < o.MaxInputs; e++ {
			key := "episode" + strconv.Itoa(e)
			var when time.Duration
			// The first episode, now and then: later ones find the tree
			// already cut by earlier ones.
			deepCancel := e == 0 && len(deep) > 0 && rapid.IntRange(0, 2).Draw(t, key+"_deep") == 0
			switch {
			case deepCancel:
				// Esc while a tool runs deep in the tree (depth 4 and more):
				// the abort must reach down there in one step.
				when = deep[rapid.IntRange(0, len(deep)-1).Draw(t, key+"_deep_at")]
			case len(anchors) > 0 && rapid.Bool().Draw(t, key+"_anchored"):
				when = anchors[rapid.IntRange(0, len(anchors)-1).Draw(t, key+"_anchor")] +
					rapid.SampledFrom([]time.Duration{0, ms(1), grid}).Draw(t, key+"_after")
			case e == 0 && len(s.Agents) > 1:
				// Without an anchor, the first episode usually waits for the
				// tree to grow.
				phase := rapid.SampledFrom([]int{100, 60, 150, 0, 30, 250}).Draw(t, key+"_phase")
				when = at + grid*time.Duration(phase+rapid.IntRange(0, 9).Draw(t, key+"_jitter"))
			default:
				phase := rapid.SampledFrom([]int{30, 0, 10, 50, 20, 100, 200, 400}).Draw(t, key+"_phase")
				when = at + grid*time.Duration(phase+rapid.IntRange(0, 9).Draw(t, key+"_jitter"))
			}
			at = max(at, when)
			kind := rapid.SampledFrom([]int{0, 2, 1, 3, 2}).Draw(t, key+"_kind")
			if deepCancel {
				kind = 0
			}
			if o.Shutdowns && rapid.IntRange(0, 15).Draw(t, key+"_shutdown") == 0 {
				kind = 4 // rare: it ends the session
			}
			burst := rapid.SampledFrom([]int{1, 2, 3, 1}).Draw(t, key+"_burst")
			for b := 0; b < burst && n < o.MaxInputs; b++ {
				n++
				bkey := key + "_" + strconv.Itoa(b)
				in := sim.Input{At: when}
				if b > 0 {
					// The same key pressed again (rapid Esc), or something else.
					in.At += grid * time.Duration(rapid.SampledFrom([]int{0, 3, 0, 1, 6, 12}).Draw(t, bkey+"_gap"))
					if !rapid.Bool().Draw(t, bkey+"_same") {
						kind = rapid.SampledFrom([]int{0, 2, 1, 3}).Draw(t, bkey+"_kind")
					}
				}
				switch kind {
				case 0:
					in.Cancel = sim.RootScript
				case 1:
					in.Cancel = rapid.SampledFrom(names).Draw(t, bkey+"_target")
					if rapid.IntRange(0, 5).Draw(t, bkey+"_bound") == 5 {
						in.Turn = uint64(rapid.IntRange(1, 3).Draw(t, bkey+"_turn"))
					}
				case 2:
					in.Interject = "i" + strconv.Itoa(n)
				case 3:
					in.Submit = "s" + strconv.Itoa(n)
				case 4:
					in.Shutdown = true
				}
				ins = append(ins, in)
			}
		}
		// Inputs happen in time order; equal times keep their drawn order.
		sort.SliceStable(ins, func(a, b int) bool { return ins[a].At < ins[b].At })
		return ins
	})
}

// findAnchors computes up to limit instants the scripts make interesting, by
// following the first reply of each script down the delegation chain from a
// submission at 0, as the simulator would run it undisturbed: every chunk's
// arrival, each stream's end, each tool's result and deadline, and each
// request's first-token deadline. Sorted, without duplicates. deep are the
// instants a tool runs in an agent at depth 4 or more that is Tooling (its
// reply delegates nothing).
func findAnchors(s *sim.Scenario, limit int) (anchors, deep []time.Duration) {
	seen := map[time.Duration]bool{}
	var out []time.Duration
	add := func(d time.Duration) {
		if !seen[d] && len(out) < limit {
			seen[d] = true
			out = append(out, d)
		}
	}
	var visit func(script string, start time.Duration, depth int)
	visit = func(script string, start time.Duration, depth int) {
		replies := s.Agents[script]
		if len(replies) == 0 || depth > MaxDepth || len(out) >= limit {
			return
		}
		r := replies[0]
		interval, chunks := r.Interval(), r.Chunks() // as the simulator streams it
		first := start + r.FirstToken
		// The first few chunks and the last: enough to land mid-stream and
		// on a chunk, without crowding out the deeper levels.
		for k := 0; k < chunks; k++ {
			if k < 3 || k == chunks-1 {
				add(first + time.Duration(k)*interval)
			}
		}
		end := first + time.Duration(chunks)*interval
		add(end)
		add(start + s.Limits.FirstTokenTimeout)
		delegates := slices.ContainsFunc(r.Calls, func(c sim.Call) bool { return c.Delegate != "" })
		for _, c := range r.Calls {
			if c.Tool != "" {
				d := s.Tools[c.Tool].Duration
				add(end + d/2) // the tool is running: the agent is Tooling
				add(end + d)
				add(end + s.Limits.ToolTimeout)
				if depth >= 4 && !delegates && d > 0 {
					deep = append(deep, end+d/2)
				}
			}
		}
		for _, c := range r.Calls {
			if c.Delegate != "" {
				visit(c.Delegate, end, depth+1)
			}
		}
	}
	visit(sim.RootScript, 0, 0)
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out, deep
}
