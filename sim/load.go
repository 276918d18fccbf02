package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/kernel"
	"go.yaml.in/yaml/v3"
)

// LoadError is a bad scenario file, located. Error() reads
// "file:line:col: field.path: what is wrong".
type LoadError struct {
	File string
	Line int
	Col  int
	Msg  string
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
	b.WriteString(e.Msg)
	return b.String()
}

// MaxScenarioBytes bounds a scenario file.
const MaxScenarioBytes = 4 << 20

// LoadFile reads and validates one scenario file.
func LoadFile(file string) (*Scenario, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &LoadError{File: file, Msg: err.Error()}
	}
	return Load(file, data)
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// Load parses and validates one scenario. file is used in error messages.
func Load(file string, data []byte) (*Scenario, error) {
	if len(data) > MaxScenarioBytes {
		return nil, &LoadError{File: file, Msg: fmt.Sprintf("file is %d bytes, the limit is %d", len(data), MaxScenarioBytes)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &LoadError{File: file, Line: 1, Msg: "empty scenario"}
		}
		return nil, syntaxError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &LoadError{File: file, Line: extra.Line, Msg: "more than one YAML document; one scenario per file"}
	} else if !errors.Is(err, io.EOF) {
		return nil, syntaxError(file, err)
	}
	d := &decoder{file: file}
	s, err := d.scenario(&doc)
	if err != nil {
		return nil, err
	}
	s.applyDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

func syntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = strings.TrimSpace(strings.Replace(msg, m[0]+":", "", 1))
	}
	return &LoadError{File: file, Line: line, Msg: "YAML syntax: " + msg}
}

// LoadPaths loads scenario files and directories (every *.yaml and *.yml in
// a directory, in name order). Names must be unique across everything loaded.
func LoadPaths(paths []string) ([]*Scenario, error) {
	var out []*Scenario
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, &LoadError{File: p, Msg: err.Error()}
		}
		if !info.IsDir() {
			s, err := LoadFile(p)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
			continue
		}
		ss, err := LoadFS(os.DirFS(p), ".", p)
		if err != nil {
			return nil, err
		}
		out = append(out, ss...)
	}
	return out, checkUnique(out)
}

// LoadFS loads every *.yaml / *.yml directly in dir of fsys, in name order;
// display prefixes file names in messages.
func LoadFS(fsys fs.FS, dir, display string) ([]*Scenario, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, &LoadError{File: display, Msg: err.Error()}
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var out []*Scenario
	for _, n := range names {
		data, err := fs.ReadFile(fsys, path.Join(dir, n))
		if err != nil {
			return nil, &LoadError{File: filepath.Join(display, n), Msg: err.Error()}
		}
		s, err := Load(filepath.Join(display, n), data)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, &LoadError{File: display, Msg: "no *.yaml scenario files"}
	}
	return out, checkUnique(out)
}

func checkUnique(ss []*Scenario) error {
	seen := map[string]*Scenario{}
	for _, s := range ss {
		if prev, dup := seen[s.Name]; dup {
			return &LoadError{File: s.File, Line: s.line["name"], Msg: fmt.Sprintf("name: %q is already used by %s", s.Name, prev.File)}
		}
		seen[s.Name] = s
	}
	return nil
}

// decoder walks a yaml.Node tree strictly: unknown fields, wrong types and
// duplicate keys are errors with positions.
type decoder struct{ file string }

func (d *decoder) errf(n *yaml.Node, format string, args ...any) error {
	return &LoadError{File: d.file, Line: n.Line, Col: n.Column, Msg: fmt.Sprintf(format, args...)}
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// fields walks a mapping node, dispatching each key to its handler.
func (d *decoder) fields(n *yaml.Node, where string, handlers map[string]func(v *yaml.Node) error) error {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return d.errf(n, "%s: want a mapping, got %s", where, kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return d.errf(k, "%s: keys must be plain names", where)
		}
		h, ok := handlers[k.Value]
		if !ok {
			known := sortedKeys(handlers)
			return d.errf(k, "%s: unknown field %q (known: %s)", where, k.Value, strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return d.errf(k, "%s: field %q given twice", where, k.Value)
		}
		seen[k.Value] = true
		if err := h(v); err != nil {
			return err
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing (null)"
		}
		return fmt.Sprintf("%s %q", strings.TrimPrefix(n.Tag, "!!"), n.Value)
	}
	return "something else"
}

func (d *decoder) scalar(n *yaml.Node, where string) (*yaml.Node, error) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return nil, d.errf(n, "%s: want a value, got %s", where, kindName(n))
	}
	return n, nil
}

