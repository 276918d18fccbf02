package scenario

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/escapement/escapement/kernel"
	"go.yaml.in/yaml/v3"
)

// decoder reads a yaml.v3 node tree into a value strictly, by the value's
// plan (format.go): unknown fields, duplicate keys, wrong types and values a
// check refuses are errors at the node's line and column, with the field's
// path.
type decoder struct {
	file string
	at   fieldPath
	// budget is how many more values the document may decode into: aliases
	// let a small file name a value many times over (a YAML bomb), so the
	// values read through them are counted against the size of the file.
	budget int
}

func (d *decoder) errf(n *yaml.Node, format string, args ...any) error {
	return &LoadError{File: d.file, Line: n.Line, Col: n.Column, Path: d.at.String(), at: d.at.clone(), Msg: fmt.Sprintf(format, args...)}
}

// resolve follows aliases to the value they name, spending the budget on
// every value read through one.
func (d *decoder) resolve(n *yaml.Node) (*yaml.Node, error) {
	for n.Kind == yaml.AliasNode {
		alias := n
		n = n.Alias
		d.budget -= size(n)
		if d.budget < 0 {
			return nil, d.errf(alias, "aliases repeat more values than the file holds; write the repeated parts out")
		}
	}
	return n, nil
}

// size is how many nodes n holds (an alias inside counts once: it is
// charged when it is read).
func size(n *yaml.Node) int {
	s := 1
	for _, c := range n.Content {
		s += size(c)
	}
	return s
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

// value reads n into v (settable) by plan p; f is the field v is, if any.
func (d *decoder) value(n *yaml.Node, p *typePlan, f *fieldPlan, v reflect.Value) error {
	n, err := d.resolve(n)
	if err != nil {
		return err
	}
	switch p.kind {
	case kStruct, kLimits:
		return d.fields(n, p, v)
	case kMap:
		return d.mapping(n, p, f, v)
	case kList:
		return d.list(n, p, f, v)
	case kArgs:
		if n.Kind != yaml.MappingNode {
			return d.errf(n, "want a mapping, got %s", kindName(n))
		}
		m := map[string]any{}
		if err := n.Decode(&m); err != nil {
			return d.errf(n, "%v", err)
		}
		v.Set(reflect.ValueOf(m))
	case kPtr:
		ptr := reflect.New(p.elem.typ)
		if err := d.value(n, p.elem, f, ptr.Elem()); err != nil {
			return err
		}
		v.Set(ptr)
		return nil
	default:
		if err := d.leaf(n, p, v); err != nil {
			return err
		}
	}
	if err := checkLeaf(p, f, v); err != nil {
		return d.errf(n, "%v", err)
	}
	return nil
}

// leaf reads a scalar.
func (d *decoder) leaf(n *yaml.Node, p *typePlan, v reflect.Value) error {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return d.errf(n, "want a value, got %s", kindName(n))
	}
	switch p.kind {
	case kString, kFault:
		// Any scalar is text: "42" and 42 are both the text 42.
		v.SetString(n.Value)
	case kInt:
		return d.int(n, v)
	case kUint:
		return d.uint(n, v)
	case kFloat:
		if n.Tag != "!!int" && n.Tag != "!!float" {
			return d.errf(n, "want a number, got %s", kindName(n))
		}
		x, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			return d.errf(n, "%v", err)
		}
		v.SetFloat(x)
	case kBool:
		if n.Tag != "!!bool" {
			return d.errf(n, "want true or false, got %s", kindName(n))
		}
		v.SetBool(n.Value == "true" || n.Value == "True" || n.Value == "TRUE")
	case kDuration:
		return d.duration(n, v)
	default:
		return d.errf(n, "want %s", p.typ) // a plan bug; never reached by a file
	}
	return nil
}

// int reads a whole number.
func (d *decoder) int(n *yaml.Node, v reflect.Value) error {
	if n.Tag != "!!int" {
		return d.errf(n, "want a whole number, got %s", kindName(n))
	}
	x, err := strconv.Atoi(n.Value)
	if err != nil {
		return d.errf(n, "%v", err)
	}
	v.SetInt(int64(x))
	return nil
}

// uint reads a whole number in the full uint64 range: a seed is written
// back whatever it is.
func (d *decoder) uint(n *yaml.Node, v reflect.Value) error {
	if n.Tag != "!!int" {
		return d.errf(n, "want a whole number, got %s", kindName(n))
	}
	if strings.HasPrefix(n.Value, "-") {
		return d.errf(n, "must not be negative")
	}
	x, err := strconv.ParseUint(n.Value, 10, 64)
	if err != nil {
		return d.errf(n, "%v", err)
	}
	v.SetUint(x)
	return nil
}

// duration reads Go duration syntax ("2s", "1500ms"); a bare 0 too.
func (d *decoder) duration(n *yaml.Node, v reflect.Value) error {
	if n.Tag == "!!int" && n.Value == "0" {
		v.SetInt(0)
		return nil
	}
	x, err := time.ParseDuration(n.Value)
	if err != nil {
		return d.errf(n, "want a duration in Go syntax like 2s or 150ms, got %s", kindName(n))
	}
	v.SetInt(int64(x))
	return nil
}

