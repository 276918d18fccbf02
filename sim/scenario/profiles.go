package scenario

import (
	"errors"
	"strings"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
)

// ProfileSpec is an agent profile of a scenario (docs/semantics.md,
// "Profiles"): the kernel.Profile of the same name. A delegation names one
// with its call's profile; the root has the scenario's root_profile.
type ProfileSpec struct {
	// About is the profile's one line (kernel.Profile.Description).
	About  string `scenario:"about,omitempty"`
	System string `scenario:"system,omitempty"`
	// Tools are the scenario's tools its agents may call; every tool with
	// all_tools, none when both are left out.
	Tools     []string `scenario:"tools,omitempty,check=tool"`
	AllTools  bool     `scenario:"all_tools,omitempty"`
	Delegates []string `scenario:"delegates,omitempty,check=name"`
	// The budgets its agents have in place of the tree's (0: the tree's);
	// max_depth counts levels below one of its agents.
	MaxRequests int `scenario:"max_requests,omitempty,check=nonnegative"`
	MaxChildren int `scenario:"max_children,omitempty,check=nonnegative"`
	MaxDepth    int `scenario:"max_depth,omitempty,check=nonnegative"`
}

// kernelProfiles are s's profiles as the kernel takes them, in name order
// (map order must not reach the kernel: I6).
func (s *Scenario) kernelProfiles() []kernel.Profile {
	if len(s.Profiles) == 0 {
		return nil
	}
	out := make([]kernel.Profile, 0, len(s.Profiles))
	for _, name := range keys.Sorted(s.Profiles) {
		p := s.Profiles[name]
		out = append(out, kernel.Profile{Name: name, Description: p.About, System: p.System,
			Tools: p.Tools, AllTools: p.AllTools, Delegates: p.Delegates,
			MaxRequests: p.MaxRequests, MaxChildren: p.MaxChildren, MaxDepth: p.MaxDepth})
	}
	return out
}

// checkProfiles: the profiles hold together as the kernel requires (a
// profile's tools within those of every profile that delegates to it, its
// delegates profiles, the root's profile one of them), and name only the
// scenario's tools.
func (s *Scenario) checkProfiles() *LoadError {
	if s.RootProfile != "" {
		if _, ok := s.Profiles[s.RootProfile]; !ok {
			return fieldErr(keyPath("root_profile"), "no profile named %q (profiles: %s)", s.RootProfile, strings.Join(keys.Sorted(s.Profiles), ", "))
		}
	}
	for _, name := range keys.Sorted(s.Profiles) {
		for i, t := range s.Profiles[name].Tools {
			if _, ok := s.Tools[t]; !ok {
				return fieldErr(keyPath("profiles", name, "tools").index(i), "unknown tool %q (tools: %s)", t, strings.Join(keys.Sorted(s.Tools), ", "))
			}
		}
	}
	cfg := s.KernelConfig()
	var pe *kernel.ProfileError
	if err := cfg.Validate(); errors.As(err, &pe) && pe.Index >= 0 {
		at := keyPath("profiles", cfg.Profiles[pe.Index].Name)
		if pe.Field == "name" {
			at = keyPath("profiles").name(cfg.Profiles[pe.Index].Name)
		} else if at = at.key(pe.Field); pe.Item >= 0 {
			at = at.index(pe.Item)
		}
		return fieldErr(at, "%s", pe.Msg)
	}
	return nil
}
