package sim

import (
	"cmp"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/escapement/escapement/kernel"
)

// YAML renders the scenario in the loader's format, canonically: fields in
// their declaration order, map keys sorted, defaults and empty fields
// omitted (the plan of format.go says which). It is what a trace header
// embeds (so every run computes it), what a generator writes for a failing
// world, and what Load reads back to the same value (TestYAMLRoundTrip).
//
// Structure is block YAML; every leaf is written as JSON (a JSON string is a
// valid YAML double-quoted scalar, a JSON object a valid flow mapping), so
// quoting is always right. Map keys are quoted (names may hold / and #), a
// struct's field names are not. Lists of values are JSON arrays as
// encoding/json writes them; call arguments too.
func (s *Scenario) YAML() []byte {
	e := encoder{
		b:       make([]byte, 0, 4096),
		key:     reflect.New(reflect.TypeFor[string]()).Elem(),
		entries: make([]mapEntry, 0, 16),
	}
	e.fields(scenarioPlan(), reflect.ValueOf(s).Elem(), 0, false)
	return e.b
}

// encoder appends a value's canonical YAML to b, walking its plan.
type encoder struct {
	b []byte
	// key is a settable string that map iteration reads keys into (a map
	// key read by reflect otherwise costs an allocation).
	key reflect.Value
	// entries is scratch space for sorting map entries; nested maps use it
	// as a stack.
	entries []mapEntry
}

type mapEntry struct {
	key string
	i   int
}

const spaces = "                                                                "

func (e *encoder) indent(level int) {
	if n := 2 * level; n <= len(spaces) {
		e.b = append(e.b, spaces[:n]...)
		return
	}
	for range level {
		e.b = append(e.b, "  "...)
	}
}

// fields writes a struct's fields as a block mapping at level; inline: the
// first field goes on the current line (after a list item's "- "). It
// returns how many fields it wrote.
func (e *encoder) fields(p *typePlan, v reflect.Value, level int, inline bool) int {
	if p.kind == kLimits {
		l := v.Addr().Interface().(*kernel.Limits)
		for i := range p.fields {
			f := &p.fields[i]
			if !inline {
				e.indent(level)
			}
			inline = false
			e.b = append(e.b, f.name...)
			e.b = append(e.b, ": "...)
			// Through the field's pointer: LimitSpec.Get copies the
			// limits to the heap.
			if d := f.limit.DurationPtr(l); d != nil {
				e.b = appendDuration(e.b, *d)
			} else {
				e.b = strconv.AppendInt(e.b, int64(*f.limit.IntPtr(l)), 10)
			}
			e.b = append(e.b, '\n')
		}
		return len(p.fields)
	}
	n := 0
	for i := range p.fields {
		f := &p.fields[i]
		fv := v.Field(f.index)
		if f.omitted(fv) {
			continue
		}
		if !inline {
			e.indent(level)
		}
		inline = false
		e.b = append(e.b, f.name...)
		e.value(f.plan, f, fv, v, level)
		n++
	}
	return n
}

// value writes what follows a key at level: ": leaf\n", ": {}\n", ": []\n",
// or ":\n" and a nested block. f is the field v is (nil for a map's value),
// parent the struct holding it.
func (e *encoder) value(p *typePlan, f *fieldPlan, v, parent reflect.Value, level int) {
	switch p.kind {
	case kStruct, kLimits:
		e.b = append(e.b, ":\n"...)
		if e.fields(p, v, level+1, false) == 0 {
			e.b = append(e.b[:len(e.b)-1], " {}\n"...)
		}
	case kMap:
		if v.Len() == 0 {
			e.b = append(e.b, ": {}\n"...)
			return
		}
		e.b = append(e.b, ":\n"...)
		e.mapEntries(p, v, level+1)
	case kList:
		switch {
		case p.elem.kind < kPtr:
			e.b = append(e.b, ": "...)
			e.jsonList(p, v)
			e.b = append(e.b, '\n')
		case v.Len() == 0:
			e.b = append(e.b, ": []\n"...)
		default:
			e.b = append(e.b, ":\n"...)
			for i := range v.Len() {
				item := v.Index(i)
				e.indent(level + 1)
				e.b = append(e.b, "- "...)
				switch {
				case f != nil && f.flow:
					e.flow(p.elem, item)
					e.b = append(e.b, '\n')
				case p.elem.kind == kStruct:
					if e.fields(p.elem, item, level+2, true) == 0 {
						e.b = append(e.b, "{}\n"...)
					}
				default: // a list of lists is not part of the format
					panic("sim: scenario format: no block form for " + p.typ.String())
				}
			}
		}
	default:
		e.b = append(e.b, ": "...)
		e.leaf(p, f, v, parent)
		e.b = append(e.b, '\n')
	}
}

