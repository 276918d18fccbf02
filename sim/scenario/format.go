package scenario

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/escapement/escapement/kernel"
)

// The scenario format is defined once, by the `scenario` struct tags of
// Scenario and the types it holds (docs/scenarios.md, "Scenario format", describes it
// for users). A plan per type is built from the tags the first time it is
// needed and never changes after; the decoder (decode.go), the canonical
// emitter (yaml.go), the field checks of Validate and the defaults all walk
// that plan, so a field, its YAML name, its rules and its canonical form are
// written in one place.
//
// A tag reads `scenario:"name,option,..."`; "-" leaves the field out. Options:
//
//	omitempty     the canonical form leaves the field out when it is zero (a
//	              struct: when every field of it is left out); a field with a
//	              default is left out when it holds the default instead
//	omitnil       left out only when nil (a map whose {} differs from absent)
//	default=V     a zero value means V (the loader fills it in)
//	required      the field must be written in a file
//	flow          each item of this list is written as a one-line {…} mapping
//	check=NAME    the value (each value, for a map or list) must pass check NAME
//	keys=NAME     each key of this map must pass check NAME
//	with=FIELD    the field's text also carries sibling FIELD (on_cancel's
//	              "delay 5s" holds CancelDelay)
//
// kernel.Limits is written from kernel.LimitTable: one field per limit, in
// the table's order, each checked against the table's range.
//
// Why a plan read by reflection, not generated code: one interpreter of the
// tags serves the decoder, the checks and the emitter, and there is no
// generated file to keep in step with the types. The emitter is the one hot
// path (every run renders its scenario); it reads fields by kind through
// the plan and appends straight into one buffer, which costs less than the
// hand-written emitter it replaced (BenchmarkScenarioYAML). yaml.v3's own
// struct decoding is not used: its errors name neither the field's path nor
// its column, and it knows nothing of durations or of the checks.

// kind is how a Go type is read and written.
type kind uint8

const (
	kString kind = iota + 1
	kInt
	kUint
	kFloat
	kBool
	kDuration
	kFault    // FaultKind: a string from FaultKinds
	kOnCancel // CancelMode, with its delay
	kPtr      // a pointer to a leaf, left out when nil
	kArgs     // map[string]any: a free-form JSON object
	kStruct
	kMap // string keys, written sorted
	kList
	kLimits // kernel.Limits, from kernel.LimitTable
)

// typePlan is how one Go type is read, written and checked.
type typePlan struct {
	kind   kind
	typ    reflect.Type
	elem   *typePlan    // kPtr, kMap, kList
	values reflect.Type // kMap: a slice of its values (the emitter sorts them)
	fields []fieldPlan  // kStruct, kLimits
	known  string       // the fields' names, sorted, for "unknown field" messages
	// defaults: a field below has a default (FillDefaults walks only there).
	defaults bool
}

// fieldPlan is one field of a struct (or one limit of kernel.Limits).
type fieldPlan struct {
	name      string
	index     int // the struct field (kStruct)
	with      int // the sibling field a kOnCancel field carries
	limit     kernel.LimitSpec
	plan      *typePlan
	omitEmpty bool
	omitNil   bool
	required  bool
	flow      bool
	def       reflect.Value // the default (invalid: none)
	defInt    int64         // the default of a whole number or duration (or 0)
	defFloat  float64       // the default of a number
	check     check         // applies to the value, or to each value of a map or list
	keyCheck  check
}

// check reports why a leaf value is not valid, as a phrase to put after its
// path ("must be positive, got 0").
type check func(v reflect.Value) error

// namedCheck is a check a tag can name, and the kinds of value it reads.
type namedCheck struct {
	kinds []kind
	check check
}

