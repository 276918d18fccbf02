// Package profiles runs agent profiles on the live side
// (docs/semantics.md, "Profiles"). The kernel decides what each agent may
// call and starts every request with its agent's profile name
// (kernel.Effect.Profile, ports.Request.Profile); a Router sends each
// request to that profile's model and offers the model that profile's
// tools — the host's tools the profile lists, and a delegate tool whose
// profile argument is an enum of the profiles it may delegate to. So a
// model is only ever shown the tools its agent may call; one that names
// another anyway gets the kernel's refusal (reason not_in_profile).
//
// models.go builds a model per profile for an OpenAI-compatible endpoint
// (adapters/openai): its model name, base URL and the variable holding
// its key.
package profiles

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// Router is a ports.Model for a tree with profiles: each request goes to
// its agent's profile's model, offering that profile's tools. It is safe
// for concurrent use (it only reads what New built).
type Router struct {
	def    ports.Model
	models map[string]ports.Model
	// offered are the tools each profile's requests offer, by profile
	// name ("" for an agent without one: the root of a tree without a
	// root profile).
	offered map[string][]ports.ToolSpec
}

// New builds the router for cfg's profiles. def runs the requests of an
// agent whose profile has no model in models (and of an agent without a
// profile); tools are every tool the host runs (a spec of cfg's delegate
// tool among them is left out: each profile gets its own). A profile that
// lists a tool no spec describes is an error naming it (a
// *kernel.ProfileError, so a host can point at its line): the model
// could never be offered it.
func New(cfg kernel.Config, def ports.Model, models map[string]ports.Model, tools []ports.ToolSpec) (*Router, error) {
	if def == nil {
		return nil, fmt.Errorf("profiles: a default model is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	delegate := cfg.DelegateTool
	if delegate == "" {
		delegate = kernel.DefaultDelegateTool
	}
	own := slices.DeleteFunc(slices.Clone(tools), func(s ports.ToolSpec) bool { return s.Name == delegate })
	r := &Router{def: def, models: models, offered: map[string][]ports.ToolSpec{}}
	for i := range cfg.Profiles {
		p := &cfg.Profiles[i]
		specs, err := offered(cfg, p, i, own, delegate)
		if err != nil {
			return nil, err
		}
		r.offered[p.Name] = specs
	}
	if cfg.RootProfile == "" {
		all := make([]ports.ProfileChoice, len(cfg.Profiles))
		for i, p := range cfg.Profiles {
			all[i] = ports.ProfileChoice{Name: p.Name, Description: p.Description}
		}
		r.offered[""] = append(slices.Clone(own), ports.DelegateSpecFor(delegate, all))
	}
	return r, nil
}

// offered is what profile p's requests offer: the tools it lists, in the
// host's order, and the delegate tool when it may delegate.
func offered(cfg kernel.Config, p *kernel.Profile, index int, tools []ports.ToolSpec, delegate string) ([]ports.ToolSpec, error) {
	var specs []ports.ToolSpec
	if p.AllTools {
		specs = slices.Clone(tools)
	} else {
		for j, name := range p.Tools {
			if !slices.ContainsFunc(tools, func(s ports.ToolSpec) bool { return s.Name == name }) {
				return nil, &kernel.ProfileError{Profile: p.Name, Index: index, Field: "tools", Item: j,
					Msg: fmt.Sprintf("tool %q is no tool of this run (tools: %s)", name, names(tools))}
			}
		}
		for _, s := range tools {
			if slices.Contains(p.Tools, s.Name) {
				specs = append(specs, s)
			}
		}
	}
	if len(p.Delegates) > 0 {
		choices := make([]ports.ProfileChoice, len(p.Delegates))
		for j, d := range p.Delegates {
			choices[j] = ports.ProfileChoice{Name: d, Description: cfg.Profiles[slices.IndexFunc(cfg.Profiles, func(q kernel.Profile) bool { return q.Name == d })].Description}
		}
		specs = append(specs, ports.DelegateSpecFor(delegate, choices))
	}
	if specs == nil {
		specs = []ports.ToolSpec{} // offers none (nil would offer the model's own list)
	}
	return specs, nil
}

func names(tools []ports.ToolSpec) string {
	if len(tools) == 0 {
		return "none"
	}
	out := make([]string, len(tools))
	for i, s := range tools {
		out[i] = s.Name
	}
	return strings.Join(out, ", ")
}

// Stream sends req to its profile's model with its profile's tools (a
// request that names its own tools keeps them).
func (r *Router) Stream(ctx context.Context, req ports.Request, sink ports.Sink) error {
	m, ok := r.models[req.Profile]
	if !ok || m == nil {
		m = r.def
	}
	if req.Tools == nil {
		req.Tools = r.offered[req.Profile]
	}
	return m.Stream(ctx, req, sink)
}

// Offered is what the requests of an agent of profile name offer ("" for
// an agent without a profile); nil for a name the router does not know.
func (r *Router) Offered(name string) []ports.ToolSpec { return r.offered[name] }
