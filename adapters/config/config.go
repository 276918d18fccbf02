// Package config is escapement's configuration (docs/config.md): a user
// file ($XDG_CONFIG_HOME/escapement/config.yaml, or --config FILE), a
// project file (.escapement.yaml in the workspace) read only with
// --trust-project, an ESCAPEMENT_* environment variable for every flag,
// and the flags themselves, in that order of precedence from lowest to
// highest: flag > environment > project > user > default.
//
// A file's settings are the flags of run and chat by their names with
// '_' for '-' (max_depth for --max-depth), and its profiles (the kinds of
// agent: docs/semantics.md, "Profiles"). Resolve writes what the
// environment and the files say into the command's flags — through each
// flag's own parser, so a value is read the same way wherever it comes
// from — and remembers where every value came from, which `escapement
// config show` prints, secrets redacted. Everything a file says is
// checked: an unknown setting, a value of the wrong shape, a profile that
// cannot hold is an error naming the file and line.
package config

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// Kind is where a setting's value came from; a later kind takes
// precedence over an earlier one.
type Kind uint8

// Kinds of source, lowest precedence first.
const (
	Default Kind = iota
	User
	Project
	Env
	Flag
)

// Source says where one setting's value came from.
type Source struct {
	Kind Kind
	// File and Line locate a value from a file (User, Project).
	File string
	Line int
	// Name is the variable (Env) or the flag (Flag) that gave it.
	Name string
}

func (s Source) String() string {
	switch s.Kind {
	case Flag:
		return "flag --" + s.Name
	case Env:
		return "env " + s.Name
	case Project:
		return fmt.Sprintf("project %s:%d", s.File, s.Line)
	case User:
		return fmt.Sprintf("user %s:%d", s.File, s.Line)
	}
	return "default"
}

// Names of the flags the configuration itself reads.
const (
	FlagConfig       = "config"
	FlagTrustProject = "trust-project"
	FlagProfile      = "profile"
	FlagAPIKeyEnv    = "api-key-env"
	FlagWorkspace    = "workspace"
)

// ProjectFile is the project file's name in the workspace.
const ProjectFile = ".escapement.yaml"

// EnvPrefix starts the variable of every flag: EnvName.
const EnvPrefix = "ESCAPEMENT_"

// EnvName is the environment variable that sets flag name:
// ESCAPEMENT_MAX_DEPTH for --max-depth.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Key is a flag's setting in a configuration file: max_depth for
// --max-depth.
func Key(flag string) string { return strings.ReplaceAll(flag, "-", "_") }

// noEnv are the flags that have no variable: asking for help or the
// version is what a person types, not a standing setting.
var noEnv = map[string]bool{"help": true, "version": true}

// HasEnv reports whether flag name is set by its environment variable
// (every flag but --help and --version).
func HasEnv(name string) bool { return !noEnv[name] }

// perRun are the flags no file may set, and why.
var perRun = map[string]string{
	FlagConfig:       "the configuration file is named by --config or " + EnvName(FlagConfig),
	FlagTrustProject: "trust is given for one run, by --trust-project or " + EnvName(FlagTrustProject),
	"session":        "it names one run's file: give --session",
	"resume":         "it names one run's file: give --resume",
	"trace":          "it names one run's file: give --trace",
}

// Options say how Resolve reads the settings.
type Options struct {
	// Lookup reads an environment variable; os.LookupEnv when nil.
	Lookup func(string) (string, bool)
	// Files: the configuration files apply (run, chat, config show).
	// Without, only the environment does.
	Files bool
	// Keys are the flags a file may set: those of every command the files
	// apply to (a chat-only setting in the file is valid for run, which
	// ignores it). The flags of the command when nil.
	Keys []string
	// Aliases name, for a flag, an older variable read when its
	// ESCAPEMENT_ one is not set (model: OPENAI_MODEL).
	Aliases map[string]string
	// Notice receives what the user must be told (a project file that was
	// not read); nil drops it.
	Notice func(string)
}

// UserFile is where the user's configuration file is by default:
// $XDG_CONFIG_HOME/escapement/config.yaml, ~/.config/escapement/config.yaml
// when that is not set; "" when neither variable is.
func UserFile(lookup func(string) (string, bool)) string {
	if dir, ok := lookup("XDG_CONFIG_HOME"); ok && dir != "" {
		return filepath.Join(dir, "escapement", "config.yaml")
	}
	if home, ok := lookup("HOME"); ok && home != "" {
		return filepath.Join(home, ".config", "escapement", "config.yaml")
	}
	return ""
}

