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
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim"
	"github.com/escapement/escapement/sim/scenario"
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
func World(o Options) *rapid.Generator[*scenario.Scenario] {
	script := Script(o)
	return rapid.Custom(func(t *rapid.T) *scenario.Scenario {
		s := script.Draw(t, "script")
		s.Inputs = inputs(s, o).Draw(t, "inputs")
		// Drawn last, so every draw before it (and so every world it
		// leaves at the default) stays what it was.
		s.Limits.MaxParallelRequests = pick(t, []int{8, 8, 8, 1, 2}, "max_parallel_requests")
		return s
	})
}

// Script draws a world without user inputs (the state-machine test supplies
// them as actions).
func Script(o Options) *rapid.Generator[*scenario.Scenario] {
	o.MaxDepth = min(max(o.MaxDepth, 0), MaxDepth)
	return rapid.Custom(func(t *rapid.T) *scenario.Scenario {
		tb := sharedTables()
		depth := intRange(t, 0, o.MaxDepth, "depth")
		s := &scenario.Scenario{
			Name:   "generated",
			Seed:   uint64(tb.seed.Draw(t, "seed")),
			Agents: map[string]scenario.Script{},
			Tools:  map[string]scenario.ToolSpec{},
		}
		s.Limits = drawLimits(t, depth)
		nTools := intRange(t, 1, 3, "tools")
		tools := make([]string, nTools)
		for i := range tools {
			tools[i] = toolName(i)
			s.Tools[tools[i]] = drawTool(t, &tb.tools[i], tools[i], s.Limits)
		}
		// Scripts per level: main at 0; one or two per level below.
		levels := [][]string{{scenario.RootScript}}
		for l := 1; l <= depth; l++ {
			n := intRange(t, 1, 2, tb.levels[l])
			names := make([]string, n)
			for i := range names {
				names[i] = scriptName(l, i)
			}
			levels = append(levels, names)
		}
		tree := &fanout{depth: depth, mult: map[string]int{scenario.RootScript: 1}, agents: depth + 1, max: cmp.Or(o.MaxAgents, DefaultMaxAgents)}
		for l, names := range levels {
			for slot, name := range names {
				var next []string
				if l+1 < len(levels) {
					next = levels[l+1]
				}
				s.Agents[name] = drawScript(t, labelsOfScript(name, l, slot), name, l, next, tools, s.Limits, tree)
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
	l.Grace = pick(t, []time.Duration{ms(500), ms(100), 2 * time.Second}, "grace")
	l.FirstTokenTimeout = pick(t, []time.Duration{30 * time.Second, 30 * time.Second, 2 * time.Second, ms(500)}, "first_token_timeout")
	l.StallTimeout = pick(t, []time.Duration{30 * time.Second, time.Second, ms(200), 30 * time.Second, time.Second}, "stall_timeout")
	l.ToolTimeout = pick(t, []time.Duration{2 * time.Minute, 5 * time.Second, time.Second}, "tool_timeout")
	l.TurnTimeout = pick(t, []time.Duration{10 * time.Minute, 20 * time.Second, 3 * time.Second}, "turn_timeout")
	l.Debounce = pick(t, []time.Duration{ms(100), 0, ms(50)}, "debounce")
	l.MaxDepth = pick(t, []int{MaxDepth, MaxDepth, depth, max(depth-1, 0)}, "max_depth")
	l.MaxChildren = pick(t, []int{16, 16, 2, 1, 3}, "max_children")
	l.MaxRequests = pick(t, []int{50, 50, 3, 2, 1}, "max_requests")
	// The caps on what a model sends, small now and then so they bite: a
	// reply holds up to a dozen words and a few calls of 30-70 bytes each.
	l.MaxMessageBytes = pick(t, []int{1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 40, 120}, "max_message_bytes")
	l.MaxCalls = pick(t, []int{64, 64, 64, 1, 2}, "max_calls")
	l.MaxParallelTools = pick(t, []int{8, 8, 8, 1, 2}, "max_parallel_tools")
	return l
}

func drawTool(t *rapid.T, lb *toolLabels, name string, l kernel.Limits) scenario.ToolSpec {
	tool := scenario.ToolSpec{
		// One choice is exactly the tool deadline: result and timeout then
		// race at the same instant.
		Duration: pick(t, []time.Duration{ms(100), 0, ms(10), ms(500), 2 * time.Second, 10 * time.Second, time.Minute, l.ToolTimeout}, lb.duration),
		Result:   "r-" + name,
	}
	if intRange(t, 0, 9, lb.fails) == 9 {
		tool.Error, tool.Result = "e-"+name, ""
	}
	switch pick(t, []int{0, 1, 2, 3, 4, 1}, lb.onCancel) {
	case 1:
		tool.OnCancel = scenario.CancelIgnore
	case 2:
		tool.OnCancel, tool.CancelDelay = scenario.CancelDelay, ms(50)
	case 3:
		tool.OnCancel, tool.CancelDelay = scenario.CancelDelay, ms(500)
	case 4:
		tool.OnCancel, tool.CancelDelay = scenario.CancelDelay, 5*time.Second
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
func drawScript(t *rapid.T, lb *scriptLabels, name string, level int, next, tools []string, lim kernel.Limits, tree *fanout) scenario.Script {
	m := tree.mult[name]
	n := intRange(t, 1, 4, lb.replies)
	script := make(scenario.Script, n)
	for i := range script {
		key := &lb.reply[i]
		// One first-token choice is exactly the first-token deadline: the
		// chunk and the timeout race at the same instant.
		r := scenario.Reply{
			FirstToken: pick(t, []time.Duration{ms(200), ms(10), ms(50), ms(100), time.Second, lim.FirstTokenTimeout}, key.first),
			Rate:       float64(pick(t, []int{50, 10, 20, 100}, key.rate)),
		}
		// A delegating first reply says little before its calls, so the tree
		// grows before the user's inputs arrive; other replies say more.
		lengths := []int{3, 0, 1, 6, 12}
		if i == 0 && len(next) > 0 {
			lengths = []int{1, 0, 2}
		}
		var text strings.Builder
		for w := pick(t, lengths, key.words); w > 0; w-- {
			text.WriteString(words[intRange(t, 0, len(words)-1, key.word)])
		}
		r.Text = strings.TrimSpace(text.String())
		if i == 0 && len(next) > 0 {
			r.Calls = append(r.Calls, scenario.Call{Delegate: next[0], Prompt: "task for " + next[0]})
			tree.mult[next[0]] += m
		}
		if len(next) > 0 {
			// Mostly none; now and then a few, or as many as the
			// children a turn may have and one more.
			k := pick(t, []int{0, 0, 0, 0, 0, 1, 2, 3, lim.MaxChildren + 1}, key.children)
			for k = min(k, tree.extra(level, m)); k > 0; k-- {
				child := pick(t, next, key.child)
				prompt := "task for " + child
				if intRange(t, 0, 15, key.noTask) == 0 {
					prompt = "" // a delegation without a task: malformed
				}
				r.Calls = append(r.Calls, scenario.Call{Delegate: child, Prompt: prompt})
				tree.mult[child] += m
				tree.agents += m * (tree.depth - level)
			}
		}
		for c := pick(t, []int{1, 0, 2, 3}, key.tools); c > 0; c-- {
			tool := pick(t, tools, key.tool)
			// Tool calls carry ids numbered per message, as some models
			// number them: a later reply repeats them, which the kernel
			// must make unique (delegations keep fresh ids).
			r.Calls = append(r.Calls, scenario.Call{Tool: tool, Args: map[string]any{"n": c}, ID: "t" + strconv.Itoa(c)})
		}
		if i == n-1 && len(r.Calls) > 0 && drawBool(t, key.endWithText) {
			// Keep some turns ending on text rather than the script running out.
			script = append(script, scenario.Reply{Text: "done", FirstToken: ms(10), Rate: 50})
		}
		script[i] = r
	}
	return script
}

// drawFaults is swarm testing: each world draws which fault kinds are on
// (possibly none) and how many of each, so some runs are fault-free and some
// saturated with one kind.
func drawFaults(t *rapid.T, s *scenario.Scenario) []scenario.Fault {
	names := keys.Sorted(s.Agents)
	tools := keys.Sorted(s.Tools)
	var out []scenario.Fault
	for i, kind := range scenario.FaultKinds() {
		key := &sharedTables().faults[i]
		// Each kind is on in about one world of four; a world with a kind
		// on gets one to three of it.
		if intRange(t, 0, 3, key.on) != 3 {
			continue
		}
		for n := intRange(t, 1, 3, key.n); n > 0; n-- {
			f := scenario.Fault{
				At:    grid * time.Duration(intRange(t, 0, 300, key.at)),
				Agent: pick(t, names, key.agent),
				Fault: kind,
			}
			switch kind {
			case scenario.FaultStreamError, scenario.FaultDisconnect:
				f.After = intRange(t, 0, 5, key.after)
			case scenario.FaultRateLimit:
				f.Attempts = intRange(t, 1, sim.MaxRetries+1, key.attempts)
				f.RetryAfter = pick(t, []time.Duration{ms(100), time.Second}, key.retryAfter)
			case scenario.FaultLate:
				f.Delay = pick(t, []time.Duration{ms(100), time.Second, 5 * time.Second}, key.delay)
			}
			if kind == scenario.FaultToolPanic || ((kind == scenario.FaultDuplicate || kind == scenario.FaultLate) && drawBool(t, key.onTool)) {
				if kind != scenario.FaultToolPanic || drawBool(t, key.named) {
					f.Tool = pick(t, tools, key.tool)
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
func inputs(s *scenario.Scenario, o Options) *rapid.Generator[[]scenario.Input] {
	names := keys.Sorted(s.Agents)
	anchors, deep := findAnchors(s, 128)
	return rapid.Custom(func(t *rapid.T) []scenario.Input {
		ins := []scenario.Input{{At: 0, Submit: "s0"}}
		at := time.Duration(0)
		n := 0
		// Episodes: an instant, then a burst of inputs at it or just after.
		episodes := intRange(t, 0, (o.MaxInputs+1)/2, "episodes")
		for e := 0; e < episodes && n < o.MaxInputs; e++ {
			key := labelsOfEpisode(e)
			// The first episode, now and then: later ones find the tree
			// already cut by earlier ones.
			deepCancel := e == 0 && len(deep) > 0 && intRange(t, 0, 2, key.deep) == 0
			when := episodeAt(t, key, e, at, s, anchors, deep, deepCancel)
			at = max(at, when)
			kind := pick(t, []int{0, 2, 1, 3, 2}, key.kind)
			if deepCancel {
				kind = 0
			}
			if o.Shutdowns && intRange(t, 0, 15, key.shutdown) == 0 {
				kind = 4 // rare: it ends the session
			}
			burst := pick(t, []int{1, 2, 3, 1}, key.burst)
			for b := 0; b < burst && n < o.MaxInputs; b++ {
				n++
				var in scenario.Input
				in, kind = burstInput(t, &key.input[b], b, when, kind, names, n)
				ins = append(ins, in)
			}
		}
		// Inputs happen in time order; equal times keep their drawn order.
		sort.SliceStable(ins, func(a, b int) bool { return ins[a].At < ins[b].At })
		return ins
	})
}

// episodeAt draws the instant of episode e, the last one at at: a deep
// tool's run (deepCancel), an anchor or just after it, or a phase after
// at.
func episodeAt(t *rapid.T, key *episodeLabels, e int, at time.Duration, s *scenario.Scenario, anchors, deep []time.Duration, deepCancel bool) time.Duration {
	switch {
	case deepCancel:
		// Esc while a tool runs deep in the tree (depth 4 and more):
		// the abort must reach down there in one step.
		return deep[intRange(t, 0, len(deep)-1, key.deepAt)]
	case len(anchors) > 0 && drawBool(t, key.anchored):
		return anchors[intRange(t, 0, len(anchors)-1, key.anchor)] +
			pick(t, []time.Duration{0, ms(1), grid}, key.after)
	case e == 0 && len(s.Agents) > 1:
		// Without an anchor, the first episode usually waits for the
		// tree to grow.
		phase := pick(t, []int{100, 60, 150, 0, 30, 250}, key.phase)
		return at + grid*time.Duration(phase+intRange(t, 0, 9, key.jitter))
	}
	phase := pick(t, []int{30, 0, 10, 50, 20, 100, 200, 400}, key.phase)
	return at + grid*time.Duration(phase+intRange(t, 0, 9, key.jitter))
}

// burstInput draws input b of a burst at when (the n-th input), of kind
// — or, after the first, of another kind now and then — and returns it
// with its kind.
func burstInput(t *rapid.T, bkey *inputLabels, b int, when time.Duration, kind int, names []string, n int) (scenario.Input, int) {
	in := scenario.Input{At: when}
	if b > 0 {
		// The same key pressed again (rapid Esc), or something else.
		in.At += grid * time.Duration(pick(t, []int{0, 3, 0, 1, 6, 12}, bkey.gap))
		if !drawBool(t, bkey.same) {
			kind = pick(t, []int{0, 2, 1, 3}, bkey.kind)
		}
	}
	switch kind {
	case 0:
		in.Cancel = scenario.RootScript
	case 1:
		in.Cancel = pick(t, names, bkey.target)
		if intRange(t, 0, 5, bkey.bound) == 5 {
			in.Turn = uint64(intRange(t, 1, 3, bkey.turn))
		}
	case 2:
		in.Interject = "i" + strconv.Itoa(n)
	case 3:
		in.Submit = "s" + strconv.Itoa(n)
	case 4:
		in.Shutdown = true
	}
	return in, kind
}

// findAnchors computes up to limit instants the scripts make interesting, by
// following the first reply of each script down the delegation chain from a
// submission at 0, as the simulator would run it undisturbed: every chunk's
// arrival, each stream's end, each tool's result and deadline, and each
// request's first-token deadline. Sorted, without duplicates. deep are the
// instants a tool runs in an agent at depth 4 or more that is Tooling (its
// reply delegates nothing).
func findAnchors(s *scenario.Scenario, limit int) (anchors, deep []time.Duration) {
	f := &anchorFinder{s: s, limit: limit, seen: map[time.Duration]bool{}}
	f.visit(scenario.RootScript, 0, 0)
	sort.Slice(f.out, func(a, b int) bool { return f.out[a] < f.out[b] })
	return f.out, f.deep
}

// anchorFinder is findAnchors' walk down the delegation chain.
type anchorFinder struct {
	s         *scenario.Scenario
	limit     int
	seen      map[time.Duration]bool
	out, deep []time.Duration
}

func (f *anchorFinder) add(d time.Duration) {
	if !f.seen[d] && len(f.out) < f.limit {
		f.seen[d] = true
		f.out = append(f.out, d)
	}
}

// visit follows script's first reply, its request asked at start by an
// agent at depth.
func (f *anchorFinder) visit(script string, start time.Duration, depth int) {
	s := f.s
	replies := s.Agents[script]
	if len(replies) == 0 || depth > MaxDepth || len(f.out) >= f.limit {
		return
	}
	r := replies[0]
	interval, chunks := r.Interval(), r.Chunks() // as the simulator streams it
	first := start + r.FirstToken
	// The first few chunks and the last: enough to land mid-stream and
	// on a chunk, without crowding out the deeper levels.
	for k := 0; k < chunks; k++ {
		if k < 3 || k == chunks-1 {
			f.add(first + time.Duration(k)*interval)
		}
	}
	end := first + time.Duration(chunks)*interval
	f.add(end)
	f.add(start + s.Limits.FirstTokenTimeout)
	delegates := slices.ContainsFunc(r.Calls, func(c scenario.Call) bool { return c.Delegate != "" })
	for _, c := range r.Calls {
		if c.Tool != "" {
			f.tool(s.Tools[c.Tool].Duration, end, depth >= 4 && !delegates)
		}
	}
	for _, c := range r.Calls {
		if c.Delegate != "" {
			f.visit(c.Delegate, end, depth+1)
		}
	}
}

// tool adds the instants of a tool of duration d started at end: while it
// runs, its result, its deadline; deep: it runs deep in the tree, in an
// agent that delegates nothing.
func (f *anchorFinder) tool(d, end time.Duration, deep bool) {
	f.add(end + d/2) // the tool is running: the agent is Tooling
	f.add(end + d)
	f.add(end + f.s.Limits.ToolTimeout)
	if deep && d > 0 {
		f.deep = append(f.deep, end+d/2)
	}
}
