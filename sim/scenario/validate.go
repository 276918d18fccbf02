package scenario

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
)

// Validate checks a scenario value the way Load checks a file: every field
// the canonical form writes passes its rules in the format (format.go), and
// the sections' references to each other hold. An error is a *LoadError
// naming the field's path; Load adds the file's line and column.
func (s *Scenario) Validate() error {
	if err := checkFields(scenarioPlan(), nil, reflect.ValueOf(s).Elem(), reflect.Value{}, nil); err != nil {
		err.File = s.File
		return err
	}
	if err := s.checkRefs(); err != nil {
		err.File = s.File
		return err
	}
	return nil
}

// fieldErr is a problem with the value at a path.
func fieldErr(at fieldPath, format string, args ...any) *LoadError {
	at = at.clone()
	return &LoadError{Path: at.String(), at: at, Msg: fmt.Sprintf(format, args...)}
}

// checkFields applies the format's checks to v (plan p, field f of parent)
// and to everything below it that the canonical form writes, in that
// form's order.
func checkFields(p *typePlan, f *fieldPlan, v, parent reflect.Value, at fieldPath) *LoadError {
	switch p.kind {
	case kStruct:
		for i := range p.fields {
			g := &p.fields[i]
			gv := v.Field(g.index)
			if g.omitted(gv) {
				continue
			}
			if err := checkFields(g.plan, g, gv, v, at.key(g.name)); err != nil {
				return err
			}
		}
	case kLimits:
		for i := range p.fields {
			g := &p.fields[i]
			x := reflect.New(g.plan.typ).Elem()
			x.SetInt(g.limit.Get(*v.Addr().Interface().(*kernel.Limits)))
			if err := checkLeaf(g.plan, g, x); err != nil {
				return fieldErr(at.key(g.name), "%v", err)
			}
		}
	case kMap:
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() { // determinism: sorted below
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		for _, k := range keys {
			kv := reflect.ValueOf(k).Convert(p.typ.Key())
			if f != nil && f.keyCheck != nil {
				if err := f.keyCheck(kv); err != nil {
					return fieldErr(at.name(k), "%v", err)
				}
			}
			if err := checkFields(p.elem, f, v.MapIndex(kv), reflect.Value{}, at.key(k)); err != nil {
				return err
			}
		}
	case kList:
		for i := range v.Len() {
			if err := checkFields(p.elem, f, v.Index(i), reflect.Value{}, at.index(i)); err != nil {
				return err
			}
		}
	case kPtr:
		if !v.IsNil() {
			return checkFields(p.elem, f, v.Elem(), parent, at)
		}
	case kOnCancel:
		if d := time.Duration(parent.Field(f.with).Int()); d < 0 {
			return fieldErr(at, "negative delay %v", d)
		}
		fallthrough
	default:
		if err := checkLeaf(p, f, v); err != nil {
			return fieldErr(at, "%v", err)
		}
	}
	return nil
}

// checkRefs checks what the format alone cannot: that the root script
// exists, and that every script, tool and agent a section names is defined.
func (s *Scenario) checkRefs() *LoadError {
	if _, ok := s.Agents[RootScript]; !ok {
		return fieldErr(keyPath("agents"), "the root script %q is missing", RootScript)
	}
	tools := strings.Join(keys.Sorted(s.Tools), ", ")
	scripts := strings.Join(keys.Sorted(s.Agents), ", ")
	for _, name := range keys.Sorted(s.Agents) {
		if len(name) > kernel.MaxNameBytes {
			// The kernel clips a child's name to this: a longer script
			// could never be delegated to by its name.
			return fieldErr(keyPath("agents").name(name), "a script name is at most %d bytes, got %d", kernel.MaxNameBytes, len(name))
		}
		for i, r := range s.Agents[name] {
			for j, c := range r.Calls {
				at := keyPath("agents", name).index(i).key("calls").index(j)
				switch {
				case (c.Tool == "") == (c.Delegate == ""):
					return fieldErr(at, "exactly one of tool or delegate")
				case c.Tool != "":
					if _, ok := s.Tools[c.Tool]; !ok {
						return fieldErr(at, "unknown tool %q (tools: %s)", c.Tool, tools)
					}
					if c.Prompt != "" || c.Nameless || c.Profile != "" {
						return fieldErr(at, "prompt, profile and nameless belong to delegate calls")
					}
				default:
					if _, ok := s.Agents[c.Delegate]; !ok {
						return fieldErr(at, "delegate to unknown script %q (scripts: %s)", c.Delegate, scripts)
					}
					if c.Delegate == RootScript {
						return fieldErr(at, "cannot delegate to the root script %q", RootScript)
					}
					if c.Args != nil || c.ArgsRaw != "" {
						return fieldErr(at, "args belong to tool calls")
					}
					if c.Nameless && c.Delegate != NamelessScript {
						return fieldErr(at, "a nameless delegation runs the script %q, not %q", NamelessScript, c.Delegate)
					}
				}
			}
		}
	}
	if err := s.checkProfiles(); err != nil { // profiles.go
		return err
	}
	for i, f := range s.Faults {
		at := keyPath("faults").index(i)
		if err := s.checkAgentRef(f.Agent); err != nil {
			return fieldErr(at.key("agent"), "%v", err)
		}
		if _, ok := s.Tools[f.Tool]; f.Tool != "" && !ok {
			return fieldErr(at.key("tool"), "unknown tool %q (tools: %s)", f.Tool, tools)
		}
	}
	last := time.Duration(0)
	for i, in := range s.Inputs {
		at := keyPath("inputs").index(i)
		n := 0
		for _, set := range []bool{in.Submit != "", in.Interject != "", in.Cancel != "", in.Shutdown} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fieldErr(at, "exactly one of submit, interject, cancel or shutdown")
		}
		if in.At < last {
			return fieldErr(at.key("at"), "%v is before the previous input's %v; list inputs in time order", in.At, last)
		}
		last = in.At
		if in.Cancel != "" {
			if err := s.checkAgentRef(in.Cancel); err != nil {
				return fieldErr(at.key("cancel"), "%v", err)
			}
		} else if in.Turn != 0 {
			return fieldErr(at.key("turn"), "only a cancel is bound to a turn")
		}
	}
	for i, pick := range s.Schedule {
		if pick < 0 {
			return fieldErr(keyPath("schedule").index(i), "a choice is an index, 0 or more (got %d)", pick)
		}
	}
	e := s.Expect
	for _, sec := range []struct {
		name string
		refs []string
	}{
		{"outcomes", keys.Sorted(e.Outcomes)},
		{"llm_requests", keys.Sorted(e.LLMRequests)},
		{"history", keys.Sorted(e.History)},
	} {
		for _, ref := range sec.refs {
			if err := s.checkAgentRef(ref); err != nil {
				return fieldErr(keyPath("expect", sec.name).name(ref), "%v", err)
			}
		}
	}
	return s.checkScheduleDependent()
}

// checkScheduleDependent: expect.schedule_dependent names expectations the
// scenario has, each once.
func (s *Scenario) checkScheduleDependent() *LoadError {
	names := s.ExpectNames()
	for i, mark := range s.Expect.ScheduleDependent {
		at := keyPath("expect", "schedule_dependent").index(i)
		switch {
		case !slices.Contains(names, mark):
			known := strings.Join(names, ", ")
			if known == "" {
				known = "none"
			}
			return fieldErr(at, "%q names no expectation of this scenario (its expectations: %s)", mark, known)
		case slices.Contains(s.Expect.ScheduleDependent[:i], mark):
			return fieldErr(at, "%q given twice", mark)
		}
	}
	return nil
}
