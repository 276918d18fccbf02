package kernel

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Profile is a kind of agent (docs/semantics.md, "Profiles"): the system
// prompt its agents start with, the tools they may call, the profiles they
// may delegate to, and their own budgets. A delegation names the profile
// of the child it spawns; the root has Config.RootProfile. The kernel
// holds only what shapes its effects: the host picks an agent's model,
// endpoint and model settings by its profile's name, which every request
// of the agent carries (Effect.Profile).
type Profile struct {
	// Name is how a delegation names it: letters, digits, '_', '-' and
	// '.', at most MaxNameBytes bytes.
	Name string `json:"name"`
	// Description is one line for a delegating model: the delegate tool's
	// schema lists each profile it may name with it.
	Description string `json:"description,omitempty"`
	// System is the system prompt its agents start with; none when empty.
	System string `json:"system,omitempty"`
	// Tools are the tools its agents may call — every tool when AllTools.
	// A call of any other tool is answered refused with reason
	// not_in_profile and never runs. A profile's tools are within those
	// of every profile that may delegate to it (Config.Validate): a child
	// never gets a tool its parent lacks.
	Tools    []string `json:"tools,omitempty"`
	AllTools bool     `json:"all_tools,omitempty"`
	// Delegates are the profiles its agents may delegate to; none when
	// empty (such an agent's delegations are refused not_in_profile).
	Delegates []string `json:"delegates,omitempty"`
	// MaxRequests and MaxChildren replace the tree's limits of the same
	// names for its agents (0: the tree's): the requests one of its
	// agents makes per turn, and the children it delegates to per turn.
	MaxRequests int `json:"max_requests,omitempty"`
	MaxChildren int `json:"max_children,omitempty"`
	// MaxDepth, when not 0, is how many levels below one of its agents
	// the tree may grow: its children at depth+1, down to depth+MaxDepth.
	// It only tightens the tree's max_depth (and an ancestor profile's).
	MaxDepth int `json:"max_depth,omitempty"`
}

// profileNameRE is what a profile's name may hold: it travels in JSON
// Schema enums and trace headers, and a person types it.
var profileNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// ProfileError is a configuration whose profiles cannot hold: Profile
// names the profile (Config.Profiles' index Index, -1 for none), Field the
// field at fault ("tools", "delegates", "max_requests", …) and Item its
// item (a tool's index in Tools, a delegate's in Delegates; -1 for the
// field itself), so a host can point at the line of its own file that
// says it.
type ProfileError struct {
	Profile string
	Index   int
	Field   string
	Item    int
	Msg     string
}

func (e *ProfileError) Error() string {
	if e.Profile == "" {
		return e.Msg
	}
	return fmt.Sprintf("profile %q: %s", e.Profile, e.Msg)
}

// rootSystem is the root's system prompt: System, else its profile's.
func (c Config) rootSystem() string {
	if c.System != "" || c.RootProfile == "" {
		return c.System
	}
	if i := c.profileIndex(c.RootProfile); i >= 0 {
		return c.Profiles[i].System
	}
	return ""
}

// profileIndex is the index of the profile named name in Profiles, -1
// when none is.
func (c Config) profileIndex(name string) int {
	return slices.IndexFunc(c.Profiles, func(p Profile) bool { return p.Name == name })
}