// checks are the named checks tags refer to.
var checks = map[string]namedCheck{
	"positive": {[]kind{kFloat}, func(v reflect.Value) error {
		if f := v.Float(); !(f > 0) {
			return fmt.Errorf("must be positive, got %v", f)
		}
		return nil
	}},
	"nonnegative": {[]kind{kInt}, func(v reflect.Value) error {
		if n := v.Int(); n < 0 {
			return fmt.Errorf("must not be negative, got %d", n)
		}
		return nil
	}},
	"turn": {[]kind{kUint}, func(v reflect.Value) error {
		if v.Uint() < 1 {
			return fmt.Errorf("turns are numbered from 1")
		}
		return nil
	}},
	"name": {[]kind{kString}, func(v reflect.Value) error { return checkName(v.String()) }},
	"tool": {[]kind{kString}, func(v reflect.Value) error {
		if err := checkName(v.String()); err != nil {
			return err
		}
		if v.String() == "delegate" {
			return fmt.Errorf("%q is taken by delegations", v.String())
		}
		return nil
	}},
	"outcome": {[]kind{kString}, func(v reflect.Value) error {
		_, err := kernel.ParseOutcome(v.String())
		return err
	}},
}

func checkName(s string) error {
	if s == "" {
		return fmt.Errorf("required")
	}
	if !nameRE.MatchString(s) {
		return fmt.Errorf("%q must match %s", s, nameRE)
	}
	return nil
}

// checkLeaf runs the checks every value of a kind must pass, then the
// field's own.
func checkLeaf(p *typePlan, f *fieldPlan, v reflect.Value) error {
	switch p.kind {
	case kDuration:
		if d := time.Duration(v.Int()); d < 0 {
			return fmt.Errorf("negative duration %v", d)
		}
	case kFault:
		if k := FaultKind(v.String()); !k.known() {
			return fmt.Errorf("unknown fault %q (want %s)", k, faultList())
		}
	case kArgs:
		// The model streams the args as JSON: a value JSON cannot hold
		// (.nan, .inf, a non-string key) is bad input here, not a surprise
		// at run time.
		if !v.IsNil() {
			if _, err := json.Marshal(v.Interface()); err != nil {
				return fmt.Errorf("not representable as JSON: %v", err)
			}
		}
	case kOnCancel:
		if m := CancelMode(v.Int()); m < CancelStop || m > CancelDelay {
			return fmt.Errorf("unknown cancel mode %d", m)
		}
	}
	if f != nil && f.limit.Name != "" {
		return f.limit.Check(v.Int())
	}
	if f != nil && f.check != nil {
		return f.check(v)
	}
	return nil
}

// omitted reports whether the canonical form leaves field f (value v) out.
// Every run renders its scenario, so this reads v by kind rather than
// through reflect's generic comparisons.
func (f *fieldPlan) omitted(v reflect.Value) bool {
	switch {
	case f.omitNil:
		return v.IsNil()
	case !f.omitEmpty:
		return false
	}
	switch f.plan.kind {
	case kString, kFault:
		return v.String() == ""
	case kInt, kDuration, kOnCancel:
		return v.Int() == f.defInt
	case kUint:
		return v.Uint() == uint64(f.defInt)
	case kFloat:
		if f.def.IsValid() {
			return v.Float() == f.defFloat
		}
		return math.Float64bits(v.Float()) == 0
	case kBool:
		return !v.Bool()
	case kPtr, kArgs:
		return v.IsNil()
	case kMap, kList:
		return v.Len() == 0
	case kStruct:
		return f.plan.empty(v)
	}
	return v.IsZero()
}

// empty reports whether a struct value writes no field at all.
func (p *typePlan) empty(v reflect.Value) bool {
	for i := range p.fields {
		if f := &p.fields[i]; !f.omitted(v.Field(f.index)) {
			return false
		}
	}
	return true
}

// scenarioPlan is the plan of Scenario, built once.
var scenarioPlan = sync.OnceValue(func() *typePlan {
	return planOf(reflect.TypeFor[Scenario](), map[reflect.Type]*typePlan{})
})

var (
	durationType = reflect.TypeFor[time.Duration]()
	limitsType   = reflect.TypeFor[kernel.Limits]()
	faultType    = reflect.TypeFor[FaultKind]()
	cancelType   = reflect.TypeFor[CancelMode]()
	argsType     = reflect.TypeFor[map[string]any]()
)

