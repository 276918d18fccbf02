package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/escapement/escapement/adapters/proc"
	"github.com/escapement/escapement/internal/envexpand"
	"github.com/escapement/escapement/internal/userfile"
	"go.yaml.in/yaml/v3"
)

// maxFileBytes bounds a configuration file: settings and profiles, not data.
const maxFileBytes = 1 << 20

// file is one configuration file as read: its settings by key and its
// profiles, each value with the line that says it.
type file struct {
	path string
	kind Kind
	// values are the settings by key: each a scalar or a list of scalars,
	// ${NAME} references expanded.
	values map[string]value
	// profiles in the order the file lists them; profile, the root's
	// profile when the file names one, is a setting like the others.
	profiles []profileNode
	// secrets are the values ${NAME} references put in (but a place's:
	// envexpand.PlaceVar), secretVars their variables.
	secrets, secretVars []string
}

// value is one setting of a file: its text (one item for a scalar) and
// the line that says it.
type value struct {
	items []string
	// lines are the items' lines (a list's items may sit on lines of
	// their own).
	lines []int
	list  bool
	line  int
}

// profileNode is one profile of a file: its fields by key, as values.
type profileNode struct {
	name   string
	line   int
	file   *file
	fields map[string]value
}

// errNotFound is a configuration file that does not exist.
var errNotFound = errors.New("no such file")

// readFile reads and parses the configuration file at path. keys are the
// settings a file may hold, refused the settings it may not (with why):
// anything else is an error naming the file and line. A file that does
// not exist is errNotFound.
func readFile(path string, kind Kind, keys map[string]bool, refused map[string]string, lookup func(string) (string, bool)) (*file, error) {
	data, err := userfile.Read(path, maxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	f := &file{path: path, kind: kind, values: map[string]value{}}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return f, nil // an empty file sets nothing
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		return f, nil
	}
	p := parser{f: f, lookup: lookup}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, p.errf(root, "want a mapping of settings (key: value), got %s", describe(root))
	}
	err = p.mapping(root, func(k, v *yaml.Node) error {
		switch {
		case k.Value == "profiles":
			return p.profiles(v)
		case refused[k.Value] != "":
			return p.errf(k, "%s: %s", k.Value, refused[k.Value])
		case !keys[k.Value]:
			return p.errf(k, "unknown setting %q (settings: %s)", k.Value, strings.Join(sortedKeys(keys), ", "))
		}
		p.prompt = k.Value == "system"
		val, err := p.value(k.Value, v)
		p.prompt = false
		f.values[k.Value] = val
		return err
	})
	return f, err
}

// parser reads one file's nodes.
type parser struct {
	f      *file
	lookup func(string) (string, bool)
	// prompt: the value being read goes into a prompt (a system prompt,
	// a profile's description), where no secret may go.
	prompt bool
}

func (p *parser) errf(n *yaml.Node, format string, args ...any) error {
	return fmt.Errorf("%s:%d: %s", p.f.path, n.Line, fmt.Sprintf(format, args...))
}

// mapping calls fn for each key and value of n, refusing a key given twice
// and a key that is not a plain scalar.
func (p *parser) mapping(n *yaml.Node, fn func(k, v *yaml.Node) error) error {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return p.errf(k, "a key is a word, got %s", describe(k))
		}
		if line, dup := seen[k.Value]; dup {
			return p.errf(k, "%s is set twice (first on line %d)", k.Value, line)
		}
		seen[k.Value] = k.Line
		if err := fn(k, resolveAlias(v)); err != nil {
			return err
		}
	}
	return nil
}

// resolveAlias follows an alias to the node it names.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// value reads a setting: a scalar, or a list of scalars, each expanded.
func (p *parser) value(key string, n *yaml.Node) (value, error) {
	v := value{line: n.Line}
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return v, p.errf(n, "%s has no value", key)
		}
		s, err := p.expand(key, n)
		v.items, v.lines = []string{s}, []int{n.Line}
		return v, err
	case yaml.SequenceNode:
		v.list, v.items = true, []string{}
		for _, it := range n.Content {
			it = resolveAlias(it)
			if it.Kind != yaml.ScalarNode || it.Tag == "!!null" {
				return v, p.errf(it, "%s: a list item is a value, got %s", key, describe(it))
			}
			s, err := p.expand(key, it)
			if err != nil {
				return v, err
			}
			v.items, v.lines = append(v.items, s), append(v.lines, it.Line)
		}
		return v, nil
	}
	return v, p.errf(n, "%s: want a value or a list of values, got %s", key, describe(n))
}

// expand expands n's ${NAME} references, recording the values they put in
// as secrets (but a place's). In a prompt only a place may be put in: a
// secret must never reach a model.
func (p *parser) expand(key string, n *yaml.Node) (string, error) {
	check := func(name string) error {
		if name == proc.APIKeyVar {
			return fmt.Errorf("${%s}: the API key goes only into the Authorization header of the model's requests", name)
		}
		if p.prompt && !envexpand.PlaceVar(name) {
			return fmt.Errorf("${%s}: a variable's value is taken for a secret, and a secret never goes into a prompt (only places such as ${HOME} or ${USER} may)", name)
		}
		return nil
	}
	s, err := envexpand.Expand(n.Value, p.lookup, check, func(name, v string) {
		if !envexpand.PlaceVar(name) {
			p.f.secrets = append(p.f.secrets, v)
			p.f.secretVars = append(p.f.secretVars, name)
		}
	})
	if err != nil {
		return "", p.errf(n, "%s: %v", key, err)
	}
	return s, nil
}

// profiles reads the profiles mapping: name → fields.
func (p *parser) profiles(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return p.errf(n, "profiles: want a mapping of profiles by name, got %s", describe(n))
	}
	return p.mapping(n, func(k, v *yaml.Node) error {
		if v.Kind != yaml.MappingNode {
			return p.errf(v, "profiles.%s: want a mapping of its settings, got %s", k.Value, describe(v))
		}
		pn := profileNode{name: k.Value, line: k.Line, file: p.f, fields: map[string]value{}}
		err := p.mapping(v, func(fk, fv *yaml.Node) error {
			if !slices.Contains(profileKeys, fk.Value) {
				return p.errf(fk, "profiles.%s: unknown setting %q (a profile's settings: %s)", k.Value, fk.Value, strings.Join(profileKeys, ", "))
			}
			p.prompt = fk.Value == "system" || fk.Value == "description"
			val, err := p.value("profiles."+k.Value+"."+fk.Value, fv)
			p.prompt = false
			pn.fields[fk.Value] = val
			return err
		})
		p.f.profiles = append(p.f.profiles, pn)
		return err
	})
}

// describe names what a node is, for errors.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m { // sorted below
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
