package config

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/escapement/escapement/adapters/profiles"
	"github.com/escapement/escapement/kernel"
)

// profileKeys are a profile's settings, in the order config show prints
// them.
var profileKeys = []string{"description", "system", "model", "base_url", "api_key_env",
	"temperature", "max_output_tokens", "tools", "delegates", "max_requests", "max_children", "max_depth"}

// Profile is a profile as the configuration defines it: the kernel's part
// (what its agents may do) and its endpoint (what model runs them).
type Profile struct {
	kernel.Profile
	Endpoint profiles.Endpoint
	// At is where the profile is defined.
	At   Source
	node profileNode
}

// readProfiles reads the files' profiles — a project file's replaces the
// user file's of the same name, whole — and checks that they hold
// together with the root's (--profile), naming the file and line of what
// does not.
func (c *Config) readProfiles() error {
	var nodes []profileNode
	for _, f := range []*file{c.user, c.project} {
		if f == nil {
			continue
		}
		for _, n := range f.profiles {
			if i := indexOf(nodes, n.name); i >= 0 {
				nodes = append(nodes[:i], nodes[i+1:]...)
			}
			nodes = append(nodes, n)
		}
	}
	for _, n := range nodes {
		p, err := parseProfile(n)
		if err != nil {
			return err
		}
		c.profiles = append(c.profiles, p)
	}
	cfg := kernel.Config{Limits: kernel.DefaultLimits(), Profiles: c.KernelProfiles(), RootProfile: c.RootProfile()}
	return c.Where(cfg.Validate())
}

func indexOf(nodes []profileNode, name string) int {
	for i, n := range nodes {
		if n.name == name {
			return i
		}
	}
	return -1
}

// parseProfile reads one profile's settings.
func parseProfile(n profileNode) (Profile, error) {
	p := Profile{Profile: kernel.Profile{Name: n.name, AllTools: true}, At: Source{Kind: n.file.kind, File: n.file.path, Line: n.line}, node: n}
	p.Endpoint.Profile = n.name
	for _, key := range profileKeys {
		v, ok := n.fields[key]
		if !ok {
			continue
		}
		at := func(err error) error {
			return fmt.Errorf("%s:%d: profiles.%s.%s: %w", n.file.path, v.line, n.name, key, err)
		}
		switch key {
		case "tools", "delegates":
			if !v.list {
				return p, at(errors.New("want a list ([a, b]; [] for none)"))
			}
			if key == "tools" {
				p.Tools, p.AllTools = v.items, false
			} else {
				p.Delegates = v.items
			}
			continue
		}
		if v.list {
			return p, at(errors.New("takes one value, not a list"))
		}
		if err := p.set(key, v.items[0]); err != nil {
			return p, at(err)
		}
	}
	return p, nil
}

// set reads one scalar setting of a profile.
func (p *Profile) set(key, s string) error {
	num := func(dst *int) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("want a whole number, 0 or more, got %q", s)
		}
		*dst = n
		return nil
	}
	switch key {
	case "description":
		p.Description = s
	case "system":
		p.System = s
	case "model":
		p.Endpoint.Model = s
	case "base_url":
		p.Endpoint.BaseURL = s
	case "api_key_env":
		p.Endpoint.APIKeyEnv = s
	case "temperature":
		t, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", s)
		}
		p.Endpoint.Temperature = &t
	case "max_output_tokens":
		return num(&p.Endpoint.MaxOutputTokens)
	case "max_requests":
		return num(&p.MaxRequests)
	case "max_children":
		return num(&p.MaxChildren)
	case "max_depth":
		return num(&p.MaxDepth)
	}
	return nil
}

// Profiles are the configured profiles, the user file's first (those a
// project file replaced in its place at the end).
func (c *Config) Profiles() []Profile { return c.profiles }

// KernelProfiles are the profiles as the kernel takes them.
func (c *Config) KernelProfiles() []kernel.Profile {
	var out []kernel.Profile
	for _, p := range c.profiles {
		out = append(out, p.Profile)
	}
	return out
}

// Endpoints are the profiles' endpoints (adapters/profiles.OpenAI).
func (c *Config) Endpoints() []profiles.Endpoint {
	var out []profiles.Endpoint
	for _, p := range c.profiles {
		out = append(out, p.Endpoint)
	}
	return out
}

// RootProfile is the root's profile: --profile, "" for none.
func (c *Config) RootProfile() string {
	if f := c.fs.Lookup(FlagProfile); f != nil {
		return f.Value.String()
	}
	return ""
}

// Where points a *kernel.ProfileError at the file and line of the profile
// setting it names (the root profile's: where --profile came from); any
// other error is returned as it is.
func (c *Config) Where(err error) error {
	var pe *kernel.ProfileError
	if !errors.As(err, &pe) {
		return err
	}
	if pe.Index < 0 || pe.Index >= len(c.profiles) {
		return fmt.Errorf("%s (%s): %w", FlagProfile, c.Source(FlagProfile), err)
	}
	n := c.profiles[pe.Index].node
	line := n.line
	if v, ok := n.fields[pe.Field]; ok {
		line = v.line
		if pe.Item >= 0 && pe.Item < len(v.lines) {
			line = v.lines[pe.Item]
		}
	}
	return fmt.Errorf("%s:%d: %w", n.file.path, line, err)
}