// Config is the effective configuration of one command: what its flags
// hold now, where each value came from, the files read and the profiles
// they define.
type Config struct {
	fs      *pflag.FlagSet
	lookup  func(string) (string, bool)
	sources map[string]Source
	// user and project are the files read (nil: none); userPath and
	// projectPath where they were looked for, ignored the project file
	// found but not read.
	user, project         *file
	userPath, projectPath string
	ignored               bool
	profiles              []Profile
}

// Resolve fills the flags of fs that the command line left unset from,
// in order, their ESCAPEMENT_ variables (and Aliases), the project file
// (with --trust-project) and the user file, and returns where each value
// came from. A project file that exists but is not trusted is reported
// once through Notice.
func Resolve(fs *pflag.FlagSet, o Options) (*Config, error) {
	if o.Lookup == nil {
		o.Lookup = os.LookupEnv
	}
	c := &Config{fs: fs, lookup: o.Lookup, sources: map[string]Source{}}
	fs.Visit(func(f *pflag.Flag) { c.sources[f.Name] = Source{Kind: Flag, Name: f.Name} })
	// The flags that find the files come first.
	for _, name := range []string{FlagConfig, FlagTrustProject, FlagWorkspace} {
		if err := c.fromEnv(fs.Lookup(name), o); err != nil {
			return nil, err
		}
	}
	if o.Files {
		if err := c.readFiles(o); err != nil {
			return nil, err
		}
	}
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err == nil && HasEnv(f.Name) {
			err = c.resolve(f, o)
		}
	})
	if err != nil {
		return nil, err
	}
	if o.Files {
		if err := c.readProfiles(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// fromEnv sets flag f from its variable (or its alias) when nothing set
// it yet; f may be nil (a command without the flag).
func (c *Config) fromEnv(f *pflag.Flag, o Options) error {
	if f == nil {
		return nil
	}
	if _, set := c.sources[f.Name]; set {
		return nil
	}
	for _, name := range []string{EnvName(f.Name), o.Aliases[f.Name]} {
		v, ok := c.lookup(name)
		if name == "" || !ok || v == "" {
			continue
		}
		items := []string{v}
		if isList(f) {
			items = strings.Split(v, ",")
		}
		if err := c.set(f, items); err != nil {
			return fmt.Errorf("$%s: %w", name, err)
		}
		c.sources[f.Name] = Source{Kind: Env, Name: name}
		return nil
	}
	return nil
}

// resolve gives flag f its value from the highest source that has one.
func (c *Config) resolve(f *pflag.Flag, o Options) error {
	if err := c.fromEnv(f, o); err != nil {
		return err
	}
	if _, set := c.sources[f.Name]; set {
		return nil
	}
	for _, fl := range []*file{c.project, c.user} {
		if fl == nil {
			continue
		}
		v, ok := fl.values[Key(f.Name)]
		if !ok {
			continue
		}
		if v.list && !isList(f) {
			return fmt.Errorf("%s:%d: %s takes one value, not a list", fl.path, v.line, Key(f.Name))
		}
		if err := c.set(f, v.items); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", fl.path, v.line, Key(f.Name), err)
		}
		c.sources[f.Name] = Source{Kind: fl.kind, File: fl.path, Line: v.line}
		return nil
	}
	c.sources[f.Name] = Source{Kind: Default}
	return nil
}

// set writes items into f through its own parser.
func (c *Config) set(f *pflag.Flag, items []string) error {
	for _, it := range items {
		if err := c.fs.Set(f.Name, it); err != nil {
			return err
		}
	}
	return nil
}

// isList reports whether f takes many values (a repeatable flag).
func isList(f *pflag.Flag) bool {
	t := f.Value.Type()
	return strings.HasSuffix(t, "Array") || strings.HasSuffix(t, "Slice")
}

// readFiles reads the user file and, when trusted, the project file of
// the workspace; an untrusted one is reported, not read.
func (c *Config) readFiles(o Options) error {
	keys, refused := fileKeys(c.fs, o.Keys)
	if err := c.readUser(keys, refused); err != nil {
		return err
	}
	c.projectPath = filepath.Join(c.workspace(), ProjectFile)
	if abs, err := filepath.Abs(c.projectPath); err == nil {
		c.projectPath = abs
	}
	if _, err := os.Lstat(c.projectPath); err != nil {
		c.projectPath = ""
		return nil
	}
	if f := c.fs.Lookup(FlagTrustProject); f == nil || f.Value.String() != "true" {
		c.ignored = true
		if o.Notice != nil {
			o.Notice(fmt.Sprintf("ignoring %s: a project's configuration is read only with --trust-project (a repository can be hostile)", c.projectPath))
		}
		return nil
	}
	refused[Key(FlagWorkspace)] = "the project file is found in the workspace, so it cannot move it: set the workspace in the user file, the environment or a flag"
	var err error
	c.project, err = readFile(c.projectPath, Project, keys, refused, c.lookup)
	return err
}

// fileKeys are the settings a file may hold — the flags named (fs's when
// none are) but those that have no variable or are per run — and those it
// may not, with why.
func fileKeys(fs *pflag.FlagSet, names []string) (keys map[string]bool, refused map[string]string) {
	if names == nil {
		names = Names(fs)
	}
	keys, refused = map[string]bool{}, map[string]string{}
	for _, n := range names {
		if HasEnv(n) && perRun[n] == "" {
			keys[Key(n)] = true
		}
	}
	for n, why := range perRun {
		refused[Key(n)] = why
	}
	return keys, refused
}

// readUser reads the user file: --config's (which must exist), else the
// one at its default place, if any.
func (c *Config) readUser(keys map[string]bool, refused map[string]string) error {
	c.userPath = UserFile(c.lookup)
	named := false
	if f := c.fs.Lookup(FlagConfig); f != nil && f.Value.String() != "" {
		c.userPath, named = f.Value.String(), true
	}
	if c.userPath == "" {
		return nil
	}
	var err error
	c.user, err = readFile(c.userPath, User, keys, refused, c.lookup)
	switch {
	case err == errNotFound && named:
		return fmt.Errorf("--config %s: no such file", c.userPath)
	case err == errNotFound:
		c.user = nil
		return nil
	}
	return err
}

// workspace is the workspace as the command line, the environment or the
// user file set it (the project file is looked for there).
func (c *Config) workspace() string {
	f := c.fs.Lookup(FlagWorkspace)
	if f == nil {
		return "."
	}
	if _, set := c.sources[f.Name]; set {
		return f.Value.String()
	}
	if c.user != nil {
		if v, ok := c.user.values[Key(FlagWorkspace)]; ok && len(v.items) == 1 {
			return v.items[0]
		}
	}
	return f.Value.String()
}

// Source is where flag name got its value (Default for a flag the command
// lacks).
func (c *Config) Source(name string) Source { return c.sources[name] }

// Secrets are the values the files' ${NAME} references put in (but a
// place's), each also as a URL's query and path escape it, sorted: the
// run must never show them.
func (c *Config) Secrets() []string {
	return c.collect(func(f *file) []string {
		var out []string
		for _, v := range f.secrets {
			out = append(out, v, url.QueryEscape(v), url.PathEscape(v))
		}
		return out
	})
}

// SecretVars are the variables those values came from and the variables
// that hold the API keys (the root's and every profile's): no process but
// the model's client may inherit them.
func (c *Config) SecretVars() []string {
	vars := append(c.collect(func(f *file) []string { return f.secretVars }), c.keyVars()...)
	slices.Sort(vars)
	return slices.Compact(vars)
}

func (c *Config) collect(of func(*file) []string) []string {
	var out []string
	for _, f := range []*file{c.user, c.project} {
		if f != nil {
			out = append(out, of(f)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CLI are the options of escapement's commands: the files apply to those
// with --trust-project (run, chat, config show) and may set every flag of
// keys (run's and chat's, and the global ones); OPENAI_MODEL and
// OPENAI_BASE_URL still set the model and the endpoint, below their
// ESCAPEMENT_ variables; the notice goes to w.
func CLI(fs *pflag.FlagSet, w io.Writer, keys ...*pflag.FlagSet) Options {
	return Options{Files: fs.Lookup(FlagTrustProject) != nil, Keys: Names(keys...),
		Aliases: map[string]string{"model": "OPENAI_MODEL", "base-url": "OPENAI_BASE_URL"},
		Notice:  func(s string) { fmt.Fprintf(w, "escapement: %s\n", s) }}
}

// Names lists the flags of the flag sets, by name (Options.Keys).
func Names(sets ...*pflag.FlagSet) []string {
	var names []string
	for _, fs := range sets {
		fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	}
	return names
}

// Keys are the API keys the configuration names (the root's variable and
// each profile's), as the environment holds them: the run must redact
// them.
func (c *Config) Keys() []string { return c.keys() }