// planOf builds the plan of t; a malformed tag is a programming error and
// panics (every test that loads or writes a scenario would fail).
func planOf(t reflect.Type, seen map[reflect.Type]*typePlan) *typePlan {
	if p, ok := seen[t]; ok {
		return p
	}
	p := &typePlan{typ: t}
	seen[t] = p
	if !p.special(seen) {
		p.byKind(seen)
	}
	if p.kind == kPtr && p.elem.kind >= kPtr {
		panic("sim: scenario format: only pointers to values: " + t.String())
	}
	names := make([]string, len(p.fields))
	for i, f := range p.fields {
		names[i] = f.name
	}
	slices.Sort(names)
	p.known = strings.Join(names, ", ")
	return p
}

// special plans the types the format writes its own way (durations,
// faults, cancel modes, call arguments, limits), and reports whether p's
// type is one.
func (p *typePlan) special(seen map[reflect.Type]*typePlan) bool {
	switch p.typ {
	case durationType:
		p.kind = kDuration
	case faultType:
		p.kind = kFault
	case cancelType:
		p.kind = kOnCancel
	case argsType:
		p.kind = kArgs
	case limitsType:
		p.kind = kLimits
		for _, spec := range kernel.LimitTable() {
			leaf := &typePlan{kind: kInt, typ: reflect.TypeFor[int]()}
			if spec.Unit == kernel.UnitDuration {
				leaf = planOf(durationType, seen)
			}
			p.fields = append(p.fields, fieldPlan{name: spec.Name, limit: spec, plan: leaf})
		}
	default:
		return false
	}
	return true
}

// byKind plans any other type by its kind.
func (p *typePlan) byKind(seen map[reflect.Type]*typePlan) {
	t := p.typ
	switch t.Kind() {
	case reflect.String:
		p.kind = kString
	case reflect.Int:
		p.kind = kInt
	case reflect.Uint64:
		p.kind = kUint
	case reflect.Float64:
		p.kind = kFloat
	case reflect.Bool:
		p.kind = kBool
	case reflect.Pointer:
		p.kind, p.elem = kPtr, planOf(t.Elem(), seen)
	case reflect.Map:
		if t.Key() != reflect.TypeFor[string]() { // the emitter reads keys into a string
			panic("sim: scenario format: map keys must be strings: " + t.String())
		}
		p.kind, p.elem, p.values = kMap, planOf(t.Elem(), seen), reflect.SliceOf(t.Elem())
		p.defaults = p.elem.defaults
	case reflect.Slice:
		p.kind, p.elem = kList, planOf(t.Elem(), seen)
		p.defaults = p.elem.defaults
	case reflect.Struct:
		p.structFields(seen)
	default:
		panic("sim: scenario format: no plan for " + t.String())
	}
}

// structFields plans a struct's tagged fields.
func (p *typePlan) structFields(seen map[reflect.Type]*typePlan) {
	t := p.typ
	p.kind = kStruct
	if t.NumField() > 64 {
		panic("sim: scenario format: more than 64 fields (the decoder's bitset): " + t.String())
	}
	for i := range t.NumField() {
		if f, ok := fieldOf(t, i, seen); ok {
			p.fields = append(p.fields, f)
			p.defaults = p.defaults || f.def.IsValid() || f.plan.defaults
		}
	}
}

// fieldOf reads the tag of t's field i.
func fieldOf(t reflect.Type, i int, seen map[reflect.Type]*typePlan) (fieldPlan, bool) {
	sf := t.Field(i)
	tag, ok := sf.Tag.Lookup("scenario")
	if !ok || tag == "-" {
		return fieldPlan{}, false
	}
	opts := strings.Split(tag, ",")
	r := tagReader{t: t, sf: sf, f: fieldPlan{name: opts[0], index: i, with: -1, plan: planOf(sf.Type, seen)}}
	for _, o := range opts[1:] {
		r.option(o)
	}
	if r.f.plan.kind == kOnCancel && r.f.with < 0 {
		r.bad("a CancelMode needs with=")
	}
	return r.f, true
}

// tagReader reads the options of one field's tag into its plan.
type tagReader struct {
	t  reflect.Type
	sf reflect.StructField
	f  fieldPlan
}

// bad panics: the tag is malformed.
func (r *tagReader) bad(format string, args ...any) {
	panic(fmt.Sprintf("sim: scenario format: %s.%s: %s", r.t.Name(), r.sf.Name, fmt.Sprintf(format, args...)))
}

