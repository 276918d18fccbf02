package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// setup is a command's flags and a directory holding a user file, a
// workspace and its project file.
type setup struct {
	fs                     *pflag.FlagSet
	dir, user, ws, project string
	env                    map[string]string
	notices                []string
	maxDepth               int
	model                  string
	tools                  []string
}

func newSetup(t *testing.T) *setup {
	t.Helper()
	dir := t.TempDir()
	s := &setup{dir: dir, user: filepath.Join(dir, "xdg", "escapement", "config.yaml"), ws: filepath.Join(dir, "ws"),
		env: map[string]string{"XDG_CONFIG_HOME": filepath.Join(dir, "xdg")}}
	s.project = filepath.Join(s.ws, ProjectFile)
	if err := os.MkdirAll(s.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	s.fs = pflag.NewFlagSet("run", pflag.ContinueOnError)
	s.fs.IntVar(&s.maxDepth, "max-depth", 8, "")
	s.fs.StringVar(&s.model, "model", "default-model", "")
	s.fs.StringArrayVar(&s.tools, "tool-env", nil, "")
	s.fs.String(FlagWorkspace, s.ws, "")
	s.fs.String("session", "", "")
	(&Flags{}).Register(s.fs)
	return s
}

func (s *setup) write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *setup) resolve(args ...string) (*Config, error) {
	if err := s.fs.Parse(args); err != nil {
		return nil, err
	}
	return Resolve(s.fs, Options{Files: true, Lookup: func(k string) (string, bool) { v, ok := s.env[k]; return v, ok },
		Aliases: map[string]string{"model": "OPENAI_MODEL"}, Notice: func(n string) { s.notices = append(s.notices, n) }})
}

// TestPrecedence: each source beats the ones below it, setting by setting:
// flag > environment (ESCAPEMENT_, then the alias) > project > user >
// default, and each value says where it came from.
func TestPrecedence(t *testing.T) {
	type want struct {
		depth int
		src   Kind
	}
	cases := []struct {
		name string
		prep func(s *setup) []string
		want want
	}{
		{"default", func(s *setup) []string { return nil }, want{8, Default}},
		{"user", func(s *setup) []string { return nil }, want{3, User}},
		{"project", func(s *setup) []string { return []string{"--trust-project"} }, want{2, Project}},
		{"env", func(s *setup) []string { s.env["ESCAPEMENT_MAX_DEPTH"] = "1"; return []string{"--trust-project"} }, want{1, Env}},
		{"flag", func(s *setup) []string {
			s.env["ESCAPEMENT_MAX_DEPTH"] = "1"
			return []string{"--trust-project", "--max-depth", "0"}
		}, want{0, Flag}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t)
			if i >= 1 {
				s.write(t, s.user, "max_depth: 3\n")
			}
			if i >= 2 {
				s.write(t, s.project, "max_depth: 2\n")
			}
			c, err := s.resolve(tc.prep(s)...)
			if err != nil {
				t.Fatal(err)
			}
			if src := c.Source("max-depth"); s.maxDepth != tc.want.depth || src.Kind != tc.want.src {
				t.Fatalf("max_depth %d from %s, want %d from kind %d", s.maxDepth, src, tc.want.depth, tc.want.src)
			}
		})
	}
}

// TestAliasBelowItsVariable: OPENAI_MODEL still sets the model, below
// ESCAPEMENT_MODEL and above the files.
func TestAliasBelowItsVariable(t *testing.T) {
	s := newSetup(t)
	s.write(t, s.user, "model: from-file\n")
	s.env["OPENAI_MODEL"] = "from-openai"
	c, err := s.resolve()
	if err != nil || s.model != "from-openai" || c.Source("model").String() != "env OPENAI_MODEL" {
		t.Fatalf("model %q from %s (%v), want from-openai from env OPENAI_MODEL", s.model, c.Source("model"), err)
	}
	s = newSetup(t)
	s.env["OPENAI_MODEL"], s.env["ESCAPEMENT_MODEL"] = "from-openai", "from-escapement"
	if _, err := s.resolve(); err != nil || s.model != "from-escapement" {
		t.Fatalf("model %q (%v), want ESCAPEMENT_MODEL's", s.model, err)
	}
}

// TestProjectFileTrust: a project file is read only with --trust-project
// (or its variable); without, it is reported once and nothing of it is
// read — not even a setting the user file lacks.
func TestProjectFileTrust(t *testing.T) {
	s := newSetup(t)
	s.write(t, s.project, "model: hostile\n")
	c, err := s.resolve()
	if err != nil || s.model != "default-model" || len(s.notices) != 1 || !strings.Contains(s.notices[0], "ignoring "+s.project) {
		t.Fatalf("untrusted: model %q, notices %q (%v)", s.model, s.notices, err)
	}
	if c.project != nil || !c.ignored {
		t.Fatal("the untrusted file was read")
	}
	s = newSetup(t)
	s.write(t, s.project, "model: mine\n")
	s.env["ESCAPEMENT_TRUST_PROJECT"] = "1"
	if _, err := s.resolve(); err != nil || s.model != "mine" || len(s.notices) != 0 {
		t.Fatalf("trusted by its variable: model %q, notices %q (%v)", s.model, s.notices, err)
	}
}

