package scenario

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
		key:     reflect.New(reflect.TypeFor[string]()).Elem(),
		entries: make([]mapEntry, 0, 16),
	}
	b, _ := e.fields(make([]byte, 0, 4096), scenarioPlan(), reflect.ValueOf(s).Elem(), 0, false)
	return b
}

// encoder appends a value's canonical YAML, walking its plan. Its methods
// take the output and return it extended (as strconv's Append functions
// do): a buffer in a local variable costs no write barrier per append.
type encoder struct {
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

func indent(b []byte, level int) []byte {
	if n := 2 * level; n <= len(spaces) {
		return append(b, spaces[:n]...)
	}
	for range level {
		b = append(b, "  "...)
	}
	return b
}

// fields writes a struct's fields as a block mapping at level; inline: the
// first field goes on the current line (after a list item's "- "). It also
// returns how many fields it wrote.
func (e *encoder) fields(b []byte, p *typePlan, v reflect.Value, level int, inline bool) ([]byte, int) {
	if p.kind == kLimits {
		l := v.Addr().Interface().(*kernel.Limits)
		for i := range p.fields {
			f := &p.fields[i]
			if !inline {
				b = indent(b, level)
			}
			inline = false
			b = append(b, f.name...)
			b = append(b, ": "...)
			// Through the field's pointer: LimitSpec.Get copies the
			// limits to the heap.
			if d := f.limit.DurationPtr(l); d != nil {
				b = appendDuration(b, *d)
			} else {
				b = strconv.AppendInt(b, int64(*f.limit.IntPtr(l)), 10)
			}
			b = append(b, '\n')
		}
		return b, len(p.fields)
	}
	n := 0
	for i := range p.fields {
		f := &p.fields[i]
		fv := v.Field(f.index)
		if f.omitted(fv) {
			continue
		}
		if !inline {
			b = indent(b, level)
		}
		inline = false
		b = append(b, f.name...)
		b = e.value(b, f.plan, f, fv, v, level)
		n++
	}
	return b, n
}

// value writes what follows a key at level: ": leaf\n", ": {}\n", ": []\n",
// or ":\n" and a nested block. f is the field v is (nil for a map's value),
// parent the struct holding it.
func (e *encoder) value(b []byte, p *typePlan, f *fieldPlan, v, parent reflect.Value, level int) []byte {
	switch p.kind {
	case kStruct, kLimits:
		b = append(b, ":\n"...)
		b, n := e.fields(b, p, v, level+1, false)
		if n == 0 {
			b = append(b[:len(b)-1], " {}\n"...)
		}
		return b
	case kMap:
		if v.Len() == 0 {
			return append(b, ": {}\n"...)
		}
		return e.mapEntries(append(b, ":\n"...), p, v, level+1)
	case kList:
		switch {
		case p.elem.kind < kPtr:
			b = append(b, ": "...)
			b = e.jsonList(b, p, v)
			return append(b, '\n')
		case v.Len() == 0:
			return append(b, ": []\n"...)
		}
		b = append(b, ":\n"...)
		for i := range v.Len() {
			item := v.Index(i)
			b = indent(b, level+1)
			b = append(b, "- "...)
			switch {
			case f != nil && f.flow:
				b = e.flow(b, p.elem, item)
				b = append(b, '\n')
			case p.elem.kind == kStruct:
				var n int
				if b, n = e.fields(b, p.elem, item, level+2, true); n == 0 {
					b = append(b, "{}\n"...)
				}
			default: // a list of lists is not part of the format
				panic("sim: scenario format: no block form for " + p.typ.String())
			}
		}
		return b
	}
	b = append(b, ": "...)
	b = e.leaf(b, p, f, v, parent)
	return append(b, '\n')
}

// mapEntries writes a map's entries at level, keys sorted (map order must
// never reach an output: I6) and quoted.
func (e *encoder) mapEntries(b []byte, p *typePlan, v reflect.Value, level int) []byte {
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
		b = indent(b, level)
		b = kernel.AppendJSONString(b, me.key)
		b = e.value(b, p.elem, nil, vals.Index(me.i), reflect.Value{}, level)
	}
	e.entries = e.entries[:base]
	return b
}

// flow writes a struct of leaves as a one-line flow mapping.
func (e *encoder) flow(b []byte, p *typePlan, v reflect.Value) []byte {
	b = append(b, '{')
	sep := false
	for i := range p.fields {
		f := &p.fields[i]
		fv := v.Field(f.index)
		if f.omitted(fv) {
			continue
		}
		if sep {
			b = append(b, ", "...)
		}
		sep = true
		b = append(b, f.name...)
		b = append(b, ": "...)
		b = e.leaf(b, f.plan, f, fv, v)
	}
	return append(b, '}')
}

// jsonList writes a list of values as encoding/json writes it.
func (e *encoder) jsonList(b []byte, p *typePlan, v reflect.Value) []byte {
	b = append(b, '[')
	for i := range v.Len() {
		if i > 0 {
			b = append(b, ',')
		}
		if item := v.Index(i); p.elem.kind == kString {
			b = appendJSONHTML(b, item.String())
		} else {
			b = e.leaf(b, p.elem, nil, item, reflect.Value{})
		}
	}
	return append(b, ']')
}

// leaf writes a value as JSON.
func (e *encoder) leaf(b []byte, p *typePlan, f *fieldPlan, v, parent reflect.Value) []byte {
	switch p.kind {
	case kString, kFault:
		return kernel.AppendJSONString(b, v.String())
	case kInt:
		return strconv.AppendInt(b, v.Int(), 10)
	case kUint:
		return strconv.AppendUint(b, v.Uint(), 10)
	case kFloat:
		return strconv.AppendFloat(b, v.Float(), 'g', -1, 64)
	case kBool:
		return strconv.AppendBool(b, v.Bool())
	case kDuration:
		return appendDuration(b, time.Duration(v.Int()))
	case kPtr:
		return e.leaf(b, p.elem, f, v.Elem(), parent)
	case kOnCancel:
		// What parseOnCancel reads.
		switch CancelMode(v.Int()) {
		case CancelIgnore:
			return append(b, `"ignore"`...)
		case CancelDelay:
			b = append(b, `"delay `...)
			b = append(b, time.Duration(parent.Field(f.with).Int()).String()...)
			return append(b, '"')
		}
		return append(b, `"stop"`...)
	case kArgs:
		b, err := appendArgsJSON(b, v.Interface().(map[string]any))
		if err != nil {
			panic("sim: render scenario value: " + err.Error())
		}
		return b
	}
	panic("sim: scenario format: no leaf form for " + p.typ.String())
}

// appendDuration writes d quoted, in Go syntax ("1.5s").
func appendDuration(b []byte, d time.Duration) []byte {
	b = append(b, '"')
	b = append(b, d.String()...)
	return append(b, '"')
}