// option reads one option (key or key=value).
func (r *tagReader) option(o string) {
	key, val, _ := strings.Cut(o, "=")
	switch key {
	case "omitempty":
		r.f.omitEmpty = true
	case "omitnil":
		r.f.omitNil = true
	case "required":
		r.f.required = true
	case "flow":
		r.flow()
	case "default":
		r.setDefault(val)
	case "check", "keys":
		r.check(key, val)
	case "with":
		w, ok := r.t.FieldByName(val)
		if !ok || r.f.plan.kind != kOnCancel || w.Type != durationType {
			r.bad("with=%s: no such duration beside a CancelMode", val)
		}
		r.f.with = w.Index[0]
	default:
		r.bad("unknown option %q", o)
	}
}

// flow: a list of structs of values, written on one line each.
func (r *tagReader) flow() {
	f := &r.f
	f.flow = true
	if f.plan.kind != kList || f.plan.elem.kind != kStruct {
		r.bad("flow is for lists of structs")
	}
	for _, g := range f.plan.elem.fields {
		if g.plan.kind >= kStruct {
			r.bad("flow items hold values only, not %s", g.plan.typ)
		}
	}
}

// setDefault reads default=val.
func (r *tagReader) setDefault(val string) {
	f := &r.f
	f.def = parseDefault(f.plan, val)
	switch {
	case !f.def.IsValid():
		r.bad("bad default %q", val)
	case f.plan.kind == kFloat:
		f.defFloat = f.def.Float()
	case f.plan.kind == kUint:
		f.defInt = int64(f.def.Uint())
	default:
		f.defInt = f.def.Int()
	}
}

// check reads check=val (the field's leaves) or keys=val (a map's keys).
func (r *tagReader) check(key, val string) {
	f := &r.f
	c, ok := checks[val]
	if !ok {
		r.bad("no check %q", val)
	}
	// A check reads a leaf: the field's, or its map's or list's values;
	// keys=… reads a map's keys (strings).
	leaf := f.plan
	if key == "keys" && leaf.kind == kMap {
		leaf = &typePlan{kind: kString}
	}
	for key == "check" && (leaf.kind == kMap || leaf.kind == kList) {
		leaf = leaf.elem
	}
	if !slices.Contains(c.kinds, leaf.kind) || (key == "keys" && f.plan.kind != kMap) {
		r.bad("%s=%s does not read a %s", key, val, r.sf.Type)
	}
	if key == "keys" {
		f.keyCheck = c.check
	} else {
		f.check = c.check
	}
}

// parseDefault reads a default written in a tag (invalid on a bad one).
func parseDefault(p *typePlan, s string) reflect.Value {
	v := reflect.New(p.typ).Elem()
	switch p.kind {
	case kDuration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return reflect.Value{}
		}
		v.SetInt(int64(d))
	case kFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return reflect.Value{}
		}
		v.SetFloat(f)
	case kUint:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return reflect.Value{}
		}
		v.SetUint(n)
	default:
		return reflect.Value{}
	}
	return v
}

// fieldPath is where a value sits in a scenario: field names, map keys and list
// indices from the top.
type fieldPath []step

// step is one element of a fieldPath: a key (index < 0) or a list index.
type step struct {
	key   string
	index int
	// name: the path points at the map key itself, not at its value.
	name bool
}

func (p fieldPath) key(k string) fieldPath  { return append(p, step{key: k, index: -1}) }
func (p fieldPath) name(k string) fieldPath { return append(p, step{key: k, index: -1, name: true}) }
func (p fieldPath) index(i int) fieldPath   { return append(p, step{index: i}) }
func (p fieldPath) clone() fieldPath        { return slices.Clone(p) }
func keyPath(keys ...string) fieldPath {
	p := make(fieldPath, 0, len(keys)+2)
	for _, k := range keys {
		p = p.key(k)
	}
	return p
}

// String renders the path as messages show it: agents.main[0].calls[1].
func (p fieldPath) String() string {
	var b strings.Builder
	for i, s := range p {
		if s.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
	}
	return b.String()
}
