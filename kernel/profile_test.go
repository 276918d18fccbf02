package kernel

import (
	"errors"
	"strings"
	"testing"
)

// TestProfileValidation: a configuration whose profiles cannot hold is
// refused, naming the profile, the field and the item at fault, so a host
// can point at the line of its file that says it; above all a profile
// that may use a tool a profile delegating to it may not (a child never
// gets a tool its parent lacks).
func TestProfileValidation(t *testing.T) {
	lead := func() Profile {
		return Profile{Name: "lead", Tools: []string{"read_file", "grep"}, Delegates: []string{"reviewer"}}
	}
	reviewer := func() Profile { return Profile{Name: "reviewer", Tools: []string{"read_file"}} }
	cases := []struct {
		name   string
		change func(c *Config)
		field  string
		item   int
		msg    string
	}{
		{"a child's tool its parent lacks", func(c *Config) { c.Profiles[1].Tools = []string{"read_file", "shell"} },
			"tools", 1, `profile "reviewer": tool "shell" is not among the tools of profile "lead", which delegates to it`},
		{"a child with every tool under a parent with some", func(c *Config) { c.Profiles[1].Tools, c.Profiles[1].AllTools = nil, true },
			"tools", -1, `profile "reviewer": allows every tool, but profile "lead", which delegates to it, does not`},
		{"an unknown delegate", func(c *Config) { c.Profiles[0].Delegates = []string{"reviewer", "coder"} },
			"delegates", 1, `delegates to "coder", which no profile is`},
		{"the delegate tool as a tool", func(c *Config) { c.Profiles[0].Tools = append(c.Profiles[0].Tools, "delegate") },
			"tools", 2, `"delegate" is the delegation tool`},
		{"a tool twice", func(c *Config) { c.Profiles[1].Tools = []string{"read_file", "read_file"} },
			"tools", 1, `listed twice`},
		{"two profiles of one name", func(c *Config) { c.Profiles[1].Name = "lead" },
			"name", -1, `a second profile of that name`},
		{"a name that is no name", func(c *Config) { c.Profiles[1].Name = "re viewer" },
			"name", -1, `a name holds letters`},
		{"a negative budget", func(c *Config) { c.Profiles[1].MaxRequests = -1 },
			"max_requests", -1, `max_requests must be in 0..`},
		{"an unknown root profile", func(c *Config) { c.RootProfile = "boss" },
			"root_profile", -1, `root profile "boss": no profile has that name`},
		{"every tool and a list", func(c *Config) { c.Profiles[0].AllTools = true },
			"tools", -1, `lists tools and allows every tool`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Limits: DefaultLimits(), Profiles: []Profile{lead(), reviewer()}, RootProfile: "lead"}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the valid configuration is refused: %v", err)
			}
			tc.change(&cfg)
			err := cfg.Validate()
			var pe *ProfileError
			if !errors.As(err, &pe) {
				t.Fatalf("Validate = %v, want a *ProfileError", err)
			}
			if pe.Field != tc.field || pe.Item != tc.item || (tc.field != "root_profile" && cfg.Profiles[pe.Index].Name != pe.Profile) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Validate = %q (field %s, item %d), want %q at field %s item %d", err, pe.Field, pe.Item, tc.msg, tc.field, tc.item)
			}
		})
	}
	if err := (Config{Limits: DefaultLimits(), Profiles: []Profile{reviewer()}, ChildSystem: "x"}).Validate(); err == nil {
		t.Fatal("a child system prompt beside profiles is accepted")
	}
}

// TestProfileDepthAndChildren: a profile's max_depth counts from its
// agent down and only tightens the tree's; its max_children replaces the
// tree's for its agents. A delegation either refuses is answered refused,
// naming the limit that applied.
func TestProfileDepthAndChildren(t *testing.T) {
	cfg := Config{Limits: DefaultLimits(), Profiles: []Profile{
		{Name: "planner", AllTools: true, Delegates: []string{"planner"}, MaxDepth: 1, MaxChildren: 1},
	}}
	k := MustNew(cfg)
	step := func(ev Event) []Effect { return k.Step(ev) }
	start := func(effs []Effect, agent AgentID) OpID {
		t.Helper()
		for _, e := range effs {
			if e.Kind == EffStartLLM && e.Agent == agent {
				return e.Op
			}
		}
		t.Fatalf("no request of agent %d in %v", agent, effs)
		return 0
	}
	delegate := func(op OpID, calls ...string) []Effect {
		for i, args := range calls {
			step(CallFragment(0, op, uint32(i+1), CallDelta{Index: i, ID: "d" + string(rune('a'+i)), Name: DefaultDelegateTool, Args: args}))
		}
		return step(LLMEnd(0, op))
	}
	root := start(step(Submit(0, "plan")), Root)
	effs := delegate(root, `{"task":"one","profile":"planner","name":"p1"}`)
	p1 := start(effs, 1)
	if got := k.Agent(1).Profile(); got != "planner" {
		t.Fatalf("the child's profile is %q", got)
	}
	// p1 sits at depth 1 with max_depth 1 below it: its child (depth 2)
	// may be spawned, but only one of them per turn.
	effs = delegate(p1, `{"task":"two","profile":"planner","name":"p2"}`, `{"task":"three","profile":"planner","name":"p3"}`)
	p2 := start(effs, 2)
	if refused := finished(effs, "db"); refused.Status != CallRefused || refused.Reason != ReasonMaxChildren {
		t.Fatalf("p1's second delegation: %+v, want refused max_children", refused)
	}
	// p2 at depth 2: its own max_depth would allow depth 3, but p1's cap
	// (depth 1 + 1) holds below it.
	effs = delegate(p2, `{"task":"four","profile":"planner","name":"p4"}`)
	if refused := finished(effs, "da"); refused.Status != CallRefused || refused.Reason != ReasonMaxDepth {
		t.Fatalf("p2's delegation: %+v, want refused max_depth", refused)
	}
	if h := k.Agent(2).History(); !strings.Contains(h[len(h)-1].Content, `"limit":2`) {
		t.Fatalf("the refusal names %s, want the cap that applied (2)", h[len(h)-1].Content)
	}
}

// finished is the call_finished record of call id in effs.
func finished(effs []Effect, id string) Lifecycle {
	for _, e := range effs {
		if e.Kind == EffEmit && e.Life.Kind == LifeCallFinished && e.Life.CallID == id {
			return e.Life
		}
	}
	return Lifecycle{}
}
