package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/escapement/escapement/internal/userfile"
	"github.com/escapement/escapement/kernel"
	"go.yaml.in/yaml/v3"
)

// LoadError is a bad scenario, located. Error() reads
// "file:line:col: field.path: what is wrong"; each part is left out when
// unknown (a generated scenario has no file, a syntax error no path).
type LoadError struct {
	File string
	Line int
	Col  int
	// Path is the field the error is about, as agents.main[0].calls[1].
	Path string
	Msg  string
	at   fieldPath // Path, structured: Load finds its line and column with it
}

func (e *LoadError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(":")
		if e.Col > 0 {
			b.WriteString(strconv.Itoa(e.Col))
			b.WriteString(":")
		}
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// MaxScenarioBytes bounds a scenario file.
const MaxScenarioBytes = 4 << 20

// aliasSlack is how many values aliases may repeat beyond the number of
// values a file writes out (see decoder.budget).
const aliasSlack = 10_000

// LoadFile reads and validates one scenario file (read as LoadPaths reads
// one).
func LoadFile(file string) (*Scenario, error) {
	data, err := readFile(file)
	if err != nil {
		return nil, err
	}
	return Load(file, data)
}

// readFile reads a scenario file a user names: a FIFO, a device such as
// /dev/zero or a file past MaxScenarioBytes is refused, naming it, instead
// of hanging or filling memory (internal/userfile).
func readFile(file string) ([]byte, error) {
	data, err := userfile.Read(file, MaxScenarioBytes)
	if err != nil {
		return nil, &LoadError{File: file, Msg: strings.TrimPrefix(err.Error(), file+": ")}
	}
	return data, nil
}

// Load parses and validates one scenario. file is used in error messages.
func Load(file string, data []byte) (*Scenario, error) {
	s, _, err := load(file, data)
	return s, err
}

// load is Load, also returning where the scenario's name is written (for
// the error when two files use one name).
func load(file string, data []byte) (*Scenario, *yaml.Node, error) {
	if len(data) > MaxScenarioBytes {
		return nil, nil, &LoadError{File: file, Msg: fmt.Sprintf("file is %d bytes, the limit is %d", len(data), MaxScenarioBytes)}
	}
	text, err := yamlText(file, data)
	if err != nil {
		return nil, nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, &LoadError{File: file, Line: 1, Msg: "empty scenario"}
		}
		return nil, nil, syntaxError(file, text, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, nil, &LoadError{File: file, Line: extra.Line, Msg: "more than one YAML document; one scenario per file"}
	} else if !errors.Is(err, io.EOF) {
		return nil, nil, syntaxError(file, text, err)
	}
	root := &doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, nil, &LoadError{File: file, Line: 1, Msg: "empty scenario"}
		}
		root = doc.Content[0]
	}
	s := &Scenario{File: file, Limits: kernel.DefaultLimits()}
	d := &decoder{file: file, budget: size(root) + aliasSlack}
	if err := d.value(root, scenarioPlan(), nil, reflect.ValueOf(s).Elem()); err != nil {
		return nil, nil, err
	}
	s.FillDefaults()
	if err := s.Validate(); err != nil {
		var le *LoadError
		if errors.As(err, &le) {
			n := locate(root, le.at)
			le.Line, le.Col = n.Line, n.Column
		}
		return nil, nil, err
	}
	return s, locate(root, keyPath("name")), nil
}

// locate finds the node at a path in a document: the value there, the key
// itself for a path ending in a map key's name, or the deepest node on the
// way when the path leads where the file writes nothing (a missing field).
func locate(n *yaml.Node, at fieldPath) *yaml.Node {
	for _, st := range at {
		for n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		next := (*yaml.Node)(nil)
		switch {
		case st.index >= 0 && n.Kind == yaml.SequenceNode && st.index < len(n.Content):
			next = n.Content[st.index]
		case st.index < 0 && n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == st.key {
					if st.name {
						return k
					}
					next = n.Content[i+1]
				}
			}
		}
		if next == nil {
			return n
		}
		n = next
	}
	return n
}

var (
	yamlLineRE   = regexp.MustCompile(`line (\d+)`)
	yamlAnchorRE = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)
)

// syntaxError locates a yaml.v3 parse error in text. yaml.v3 writes "line
// N" unless the problem is on the first line, and no position at all for
// an alias to an unknown anchor (which is found here).
func syntaxError(file string, text []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line, col := 1, 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimSpace(strings.Replace(msg, m[0]+":", "", 1))
	} else if m := yamlAnchorRE.FindStringSubmatch(msg); m != nil {
		if at := regexp.MustCompile(`(^|[\s,\[{:-])\*` + regexp.QuoteMeta(m[1]) + `($|[\s,\]}])`).FindIndex(text); at != nil {
			off := at[0] + bytes.IndexByte(text[at[0]:], '*')
			line, col = position(text, off)
		}
	}
	return &LoadError{File: file, Line: line, Col: col, Msg: "YAML syntax: " + msg}
}

// LoadPaths loads scenario files and directories (every *.yaml and *.yml
// directly in a directory, in name order). Names must be unique across
// everything loaded. Each file is read as a file a user names: a FIFO, a
// device such as /dev/zero or a file past MaxScenarioBytes is refused,
// naming it, instead of hanging or filling memory (readFile).
func LoadPaths(paths []string) ([]*Scenario, error) {
	var u unique
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, &LoadError{File: p, Msg: err.Error()}
		}
		if !info.IsDir() {
			data, err := readFile(p)
			if err != nil {
				return nil, err
			}
			if err := u.add(load(p, data)); err != nil {
				return nil, err
			}
			continue
		}
		fsys := os.DirFS(p)
		if err := u.addDir(fsys, ".", p, func(name string) ([]byte, error) { return readFile(filepath.Join(p, name)) }); err != nil {
			return nil, err
		}
	}
	return u.out, nil
}

// LoadFS loads every *.yaml / *.yml directly in dir of fsys, in name order;
// display prefixes file names in messages.
func LoadFS(fsys fs.FS, dir, display string) ([]*Scenario, error) {
	var u unique
	read := func(name string) ([]byte, error) {
		data, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, &LoadError{File: filepath.Join(display, name), Msg: err.Error()}
		}
		return data, nil
	}
	if err := u.addDir(fsys, dir, display, read); err != nil {
		return nil, err
	}
	return u.out, nil
}

// unique collects loaded scenarios, refusing a name used twice.
type unique struct {
	out  []*Scenario
	seen map[string]*Scenario
}

func (u *unique) add(s *Scenario, name *yaml.Node, err error) error {
	if err != nil {
		return err
	}
	if prev, dup := u.seen[s.Name]; dup {
		return &LoadError{File: s.File, Line: name.Line, Col: name.Column, Path: "name", Msg: fmt.Sprintf("%q is already used by %s", s.Name, prev.File)}
	}
	if u.seen == nil {
		u.seen = map[string]*Scenario{}
	}
	u.seen[s.Name] = s
	u.out = append(u.out, s)
	return nil
}

// addDir loads the scenario files of dir in fsys, in name order, each
// read by read (given its name in dir); display names dir in messages.
func (u *unique) addDir(fsys fs.FS, dir, display string, read func(name string) ([]byte, error)) error {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return &LoadError{File: display, Msg: err.Error()}
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return &LoadError{File: display, Msg: "no *.yaml scenario files"}
	}
	sort.Strings(names)
	for _, n := range names {
		data, err := read(n)
		if err != nil {
			return err
		}
		if err := u.add(load(filepath.Join(display, n), data)); err != nil {
			return err
		}
	}
	return nil
}