// str accepts any scalar as text ("42" and 42 are both the text 42).
func (d *decoder) str(n *yaml.Node, where string) (string, error) {
	s, err := d.scalar(n, where)
	if err != nil {
		return "", err
	}
	return s.Value, nil
}

// whole is n when it is a whole-number scalar.
func (d *decoder) whole(n *yaml.Node, where string) (*yaml.Node, error) {
	s, err := d.scalar(n, where)
	if err == nil && s.Tag != "!!int" {
		err = d.errf(s, "%s: want a whole number, got %s", where, kindName(s))
	}
	return s, err
}

func (d *decoder) integer(n *yaml.Node, where string) (int, error) {
	s, err := d.whole(n, where)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s.Value)
	if err != nil {
		return 0, d.errf(s, "%s: %v", where, err)
	}
	return v, nil
}

// unsigned reads a whole number ≥ 0 of the full uint64 range (a seed: YAML
// writes every uint64 back, so every one must load).
func (d *decoder) unsigned(n *yaml.Node, where string) (uint64, error) {
	s, err := d.whole(n, where)
	if err != nil {
		return 0, err
	}
	if strings.HasPrefix(s.Value, "-") {
		return 0, d.errf(s, "%s: must not be negative", where)
	}
	v, err := strconv.ParseUint(s.Value, 10, 64)
	if err != nil {
		return 0, d.errf(s, "%s: %v", where, err)
	}
	return v, nil
}

func (d *decoder) number(n *yaml.Node, where string) (float64, error) {
	s, err := d.scalar(n, where)
	if err != nil {
		return 0, err
	}
	if s.Tag != "!!int" && s.Tag != "!!float" {
		return 0, d.errf(s, "%s: want a number, got %s", where, kindName(s))
	}
	v, err := strconv.ParseFloat(s.Value, 64)
	if err != nil {
		return 0, d.errf(s, "%s: %v", where, err)
	}
	return v, nil
}

func (d *decoder) boolean(n *yaml.Node, where string) (bool, error) {
	s, err := d.scalar(n, where)
	if err != nil {
		return false, err
	}
	if s.Tag != "!!bool" {
		return false, d.errf(s, "%s: want true or false, got %s", where, kindName(s))
	}
	return s.Value == "true" || s.Value == "True" || s.Value == "TRUE", nil
}

// duration parses Go duration syntax ("2s", "1500ms"); 0 is also accepted.
func (d *decoder) duration(n *yaml.Node, where string) (time.Duration, error) {
	s, err := d.scalar(n, where)
	if err != nil {
		return 0, err
	}
	if s.Tag == "!!int" && s.Value == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(s.Value)
	if err != nil {
		return 0, d.errf(s, "%s: want a duration in Go syntax like 2s or 150ms, got %s", where, kindName(s))
	}
	if v < 0 {
		return 0, d.errf(s, "%s: negative duration %s", where, s.Value)
	}
	return v, nil
}

func (d *decoder) seq(n *yaml.Node, where string) ([]*yaml.Node, error) {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		return nil, d.errf(n, "%s: want a list, got %s", where, kindName(n))
	}
	return n.Content, nil
}

// mapEntries returns a mapping's (key, value) pairs in file order.
func (d *decoder) mapEntries(n *yaml.Node, where string) ([][2]*yaml.Node, error) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		return nil, d.errf(n, "%s: want a mapping, got %s", where, kindName(n))
	}
	seen := map[string]bool{}
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			return nil, d.errf(k, "%s: keys must be plain names", where)
		}
		if seen[k.Value] {
			return nil, d.errf(k, "%s: key %q given twice", where, k.Value)
		}
		seen[k.Value] = true
		out = append(out, [2]*yaml.Node{k, n.Content[i+1]})
	}
	return out, nil
}