// fields reads a mapping into a struct (or kernel.Limits) field by field.
func (d *decoder) fields(n *yaml.Node, p *typePlan, v reflect.Value) error {
	if n.Kind != yaml.MappingNode {
		return d.errf(n, "want a mapping, got %s", kindName(n))
	}
	var seen uint64 // fields given so far, by index in p.fields (at most 64)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return d.errf(k, "keys must be plain names")
		}
		fi := p.field(k.Value)
		if fi < 0 {
			if p.typ == reflect.TypeFor[Scenario]() && k.Value == "max_agents" {
				// A top-level field before it joined the limits.
				return d.errf(k, "max_agents is a limit now: write it under limits (limits: {max_agents: %s})", val.Value)
			}
			return d.errf(k, "unknown field %q (known: %s)", k.Value, p.known)
		}
		if seen&(1<<fi) != 0 {
			return d.errf(k, "field %q given twice", k.Value)
		}
		seen |= 1 << fi
		f := &p.fields[fi]
		d.at = d.at.key(f.name)
		if err := d.field(val, p, f, v); err != nil {
			return err
		}
		d.at = d.at[:len(d.at)-1]
	}
	for fi := range p.fields {
		if f := &p.fields[fi]; f.required && seen&(1<<fi) == 0 {
			d.at = d.at.key(f.name)
			return d.errf(n, "required")
		}
	}
	return nil
}

// field reads one field of a struct or of kernel.Limits.
func (d *decoder) field(n *yaml.Node, p *typePlan, f *fieldPlan, v reflect.Value) error {
	if p.kind == kLimits {
		// A limit is read into a scratch value and set through its spec:
		// kernel.Limits' fields are the table's, not tagged.
		x := reflect.New(f.plan.typ).Elem()
		if err := d.value(n, f.plan, f, x); err != nil {
			return err
		}
		f.limit.Set(v.Addr().Interface().(*kernel.Limits), x.Int())
		return nil
	}
	if f.plan.kind == kOnCancel {
		// One text, two fields: the mode and the delay "delay 5s" gives.
		n, err := d.resolve(n)
		if err != nil {
			return err
		}
		if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
			return d.errf(n, "want a value, got %s", kindName(n))
		}
		mode, delay, err := parseOnCancel(n.Value)
		if err != nil {
			return d.errf(n, "%v", err)
		}
		v.Field(f.index).SetInt(int64(mode))
		v.Field(f.with).SetInt(int64(delay))
		return nil
	}
	return d.value(n, f.plan, f, v.Field(f.index))
}

// field is the index of the field named name in p.fields, or -1.
func (p *typePlan) field(name string) int {
	for i := range p.fields {
		if p.fields[i].name == name {
			return i
		}
	}
	return -1
}

// mapping reads a mapping with names for keys, in file order.
func (d *decoder) mapping(n *yaml.Node, p *typePlan, f *fieldPlan, v reflect.Value) error {
	if n.Kind != yaml.MappingNode {
		return d.errf(n, "want a mapping, got %s", kindName(n))
	}
	m := reflect.MakeMapWithSize(p.typ, len(n.Content)/2)
	key := reflect.New(p.typ.Key()).Elem()
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind != yaml.ScalarNode {
			return d.errf(k, "keys must be plain names")
		}
		key.SetString(k.Value)
		if m.MapIndex(key).IsValid() {
			return d.errf(k, "key %q given twice", k.Value)
		}
		if f != nil && f.keyCheck != nil {
			if err := f.keyCheck(key); err != nil {
				d.at = d.at.name(k.Value)
				return d.errf(k, "%v", err)
			}
		}
		d.at = d.at.key(k.Value)
		elem := reflect.New(p.elem.typ).Elem()
		if err := d.value(n.Content[i+1], p.elem, f, elem); err != nil {
			return err
		}
		d.at = d.at[:len(d.at)-1]
		m.SetMapIndex(key, elem)
	}
	v.Set(m)
	return nil
}

// list reads a sequence; an empty one leaves v nil.
func (d *decoder) list(n *yaml.Node, p *typePlan, f *fieldPlan, v reflect.Value) error {
	if n.Kind != yaml.SequenceNode {
		return d.errf(n, "want a list, got %s", kindName(n))
	}
	if len(n.Content) == 0 {
		return nil
	}
	s := reflect.MakeSlice(p.typ, len(n.Content), len(n.Content))
	for i, it := range n.Content {
		d.at = d.at.index(i)
		if err := d.value(it, p.elem, f, s.Index(i)); err != nil {
			return err
		}
		d.at = d.at[:len(d.at)-1]
	}
	v.Set(s)
	return nil
}

// parseOnCancel reads a tool's on_cancel: stop, ignore or "delay <duration>".
func parseOnCancel(s string) (CancelMode, time.Duration, error) {
	switch {
	case s == "stop":
		return CancelStop, 0, nil
	case s == "ignore":
		return CancelIgnore, 0, nil
	case strings.HasPrefix(s, "delay "):
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(s, "delay ")))
		switch {
		case err != nil:
			return 0, 0, fmt.Errorf("want \"delay <duration>\" like \"delay 5s\", got %q", s)
		case d < 0:
			return 0, 0, fmt.Errorf("negative delay %v", d)
		}
		return CancelDelay, d, nil
	}
	return 0, 0, fmt.Errorf("want stop, ignore or \"delay <duration>\", got %q", s)
}