// validateProfiles checks the profiles each on its own, then that no
// profile delegates to one with a tool it lacks itself.
func (c Config) validateProfiles() error {
	if len(c.Profiles) == 0 {
		if c.RootProfile != "" {
			return &ProfileError{Index: -1, Field: "root_profile", Item: -1, Msg: fmt.Sprintf("root profile %q: no profiles are configured", c.RootProfile)}
		}
		return nil
	}
	if c.ChildSystem != "" {
		return errors.New("a child system prompt and profiles together: with profiles, each child's system prompt is its profile's")
	}
	for i := range c.Profiles {
		if err := c.validateName(i); err != nil {
			return err
		}
	}
	for i := range c.Profiles {
		if err := c.validateProfile(i); err != nil {
			return err
		}
	}
	if c.RootProfile != "" && c.profileIndex(c.RootProfile) < 0 {
		return &ProfileError{Index: -1, Field: "root_profile", Item: -1, Msg: fmt.Sprintf("root profile %q: no profile has that name (profiles: %s)", c.RootProfile, c.profileNames())}
	}
	for i := range c.Profiles {
		parent := &c.Profiles[i]
		for _, d := range parent.Delegates {
			if err := toolsWithin(c.Profiles, c.profileIndex(d), parent); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateName checks profile i's name: a word, and no other profile's.
func (c Config) validateName(i int) error {
	p := &c.Profiles[i]
	msg := ""
	switch {
	case p.Name == "":
		return &ProfileError{Index: i, Field: "name", Item: -1, Msg: fmt.Sprintf("profile %d has no name", i+1)}
	case len(p.Name) > MaxNameBytes || !profileNameRE.MatchString(p.Name):
		msg = fmt.Sprintf("a name holds letters, digits, '_', '-' and '.', at most %d bytes", MaxNameBytes)
	case c.profileIndex(p.Name) != i:
		msg = "a second profile of that name"
	default:
		return nil
	}
	return &ProfileError{Profile: p.Name, Index: i, Field: "name", Item: -1, Msg: msg}
}

// validateProfile checks profile i on its own: its tools, the profiles it
// delegates to and its limits.
func (c Config) validateProfile(i int) error {
	p := &c.Profiles[i]
	bad := func(field string, item int, format string, args ...any) error {
		return &ProfileError{Profile: p.Name, Index: i, Field: field, Item: item, Msg: fmt.Sprintf(format, args...)}
	}
	if p.AllTools && len(p.Tools) > 0 {
		return bad("tools", -1, "lists tools and allows every tool")
	}
	delegateTool := c.withDefaults().DelegateTool
	for j, t := range p.Tools {
		switch {
		case strings.TrimSpace(t) == "":
			return bad("tools", j, "tool %d has no name", j+1)
		case t == delegateTool:
			return bad("tools", j, "%q is the delegation tool: the profiles it may delegate to are its delegates", t)
		case slices.Index(p.Tools, t) != j:
			return bad("tools", j, "tool %q is listed twice", t)
		}
	}
	for j, d := range p.Delegates {
		switch {
		case c.profileIndex(d) < 0:
			return bad("delegates", j, "delegates to %q, which no profile is (profiles: %s)", d, c.profileNames())
		case slices.Index(p.Delegates, d) != j:
			return bad("delegates", j, "delegate %q is listed twice", d)
		}
	}
	for _, l := range [...]struct {
		field  string
		v, max int
	}{{"max_requests", p.MaxRequests, MaxRequestsCeiling}, {"max_children", p.MaxChildren, MaxChildrenCeiling}, {"max_depth", p.MaxDepth, MaxDepthCeiling}} {
		if l.v < 0 || l.v > l.max {
			return bad(l.field, -1, "%s must be in 0..%d (0: the tree's), got %d", l.field, l.max, l.v)
		}
	}
	return nil
}

// toolsWithin reports the first tool profiles[i] may use that parent,
// which delegates to it, may not.
func toolsWithin(profiles []Profile, i int, parent *Profile) error {
	child := &profiles[i]
	if parent.AllTools {
		return nil
	}
	if child.AllTools {
		return &ProfileError{Profile: child.Name, Index: i, Field: "tools", Item: -1,
			Msg: fmt.Sprintf("allows every tool, but profile %q, which delegates to it, does not: a child never gets a tool its parent lacks", parent.Name)}
	}
	for j, t := range child.Tools {
		if !slices.Contains(parent.Tools, t) {
			return &ProfileError{Profile: child.Name, Index: i, Field: "tools", Item: j,
				Msg: fmt.Sprintf("tool %q is not among the tools of profile %q, which delegates to it: a child never gets a tool its parent lacks", t, parent.Name)}
		}
	}
	return nil
}

// profileNames lists the profiles' names for messages.
func (c Config) profileNames() string {
	names := make([]string, len(c.Profiles))
	for i, p := range c.Profiles {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// noProfile is an agent's profile index when it has none: the root of a
// tree without a root profile (every tool, every profile to delegate to).
const noProfile = -1

// profileOf is a's profile, nil when it has none.
func (k *Kernel) profileOf(a *agent) *Profile {
	if a.profile == noProfile {
		return nil
	}
	return &k.cfg.Profiles[a.profile]
}

// maxRequests is a's budget of requests per turn: its profile's, else the
// tree's.
func (k *Kernel) maxRequests(a *agent) int {
	if p := k.profileOf(a); p != nil && p.MaxRequests > 0 {
		return p.MaxRequests
	}
	return k.cfg.MaxRequests
}

// maxChildren is how many children a may delegate to per turn: its
// profile's, else the tree's.
func (k *Kernel) maxChildren(a *agent) int {
	if p := k.profileOf(a); p != nil && p.MaxChildren > 0 {
		return p.MaxChildren
	}
	return k.cfg.MaxChildren
}

// depthCap is the deepest a descendant of an agent at depth, of profile
// p, under a parent whose cap is parentCap, may sit.
func depthCap(parentCap, depth int, p *Profile) int {
	if p != nil && p.MaxDepth > 0 {
		return min(parentCap, depth+p.MaxDepth)
	}
	return parentCap
}

// mayCall reports whether a's profile lets it call tool name.
func (k *Kernel) mayCall(a *agent, name string) bool {
	p := k.profileOf(a)
	return p == nil || p.AllTools || slices.Contains(p.Tools, name)
}

// judgeTool refuses a call of a tool a's profile does not list.
func (k *Kernel) judgeTool(a *agent, name string) (callPlan, bool) {
	if k.mayCall(a, name) {
		return callPlan{}, true
	}
	p := k.profileOf(a)
	detail := fmt.Sprintf("tool %q is not among the tools of profile %q", name, p.Name)
	if len(p.Tools) > 0 {
		detail += " (" + strings.Join(p.Tools, ", ") + ")"
	} else {
		detail += " (it has none)"
	}
	return profileRefusal(detail), false
}

// judgeProfile resolves the profile a delegation of a names, its index
// in Config.Profiles (noProfile in a tree without profiles), or, when the
// call cannot spawn, the plan that answers it: a profile missing or
// unknown is malformed, one a's profile may not delegate to is refused.
func (k *Kernel) judgeProfile(a *agent, name string) (int, callPlan, bool) {
	if len(k.cfg.Profiles) == 0 {
		if name != "" {
			return 0, malformedCall(fmt.Sprintf("unknown profile %q: no profiles are configured; leave profile out", name)), false
		}
		return noProfile, callPlan{}, true
	}
	allowed := k.delegates(a)
	switch i := k.cfg.profileIndex(name); {
	case name == "":
		return 0, malformedCall("delegate needs a profile: one of " + listOrNone(allowed)), false
	case i < 0:
		return 0, malformedCall(fmt.Sprintf("unknown profile %q: want one of %s", name, listOrNone(allowed))), false
	case len(allowed) == 0:
		return 0, profileRefusal(fmt.Sprintf("profile %q may not delegate", a.profileName)), false
	case !slices.Contains(allowed, name):
		return 0, profileRefusal(fmt.Sprintf("profile %q may delegate only to %s, not to %q", a.profileName, strings.Join(allowed, ", "), name)), false
	default:
		return i, callPlan{}, true
	}
}

// delegates are the profiles a may delegate to: its profile's, or every
// profile for an agent without one.
func (k *Kernel) delegates(a *agent) []string {
	if p := k.profileOf(a); p != nil {
		return p.Delegates
	}
	names := make([]string, len(k.cfg.Profiles))
	for i, p := range k.cfg.Profiles {
		names[i] = p.Name
	}
	return names
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none: this agent may not delegate"
	}
	return strings.Join(names, ", ")
}

func profileRefusal(detail string) callPlan {
	return callPlan{status: CallRefused, reason: ReasonNotInProfile, content: toolErrorContent(CallRefused, ReasonNotInProfile, detail)}
}

// Profile is the name of the agent's profile; "" when it has none (the
// root of a tree without a root profile).
func (v AgentView) Profile() string { return v.a.profileName }