func (d *decoder) scenario(doc *yaml.Node) (*Scenario, error) {
	root := doc
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil, &LoadError{File: d.file, Line: 1, Msg: "empty scenario"}
		}
		root = doc.Content[0]
	}
	s := &Scenario{File: d.file, Limits: kernel.DefaultLimits(), line: map[string]int{}}
	var err error
	mark := func(name string, v *yaml.Node) { s.line[name] = v.Line }
	err = d.fields(root, "scenario", map[string]func(*yaml.Node) error{
		"name": func(v *yaml.Node) (err error) {
			mark("name", v)
			s.Name, err = d.str(v, "name")
			return
		},
		"about":  func(v *yaml.Node) (err error) { s.About, err = d.str(v, "about"); return },
		"seed":   func(v *yaml.Node) (err error) { s.Seed, err = d.unsigned(v, "seed"); return },
		"limits": func(v *yaml.Node) error { mark("limits", v); return d.limits(v, &s.Limits) },
		"agents": func(v *yaml.Node) error {
			mark("agents", v)
			entries, err := d.mapEntries(v, "agents")
			if err != nil {
				return err
			}
			s.Agents = make(map[string]Script, len(entries))
			for _, e := range entries {
				script, err := d.script(e[1], "agents."+e[0].Value)
				if err != nil {
					return err
				}
				s.Agents[e[0].Value] = script
			}
			return nil
		},
		"tools": func(v *yaml.Node) error {
			mark("tools", v)
			entries, err := d.mapEntries(v, "tools")
			if err != nil {
				return err
			}
			s.Tools = make(map[string]ToolSpec, len(entries))
			for _, e := range entries {
				t, err := d.tool(e[1], "tools."+e[0].Value)
				if err != nil {
					return err
				}
				s.Tools[e[0].Value] = t
			}
			return nil
		},
		"faults": func(v *yaml.Node) error {
			items, err := d.seq(v, "faults")
			if err != nil {
				return err
			}
			for i, it := range items {
				f, err := d.fault(it, fmt.Sprintf("faults[%d]", i))
				if err != nil {
					return err
				}
				s.Faults = append(s.Faults, f)
			}
			return nil
		},
		"inputs": func(v *yaml.Node) error {
			items, err := d.seq(v, "inputs")
			if err != nil {
				return err
			}
			for i, it := range items {
				in, err := d.input(it, fmt.Sprintf("inputs[%d]", i))
				if err != nil {
					return err
				}
				s.Inputs = append(s.Inputs, in)
			}
			return nil
		},
		"expect": func(v *yaml.Node) error { return d.expect(v, &s.Expect) },
	})
	if err != nil {
		return nil, err
	}
	if s.Name == "" {
		return nil, &LoadError{File: d.file, Line: root.Line, Col: root.Column, Msg: "name: required"}
	}
	return s, nil
}

// limits reads the limits mapping: its fields are kernel.LimitTable's,
// each checked against its spec's range where it is written.
func (d *decoder) limits(n *yaml.Node, l *kernel.Limits) error {
	handlers := make(map[string]func(*yaml.Node) error)
	for _, spec := range kernel.LimitTable() {
		where := "limits." + spec.Name
		handlers[spec.Name] = func(v *yaml.Node) error {
			var x int64
			if spec.Unit == kernel.UnitDuration {
				dv, err := d.duration(v, where)
				if err != nil {
					return err
				}
				x = int64(dv)
			} else {
				iv, err := d.integer(v, where)
				if err != nil {
					return err
				}
				x = int64(iv)
			}
			if err := spec.Check(x); err != nil {
				return d.errf(v, "%s: %v", where, err)
			}
			spec.Set(l, x)
			return nil
		}
	}
	return d.fields(n, "limits", handlers)
}