// mapEntries writes a map's entries at level, keys sorted (map order must
// never reach an output: I6) and quoted.
func (e *encoder) mapEntries(p *typePlan, v reflect.Value, level int) {
	vals := reflect.MakeSlice(p.values, v.Len(), v.Len())
	base := len(e.entries)
	it := v.MapRange()
	for i := 0; it.Next(); i++ {
		e.key.SetIterKey(it)
		vals.Index(i).SetIterValue(it)
		e.entries = append(e.entries, mapEntry{e.key.String(), i})
	}
	mine := e.entries[base:]
	slices.SortFunc(mine, func(a, b mapEntry) int { return cmp.Compare(a.key, b.key) })
	for _, me := range mine {
		e.indent(level)
		e.b = kernel.AppendJSONString(e.b, me.key)
		e.value(p.elem, nil, vals.Index(me.i), reflect.Value{}, level)
	}
	e.entries = e.entries[:base]
}

// flow writes a struct of leaves as a one-line flow mapping.
func (e *encoder) flow(p *typePlan, v reflect.Value) {
	e.b = append(e.b, '{')
	sep := false
	for i := range p.fields {
		f := &p.fields[i]
		fv := v.Field(f.index)
		if f.omitted(fv) {
			continue
		}
		if sep {
			e.b = append(e.b, ", "...)
		}
		sep = true
		e.b = append(e.b, f.name...)
		e.b = append(e.b, ": "...)
		e.leaf(f.plan, f, fv, v)
	}
	e.b = append(e.b, '}')
}

// jsonList writes a list of values as encoding/json writes it.
func (e *encoder) jsonList(p *typePlan, v reflect.Value) {
	e.b = append(e.b, '[')
	for i := range v.Len() {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		if item := v.Index(i); p.elem.kind == kString {
			e.b = appendJSONHTML(e.b, item.String())
		} else {
			e.leaf(p.elem, nil, item, reflect.Value{})
		}
	}
	e.b = append(e.b, ']')
}

// leaf writes a value as JSON.
func (e *encoder) leaf(p *typePlan, f *fieldPlan, v, parent reflect.Value) {
	switch p.kind {
	case kString, kFault:
		e.b = kernel.AppendJSONString(e.b, v.String())
	case kInt:
		e.b = strconv.AppendInt(e.b, v.Int(), 10)
	case kUint:
		e.b = strconv.AppendUint(e.b, v.Uint(), 10)
	case kFloat:
		e.b = strconv.AppendFloat(e.b, v.Float(), 'g', -1, 64)
	case kBool:
		e.b = strconv.AppendBool(e.b, v.Bool())
	case kDuration:
		e.b = appendDuration(e.b, time.Duration(v.Int()))
	case kPtr:
		e.leaf(p.elem, f, v.Elem(), parent)
	case kOnCancel:
		// What parseOnCancel reads.
		switch CancelMode(v.Int()) {
		case CancelIgnore:
			e.b = append(e.b, `"ignore"`...)
		case CancelDelay:
			e.b = append(e.b, `"delay `...)
			e.b = append(e.b, time.Duration(parent.Field(f.with).Int()).String()...)
			e.b = append(e.b, '"')
		default:
			e.b = append(e.b, `"stop"`...)
		}
	case kArgs:
		var err error
		if e.b, err = appendArgsJSON(e.b, v.Interface().(map[string]any)); err != nil {
			panic("sim: render scenario value: " + err.Error())
		}
	default:
		panic("sim: scenario format: no leaf form for " + p.typ.String())
	}
}

// appendDuration writes d quoted, in Go syntax ("1.5s").
func appendDuration(b []byte, d time.Duration) []byte {
	b = append(b, '"')
	b = append(b, d.String()...)
	return append(b, '"')
}
