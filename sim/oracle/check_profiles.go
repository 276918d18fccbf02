package oracle

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/escapement/escapement/kernel"
)

// profileChecker holds I26: an agent acts within its profile
// (docs/semantics.md, "Profiles"). No tool starts that its agent's profile
// does not list; a child is spawned only with the profile its delegation
// names, and only one its parent's profile may delegate to; a child starts
// with its profile's system prompt; and every request carries its agent's
// profile, by which the host picks the model. Each agent's profile is the
// model's own reading of the delegation that spawned it (model.profiled),
// never the kernel's word. The profiles' budgets are I19's, their
// refusals I13's.
type profileChecker struct{ judge }

func (c *profileChecker) step(s *stepObs) {
	for i := range s.effs {
		e := &s.effs[i]
		a := c.m.agent(e.Agent)
		if a == nil {
			continue
		}
		switch {
		case e.Kind == kernel.EffStartTool && !c.m.mayCall(a, e.Call.Name):
			c.violate(ProfileTools, a.id, "tool %s starts for call %s, but profile %q does not list it (tools: %s)",
				e.Call.Name, e.Call.ID, a.profileName, strings.Join(c.m.profileOf(a).Tools, ", "))
		case e.Kind == kernel.EffStartLLM:
			c.request(a, e)
		case e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeDelegated:
			c.spawned(a, &e.Life)
		}
	}
}

// request: a request carries its agent's profile and sends its profile's
// system prompt first (the root's: the configured one, else its
// profile's; a child's: its profile's, or the tree's child prompt in a
// tree without profiles).
func (c *profileChecker) request(a *agentObs, e *kernel.Effect) {
	if e.Profile != a.profileName {
		c.violate(ProfileTools, a.id, "request %d carries profile %q, but %s runs profile %q", e.Op, e.Profile, a.path, a.profileName)
	}
	want := c.m.childSystem
	if p := c.m.profileOf(a); p != nil {
		want = p.System
	}
	if a.id == kernel.Root {
		want = c.m.rootSystem
	}
	got := ""
	if len(e.Messages) > 0 && e.Messages[0].Role == kernel.RoleSystem {
		got = e.Messages[0].Content
	}
	if got != want {
		c.violate(ProfileTools, a.id, "request %d sends the system prompt %.60q, but %s's profile %q gives %.60q", e.Op, got, a.path, a.profileName, want)
	}
}

// spawned: a child runs the profile its delegation named, one its parent
// may delegate to, and its delegated record says which.
func (c *profileChecker) spawned(parent *agentObs, l *kernel.Lifecycle) {
	child := c.m.agent(l.Child)
	if child == nil {
		return
	}
	if l.Profile != child.profileName {
		c.violate(ProfileTools, parent.id, "call %s spawned %s with profile %q, but its delegation names profile %q", l.CallID, child.path, l.Profile, child.profileName)
	}
	if len(c.m.profiles) > 0 && (child.profile < 0 || !slices.Contains(c.m.delegates(parent), child.profileName)) {
		may := strings.Join(c.m.delegates(parent), ", ")
		if may == "" {
			may = "none"
		}
		c.violate(ProfileTools, parent.id, "call %s spawned %s with profile %q, which profile %q may not delegate to (it may: %s)",
			l.CallID, child.path, child.profileName, parent.profileName, may)
	}
}

// The model's reading of profiles: each agent's profile and what it
// allows, from the configuration and the delegations the model saw.

// profileArg is the profile a delegation's arguments name ("" for none or
// for arguments that do not parse).
func profileArg(args string) string {
	var a struct {
		Profile string `json:"profile"`
	}
	_ = json.Unmarshal([]byte(args), &a)
	return a.Profile
}

// profiled gives the children spawned in this step their profiles, from
// the delegations that spawned them as their parents' histories now show
// them: the profile, its name and how deep the child's own descendants
// may sit.
func (m *model) profiled() {
	for _, id := range m.spawning {
		c := m.agents[id]
		p := m.agent(c.via.agent)
		if p == nil {
			continue
		}
		name := ""
		if i := callIndex(p, c.via.id); i >= 0 {
			name = profileArg(p.lastCalls[i].Arguments)
		}
		c.profile, c.profileName = profileOf(m.profiles, name), name
		c.depthCap = p.depthCap
		if prof := m.profileOf(c); prof != nil && prof.MaxDepth > 0 {
			c.depthCap = min(c.depthCap, c.depth+prof.MaxDepth)
		}
	}
	m.spawning = m.spawning[:0]
}

// ownProfiles is a copy of profiles the model keeps: what the core was
// given may change under it (a broken loop's configuration), the
// scenario's may not.
func ownProfiles(profiles []kernel.Profile) []kernel.Profile {
	out := slices.Clone(profiles)
	for i := range out {
		out[i].Tools = slices.Clone(out[i].Tools)
		out[i].Delegates = slices.Clone(out[i].Delegates)
	}
	return out
}

// profileOf is a's profile, nil when it has none.
func (m *model) profileOf(a *agentObs) *kernel.Profile {
	if a.profile < 0 {
		return nil
	}
	return &m.profiles[a.profile]
}

// mayCall reports whether a's profile lists tool name (an agent without a
// profile may call every tool).
func (m *model) mayCall(a *agentObs, name string) bool {
	p := m.profileOf(a)
	return p == nil || p.AllTools || slices.Contains(p.Tools, name)
}

// delegates are the profiles a may delegate to (every one for an agent
// without a profile).
func (m *model) delegates(a *agentObs) []string {
	if p := m.profileOf(a); p != nil {
		return p.Delegates
	}
	names := make([]string, len(m.profiles))
	for i, p := range m.profiles {
		names[i] = p.Name
	}
	return names
}

// maxRequests and maxChildren are a's budgets: its profile's, else the
// tree's.
func (m *model) maxRequests(a *agentObs) int {
	if p := m.profileOf(a); p != nil && p.MaxRequests > 0 {
		return p.MaxRequests
	}
	return m.lim.MaxRequests
}

func (m *model) maxChildren(a *agentObs) int {
	if p := m.profileOf(a); p != nil && p.MaxChildren > 0 {
		return p.MaxChildren
	}
	return m.lim.MaxChildren
}

// badProfile reports whether a delegation naming profile name is
// malformed: with profiles, it names none or one that does not exist;
// without, it names one at all.
func (m *model) badProfile(name string) bool {
	if len(m.profiles) == 0 {
		return name != ""
	}
	return profileOf(m.profiles, name) < 0
}

// outsideProfile reports whether call i of a's last message (delivered by
// request req) is refused not_in_profile: a named tool a's profile does
// not list, or a well-formed delegation to a profile a's may not delegate
// to.
func (m *model) outsideProfile(a *agentObs, req *opObs, i int) bool {
	if i < 0 || i >= len(a.lastCalls) {
		return false
	}
	call := a.lastCalls[i]
	if call.Name != m.delegateTool {
		return !nameless(req, call) && !m.mayCall(a, call.Name)
	}
	var args struct {
		Task    string `json:"task"`
		Profile string `json:"profile"`
	}
	if json.Unmarshal([]byte(call.Arguments), &args) != nil || strings.TrimSpace(args.Task) == "" || m.badProfile(args.Profile) {
		return false
	}
	return len(m.profiles) > 0 && !slices.Contains(m.delegates(a), args.Profile)
}

// profileOf is the index in profiles of the profile name names, -1 when
// none has it.
func profileOf(profiles []kernel.Profile, name string) int {
	return slices.IndexFunc(profiles, func(p kernel.Profile) bool { return p.Name == name })
}
