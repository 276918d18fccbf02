package sim

import (
	"slices"
	"testing"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/oracle"
)

// profileLoops are the broken loops of I26 (TestEveryInvariantHasTeeth
// counts them). They stay out of TestOracleTeethRapid: generated worlds
// name no profiles, so their scenario holds them.
func profileLoops() []BrokenLoop {
	return []BrokenLoop{
		// A loop that keeps each agent's profile for its system prompt and
		// model but never checks its tools: a child runs whatever its
		// model asks for.
		{"profile-tools", "I26: an agent runs a tool its profile does not list", oracle.ProfileTools,
			withConfig(func(cfg *kernel.Config) {
				cfg.Profiles = slices.Clone(cfg.Profiles) // the oracle's stay the scenario's
				for i := range cfg.Profiles {
					cfg.Profiles[i].Tools, cfg.Profiles[i].AllTools = nil, true
				}
			})},
	}
}

// TestProfileLoopsCaught: the oracle names I26 for each way a loop can
// get profiles wrong — the profileLoops, and a child spawned with its parent's profile
// instead of the one its delegation names, a request sent without its
// agent's profile (the host would pick the root's model), a child started
// without its profile's system prompt, and a delegation to a profile its
// parent may not delegate to let through.
func TestProfileLoopsCaught(t *testing.T) {
	rewrite := func(change func(e *kernel.Effect)) CoreFactory {
		return broken(func(b *brokenCore) {
			b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
				out := b.inner(ev)
				for i := range out {
					change(&out[i])
				}
				return out
			}
		})
	}
	loops := []struct {
		what string
		core CoreFactory
	}{
		{"a delegated record names the parent's profile", rewrite(func(e *kernel.Effect) {
			if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeDelegated {
				e.Life.Profile = "lead"
			}
		})},
		{"a child's requests carry no profile", rewrite(func(e *kernel.Effect) {
			if e.Kind == kernel.EffStartLLM && e.Agent != kernel.Root {
				e.Profile = ""
			}
		})},
		{"a child starts without its profile's system prompt", rewrite(func(e *kernel.Effect) {
			if e.Kind == kernel.EffStartLLM && e.Agent != kernel.Root && len(e.Messages) > 0 && e.Messages[0].Role == kernel.RoleSystem {
				e.Messages = e.Messages[1:]
			}
		})},
		{"a delegation outside the parent's profile spawns", withConfig(func(cfg *kernel.Config) {
			cfg.Profiles = slices.Clone(cfg.Profiles)
			// The reviewer may delegate to lead, whose tools shrink to
			// its own so the kernel takes the configuration.
			for i := range cfg.Profiles {
				switch cfg.Profiles[i].Name {
				case "reviewer":
					cfg.Profiles[i].Delegates = []string{"lead"}
				case "lead":
					cfg.Profiles[i].Tools = []string{"read"}
				}
			}
		})},
	}
	for _, bl := range profileLoops() {
		loops = append(loops, struct {
			what string
			core CoreFactory
		}{bl.Failure, bl.Core})
	}
	for _, l := range loops {
		t.Run(l.what, func(t *testing.T) {
			assertCaught(t, "profile-tools", l.core, oracle.ProfileTools, l.what)
		})
	}
	// A profile's own budget is I19's: a loop that takes the tree's
	// max_requests for every agent lets the reviewer ask a third time.
	assertCaught(t, "profile-tools", withConfig(func(cfg *kernel.Config) {
		cfg.Profiles = slices.Clone(cfg.Profiles)
		for i := range cfg.Profiles {
			cfg.Profiles[i].MaxRequests = 0
		}
	}), oracle.RequestBudget, "a profile's max_requests ignored")
	// A refusal is I13's to justify: a loop that refuses the tool the
	// profile lists (it reads another profile's list) is caught there.
	assertCaught(t, "profile-tools", withConfig(func(cfg *kernel.Config) {
		cfg.Profiles = slices.Clone(cfg.Profiles)
		for i := range cfg.Profiles {
			if cfg.Profiles[i].Name == "reviewer" {
				cfg.Profiles[i].Tools = []string{"grep"}
			}
		}
	}), oracle.TypedOutcomes, "a refusal of a tool the profile lists")
}