func (d *decoder) script(n *yaml.Node, where string) (Script, error) {
	items, err := d.seq(n, where)
	if err != nil {
		return nil, err
	}
	out := make(Script, 0, len(items))
	for i, it := range items {
		w := fmt.Sprintf("%s[%d]", where, i)
		r := Reply{Line: it.Line}
		err := d.fields(it, w, map[string]func(*yaml.Node) error{
			"text":        func(v *yaml.Node) (err error) { r.Text, err = d.str(v, w+".text"); return },
			"first_token": func(v *yaml.Node) (err error) { r.FirstToken, err = d.duration(v, w+".first_token"); return },
			"rate": func(v *yaml.Node) (err error) {
				r.Rate, err = d.number(v, w+".rate")
				if err == nil && r.Rate <= 0 {
					err = d.errf(v, "%s.rate: must be positive", w)
				}
				return
			},
			"calls": func(v *yaml.Node) error {
				calls, err := d.seq(v, w+".calls")
				if err != nil {
					return err
				}
				for j, cn := range calls {
					c, err := d.call(cn, fmt.Sprintf("%s.calls[%d]", w, j))
					if err != nil {
						return err
					}
					r.Calls = append(r.Calls, c)
				}
				return nil
			},
		})
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (d *decoder) call(n *yaml.Node, where string) (Call, error) {
	c := Call{Line: n.Line}
	err := d.fields(n, where, map[string]func(*yaml.Node) error{
		"tool":     func(v *yaml.Node) (err error) { c.Tool, err = d.str(v, where+".tool"); return },
		"delegate": func(v *yaml.Node) (err error) { c.Delegate, err = d.str(v, where+".delegate"); return },
		"prompt":   func(v *yaml.Node) (err error) { c.Prompt, err = d.str(v, where+".prompt"); return },
		"args_raw": func(v *yaml.Node) (err error) { c.ArgsRaw, err = d.str(v, where+".args_raw"); return },
		"args": func(v *yaml.Node) error {
			v = resolve(v)
			if v.Kind != yaml.MappingNode {
				return d.errf(v, "%s.args: want a mapping, got %s", where, kindName(v))
			}
			var m map[string]any
			if err := v.Decode(&m); err != nil {
				return d.errf(v, "%s.args: %v", where, err)
			}
			if m == nil {
				m = map[string]any{}
			}
			c.Args = m
			return nil
		},
	})
	return c, err
}

func (d *decoder) tool(n *yaml.Node, where string) (ToolSpec, error) {
	t := ToolSpec{Line: n.Line}
	err := d.fields(n, where, map[string]func(*yaml.Node) error{
		"duration": func(v *yaml.Node) (err error) { t.Duration, err = d.duration(v, where+".duration"); return },
		"result":   func(v *yaml.Node) (err error) { t.Result, err = d.str(v, where+".result"); return },
		"error":    func(v *yaml.Node) (err error) { t.Error, err = d.str(v, where+".error"); return },
		"on_cancel": func(v *yaml.Node) error {
			s, err := d.str(v, where+".on_cancel")
			if err != nil {
				return err
			}
			switch {
			case s == "stop":
				t.OnCancel = CancelStop
			case s == "ignore":
				t.OnCancel = CancelIgnore
			case strings.HasPrefix(s, "delay "):
				dd, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(s, "delay ")))
				if err != nil || dd < 0 {
					return d.errf(v, "%s.on_cancel: want \"delay <duration>\" like \"delay 5s\", got %q", where, s)
				}
				t.OnCancel, t.CancelDelay = CancelDelay, dd
			default:
				return d.errf(v, "%s.on_cancel: want stop, ignore or \"delay <duration>\", got %q", where, s)
			}
			return nil
		},
	})
	return t, err
}

func (d *decoder) fault(n *yaml.Node, where string) (Fault, error) {
	f := Fault{Line: n.Line}
	err := d.fields(n, where, map[string]func(*yaml.Node) error{
		"at":    func(v *yaml.Node) (err error) { f.At, err = d.duration(v, where+".at"); return },
		"agent": func(v *yaml.Node) (err error) { f.Agent, err = d.str(v, where+".agent"); return },
		"tool":  func(v *yaml.Node) (err error) { f.Tool, err = d.str(v, where+".tool"); return },
		"fault": func(v *yaml.Node) error {
			s, err := d.str(v, where+".fault")
			f.Fault = FaultKind(s)
			if err == nil && !f.Fault.known() {
				err = d.errf(v, "%s.fault: unknown fault %q (want %s)", where, s, faultList())
			}
			return err
		},
		"after": func(v *yaml.Node) (err error) {
			f.After, err = d.integer(v, where+".after")
			if err == nil && f.After < 0 {
				err = d.errf(v, "%s.after: must not be negative", where)
			}
			return
		},
		"retry_after": func(v *yaml.Node) (err error) { f.RetryAfter, err = d.duration(v, where+".retry_after"); return },
		"attempts":    func(v *yaml.Node) (err error) { f.Attempts, err = d.integer(v, where+".attempts"); return },
		"delay":       func(v *yaml.Node) (err error) { f.Delay, err = d.duration(v, where+".delay"); return },
	})
	if err == nil && f.Fault == "" {
		err = d.errf(n, "%s.fault: required", where)
	}
	if err == nil && f.Agent == "" {
		err = d.errf(n, "%s.agent: required", where)
	}
	return f, err
}