// TestFileErrorsNameTheLine: what a file says wrong is an error naming the
// file and the line that says it.
func TestFileErrorsNameTheLine(t *testing.T) {
	cases := []struct {
		name, file, want string
		project          bool
	}{
		{"unknown setting", "model: a\nmodle: b\n", `:2: unknown setting "modle"`, false},
		{"set twice", "model: a\nmodel: b\n", `:2: model is set twice (first on line 1)`, false},
		{"a list for a value", "\nmodel: [a, b]\n", `:2: model takes one value, not a list`, false},
		{"the workspace as a list", "workspace: [a, b]\n", `:1: workspace takes one value, not a list`, false},
		{"the workspace as an empty list", "workspace: []\n", `:1: workspace takes one value, not a list`, false},
		{"a bad value", "max_depth: deep\n", `:1: max_depth: invalid argument "deep"`, false},
		{"a per-run setting", "\n\nsession: s.jsonl\n", `:3: session: it names one run's file`, false},
		{"trust in a file", "trust_project: true\n", `:1: trust_project: trust is given for one run`, false},
		{"the workspace in the project file", "workspace: /\n", `:1: workspace: the project file is found in the workspace`, true},
		{"an unset variable", "model: ${NOPE}\n", `:1: model: ${NOPE}: the variable NOPE is not set`, false},
		{"the API key", "model: ${OPENAI_API_KEY}\n", `:1: model: ${OPENAI_API_KEY}: the API key goes only`, false},
		{"a secret in a prompt", "profiles:\n  p:\n    system: \"use ${SECRET_TOKEN}\"\n", `:3: profiles.p.system: ${SECRET_TOKEN}: a variable's value is taken for a secret`, false},
		{"a profile's unknown setting", "profiles:\n  p:\n    modle: x\n", `:3: profiles.p: unknown setting "modle"`, false},
		{"a profile's tool its parent lacks", "profiles:\n  lead:\n    tools: [read]\n    delegates: [rev]\n  rev:\n    tools:\n      - read\n      - shell\n",
			`:8: profile "rev": tool "shell" is not among the tools of profile "lead"`, false},
		{"a profile's unknown delegate", "profiles:\n  lead:\n    delegates: [a, b]\n  a: {}\n", `:3: profile "lead": delegates to "b"`, false},
		{"a negative limit", "profiles:\n  p:\n    max_children: -1\n", `:3: profiles.p.max_children: want a whole number, 0 or more, got "-1"`, false},
		{"tools not a list", "profiles:\n  p:\n    tools: read\n", `:3: profiles.p.tools: want a list`, false},
		{"a root profile nobody defines", "profile: boss\nprofiles:\n  p: {}\n", `profile (user `, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t)
			s.env["SECRET_TOKEN"] = "tok-0123456789abcdef"
			path, args := s.user, []string(nil)
			if tc.project {
				path, args = s.project, []string{"--trust-project"}
			}
			s.write(t, path, tc.file)
			_, err := s.resolve(args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (!strings.HasPrefix(tc.want, "profile (") && !strings.HasPrefix(err.Error(), path+":")) {
				t.Fatalf("error %v, want %s%s", err, path, tc.want)
			}
		})
	}
}

// TestListsAndSecrets: a list setting reads a YAML list from a file and
// comma-separated values from its variable; the values ${NAME} references
// put in are secrets (a place's, ${HOME}, is not), their variables
// withheld with the key's.
func TestListsAndSecrets(t *testing.T) {
	s := newSetup(t)
	s.write(t, s.user, "tool_env: [A, B]\nmodel: \"m-${MODEL_TOKEN}-${HOME}\"\n")
	s.env["MODEL_TOKEN"], s.env["HOME"] = "tok-0123456789abcdef", "/home/me"
	c, err := s.resolve()
	if err != nil || !slices.Equal(s.tools, []string{"A", "B"}) || s.model != "m-tok-0123456789abcdef-/home/me" {
		t.Fatalf("tool_env %q, model %q (%v)", s.tools, s.model, err)
	}
	if !slices.Equal(c.Secrets(), []string{"tok-0123456789abcdef"}) || !slices.Equal(c.SecretVars(), []string{"MODEL_TOKEN", "OPENAI_API_KEY"}) {
		t.Fatalf("secrets %q from %q: want the token's only", c.Secrets(), c.SecretVars())
	}
	s = newSetup(t)
	s.env["ESCAPEMENT_TOOL_ENV"] = "X,Y"
	if _, err := s.resolve(); err != nil || !slices.Equal(s.tools, []string{"X", "Y"}) {
		t.Fatalf("tool_env from its variable: %q (%v)", s.tools, err)
	}
}

// TestProjectProfileReplacesUsers: a trusted project file's profile
// replaces the user file's of the same name whole (no field merging), and
// says where it is defined.
func TestProjectProfileReplacesUsers(t *testing.T) {
	s := newSetup(t)
	s.write(t, s.user, "profiles:\n  rev:\n    system: user's\n    tools: [read]\n  other: {}\n")
	s.write(t, s.project, "profiles:\n  rev:\n    model: small\n")
	c, err := s.resolve("--trust-project")
	if err != nil {
		t.Fatal(err)
	}
	ps := c.Profiles()
	if len(ps) != 2 || ps[1].Name != "rev" || ps[1].System != "" || !ps[1].AllTools || ps[1].Endpoint.Model != "small" || ps[1].At.Kind != Project {
		t.Fatalf("profiles %+v: want the user's other, then the project's rev whole", ps)
	}
}

// TestNoVariableWithoutAName: a flag without an alias reads its own
// variable only, never one of an empty name, whatever Lookup answers for
// it (an embedding program's Lookup may answer for any string).
func TestNoVariableWithoutAName(t *testing.T) {
	s := newSetup(t)
	s.env[""] = "3"
	c, err := s.resolve()
	if err != nil {
		t.Fatalf("a variable without a name was read: %v", err)
	}
	if s.maxDepth != 8 || c.Source("max-depth").Kind != Default {
		t.Fatalf("max_depth %d from %v, want the default 8", s.maxDepth, c.Source("max-depth"))
	}
}
