package config

import (
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/internal/redact"
	"github.com/spf13/pflag"
)

// Flags are the flags the configuration adds to run and chat (and to
// config show): the file, the trust in the workspace's, the root's profile
// and the variable that holds the API key.
type Flags struct {
	File         string
	TrustProject bool
	Profile      string
	APIKeyEnv    string
}

// Register adds the flags to fl.
func (f *Flags) Register(fl *pflag.FlagSet) {
	fl.StringVar(&f.File, FlagConfig, "", "read the configuration from `FILE` (default $XDG_CONFIG_HOME/escapement/config.yaml; see docs/config.md)")
	fl.BoolVar(&f.TrustProject, FlagTrustProject, false, "also read the workspace's "+ProjectFile+" (without it the file is ignored: a repository can be hostile, and the file may set the endpoint, the shell and the MCP servers)")
	fl.StringVar(&f.Profile, FlagProfile, "", "the root agent's `PROFILE`, one of the configuration's profiles (its system prompt, model, tools and budgets)")
	fl.StringVar(&f.APIKeyEnv, FlagAPIKeyEnv, proc.APIKeyVar, "the environment variable that holds the API key (a file names the variable, never the key)")
}

// redacted is what config show prints for a key that is set.
const redacted = "(set, not shown)"

// Show writes the effective configuration: the files looked at, every
// setting of the command with its value and where it came from, whether
// each API key is set (never the key), and the profiles. Every value is
// redacted with red, the files' secrets, the keys and the passwords of
// URLs.
func (c *Config) Show(w io.Writer, red *redact.Redactor) error {
	keys := c.keys()
	red = red.With(append(c.Secrets(), keys...)...)
	fmt.Fprintf(w, "user file:    %s\n", c.fileState(c.userPath, c.user != nil, false))
	fmt.Fprintf(w, "project file: %s\n\n", c.fileState(c.projectPath, c.project != nil, c.ignored))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SETTING\tVALUE\tSOURCE")
	var rows [][3]string
	c.fs.VisitAll(func(f *pflag.Flag) {
		if HasEnv(f.Name) {
			rows = append(rows, [3]string{Key(f.Name), f.Value.String(), c.Source(f.Name).String()})
		}
	})
	keyVar := c.rootKeyVar()
	rows = append(rows, [3]string{"api_key", c.keyState(keyVar), "env " + keyVar})
	for _, p := range c.profiles {
		rows = append(rows, c.profileRows(p, keyVar)...)
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r[0], shown(red, r[1]), red.Redact(r[2]))
	}
	return tw.Flush()
}

// profileRows are one profile's rows: where it is defined, then each
// setting it has.
func (c *Config) profileRows(p Profile, rootKeyVar string) [][3]string {
	at := p.At.String()
	prefix := "profiles." + p.Name + "."
	rows := [][3]string{{"profiles." + p.Name, "", at}}
	add := func(key, v string) {
		src := at
		if f, ok := p.node.fields[key]; ok {
			src = Source{Kind: p.At.Kind, File: p.At.File, Line: f.line}.String()
		}
		rows = append(rows, [3]string{prefix + key, v, src})
	}
	add("description", p.Description)
	add("system", p.System)
	add("model", or(p.Endpoint.Model, "(the root's)"))
	add("base_url", or(p.Endpoint.BaseURL, "(the root's)"))
	tools := "(every tool)"
	if !p.AllTools {
		tools = "[" + strings.Join(p.Tools, ", ") + "]"
	}
	add("tools", tools)
	add("delegates", "["+strings.Join(p.Delegates, ", ")+"]")
	for _, l := range []struct {
		key string
		n   int
	}{{"max_requests", p.MaxRequests}, {"max_children", p.MaxChildren}, {"max_depth", p.MaxDepth}} {
		if l.n > 0 {
			add(l.key, strconv.Itoa(l.n))
		}
	}
	switch {
	case p.Endpoint.APIKeyEnv != "":
		rows = append(rows, [3]string{prefix + "api_key", c.keyState(p.Endpoint.APIKeyEnv), "env " + p.Endpoint.APIKeyEnv})
	case p.Endpoint.BaseURL == "" || p.Endpoint.BaseURL == c.value("base-url"):
		rows = append(rows, [3]string{prefix + "api_key", c.keyState(rootKeyVar) + " (the root's)", "env " + rootKeyVar})
	default:
		rows = append(rows, [3]string{prefix + "api_key", "(none: another endpoint, and no api_key_env)", at})
	}
	return rows
}

// keys are the API keys the configuration names, as set in the
// environment.
func (c *Config) keys() []string {
	var out []string
	for _, v := range c.keyVars() {
		if k, ok := c.lookup(v); ok && k != "" {
			out = append(out, k)
		}
	}
	return out
}

// keyVars are the variables that hold API keys: the root's and each
// profile's.
func (c *Config) keyVars() []string {
	vars := []string{c.rootKeyVar()}
	for _, p := range c.profiles {
		if p.Endpoint.APIKeyEnv != "" {
			vars = append(vars, p.Endpoint.APIKeyEnv)
		}
	}
	return vars
}

// rootKeyVar is the variable that holds the root's key.
func (c *Config) rootKeyVar() string { return or(c.value(FlagAPIKeyEnv), proc.APIKeyVar) }

// value is flag name's value ("" when the command lacks it).
func (c *Config) value(name string) string {
	if f := c.fs.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

func (c *Config) keyState(name string) string {
	if v, ok := c.lookup(name); ok && v != "" {
		return redacted
	}
	return "(not set)"
}

func (c *Config) fileState(path string, read, ignored bool) string {
	switch {
	case path == "":
		return "(none)"
	case read:
		return path
	case ignored:
		return path + " (ignored: read only with --" + FlagTrustProject + ")"
	}
	return path + " (not found)"
}

// shown is a value as config show prints it: redacted (a URL's password
// too), then quoted when it is empty, starts or ends with a space, or
// holds control characters or quotes (a multi-line prompt stays on its
// row).
func shown(red *redact.Redactor, v string) string {
	if u, err := url.Parse(v); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			red = red.With(pw, url.QueryEscape(pw), url.PathEscape(pw))
		}
	}
	v = red.Redact(v)
	if v == "" || strings.TrimSpace(v) != v || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == '"' || r == 0x7f }) {
		return strconv.Quote(v)
	}
	return v
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