func (d *decoder) input(n *yaml.Node, where string) (Input, error) {
	in := Input{Line: n.Line}
	hasAt := false
	err := d.fields(n, where, map[string]func(*yaml.Node) error{
		"at":        func(v *yaml.Node) (err error) { hasAt = true; in.At, err = d.duration(v, where+".at"); return },
		"submit":    func(v *yaml.Node) (err error) { in.Submit, err = d.str(v, where+".submit"); return },
		"interject": func(v *yaml.Node) (err error) { in.Interject, err = d.str(v, where+".interject"); return },
		"cancel":    func(v *yaml.Node) (err error) { in.Cancel, err = d.str(v, where+".cancel"); return },
		"shutdown":  func(v *yaml.Node) (err error) { in.Shutdown, err = d.boolean(v, where+".shutdown"); return },
		"turn": func(v *yaml.Node) error {
			t, err := d.integer(v, where+".turn")
			if err == nil && t < 1 {
				err = d.errf(v, "%s.turn: turns are numbered from 1", where)
			}
			in.Turn = uint64(t)
			return err
		},
	})
	if err == nil && !hasAt {
		err = d.errf(n, "%s.at: required", where)
	}
	return in, err
}

func (d *decoder) expect(n *yaml.Node, e *Expect) error {
	e.Line = n.Line
	e.lines = map[string]int{}
	return d.fields(n, "expect", map[string]func(*yaml.Node) error{
		"outcomes": func(v *yaml.Node) error {
			entries, err := d.mapEntries(v, "expect.outcomes")
			if err != nil {
				return err
			}
			e.Outcomes = map[string]string{}
			for _, kv := range entries {
				s, err := d.str(kv[1], "expect.outcomes."+kv[0].Value)
				if err != nil {
					return err
				}
				if _, err := kernel.ParseOutcome(s); err != nil {
					return d.errf(kv[1], "expect.outcomes.%s: %v", kv[0].Value, err)
				}
				e.Outcomes[kv[0].Value] = s
				e.lines["outcomes."+kv[0].Value] = kv[0].Line
			}
			return nil
		},
		"llm_requests": func(v *yaml.Node) error {
			entries, err := d.mapEntries(v, "expect.llm_requests")
			if err != nil {
				return err
			}
			e.LLMRequests = map[string]int{}
			for _, kv := range entries {
				x, err := d.integer(kv[1], "expect.llm_requests."+kv[0].Value)
				if err != nil {
					return err
				}
				e.LLMRequests[kv[0].Value] = x
				e.lines["llm_requests."+kv[0].Value] = kv[0].Line
			}
			return nil
		},
		"quiescent_by": func(v *yaml.Node) (err error) { e.QuiescentBy, err = d.duration(v, "expect.quiescent_by"); return },
		"history": func(v *yaml.Node) error {
			entries, err := d.mapEntries(v, "expect.history")
			if err != nil {
				return err
			}
			e.History = map[string]HistoryExpect{}
			for _, kv := range entries {
				var h HistoryExpect
				w := "expect.history." + kv[0].Value
				flag := func(dst **bool, name string) func(*yaml.Node) error {
					return func(v *yaml.Node) error {
						b, err := d.boolean(v, w+"."+name)
						*dst = &b
						return err
					}
				}
				list := func(dst *[]string, name string) func(*yaml.Node) error {
					return func(v *yaml.Node) error {
						items, err := d.seq(v, w+"."+name)
						if err != nil {
							return err
						}
						for _, it := range items {
							s, err := d.str(it, w+"."+name)
							if err != nil {
								return err
							}
							*dst = append(*dst, s)
						}
						return nil
					}
				}
				err := d.fields(kv[1], w, map[string]func(*yaml.Node) error{
					"marker":   flag(&h.Marker, "marker"),
					"partial":  flag(&h.Partial, "partial"),
					"contains": list(&h.Contains, "contains"),
					"absent":   list(&h.Absent, "absent"),
				})
				if err != nil {
					return err
				}
				e.History[kv[0].Value] = h
				e.lines["history."+kv[0].Value] = kv[0].Line
			}
			return nil
		},
	})
}
