package main

import (
	"strings"
	"testing"

	"github.com/escapement/escapement/adapters/config"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestEveryFlagHasAnEnvironmentVariable: every flag of every command —
// its own and those it inherits — is set by its ESCAPEMENT_ variable
// (but --help and --version), named from the flag, so a flag added later
// cannot be missed: the variables come from the flag set, not a list.
// Each command's flags are set at once from their variables, and each
// must read its value from the environment.
func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	root := newRootCmd(&app{})
	var all []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		all = append(all, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	flags := 0
	for _, c := range all {
		fs := c.Flags()
		fs.AddFlagSet(c.InheritedFlags()) // as cobra does when the command runs
		env := map[string]string{}
		fs.VisitAll(func(f *pflag.Flag) {
			if config.HasEnv(f.Name) {
				env[config.EnvName(f.Name)] = sample(f)
			}
		})
		res, err := config.Resolve(fs, config.Options{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
		if err != nil {
			t.Fatalf("%s: %v", c.CommandPath(), err)
		}
		fs.VisitAll(func(f *pflag.Flag) {
			if !config.HasEnv(f.Name) {
				if f.Name != "help" && f.Name != "version" {
					t.Errorf("%s --%s has no variable", c.CommandPath(), f.Name)
				}
				return
			}
			flags++
			name := config.EnvName(f.Name)
			if src := res.Source(f.Name); src.Kind != config.Env || src.Name != name || !strings.Contains(f.Value.String(), strings.Trim(env[name], "s")) {
				t.Errorf("%s --%s: %s=%s gives %q from %s", c.CommandPath(), f.Name, name, env[name], f.Value, src)
			}
		})
	}
	if flags < 60 {
		t.Fatalf("only %d flags checked", flags)
	}
}

// sample is a value flag f takes that differs from its default.
func sample(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "bool":
		if f.DefValue == "true" {
			return "false"
		}
		return "true"
	case "duration":
		return "7s"
	case "int", "int64", "uint", "uint64", "uint32", "int32", "float64", "float32", "count":
		return "7"
	}
	return "x7"
}
