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
		return checkStruct(p, v, at)
	case kLimits:
		return checkLimits(p, v, at)
	case kMap:
		return checkMap(p, f, v, at)
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

// checkStruct checks every field of a struct the canonical form writes.
func checkStruct(p *typePlan, v reflect.Value, at fieldPath) *LoadError {
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
	return nil
}

// checkLimits checks each limit by the kernel's table.
func checkLimits(p *typePlan, v reflect.Value, at fieldPath) *LoadError {
	for i := range p.fields {
		g := &p.fields[i]
		x := reflect.New(g.plan.typ).Elem()
		x.SetInt(g.limit.Get(*v.Addr().Interface().(*kernel.Limits)))
		if err := checkLeaf(g.plan, g, x); err != nil {
			return fieldErr(at.key(g.name), "%v", err)
		}
	}
	return nil
}

// checkMap checks a map's keys and values, keys in order.
func checkMap(p *typePlan, f *fieldPlan, v reflect.Value, at fieldPath) *LoadError {
	names := make([]string, 0, v.Len())
	for _, k := range v.MapKeys() { // determinism: sorted below
		names = append(names, k.String())
	}
	slices.Sort(names)
	for _, k := range names {
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
	return nil
}

// checkRefs checks what the format alone cannot: that the root script
// exists, and that every script, tool and agent a section names is defined.
func (s *Scenario) checkRefs() *LoadError {
	if _, ok := s.Agents[RootScript]; !ok {
		return fieldErr(keyPath("agents"), "the root script %q is missing", RootScript)
	}
	for _, check := range []func() *LoadError{s.checkScripts, s.checkProfiles, s.checkFaults, s.checkInputs, s.checkSchedule, s.checkExpectRefs} {
		if err := check(); err != nil {
			return err
		}
	}
	return s.checkScheduleDependent()
}

// checkScripts: script names fit the kernel's names, and every call names
// a tool or a script that is defined, as a call of its kind.
func (s *Scenario) checkScripts() *LoadError {
	for _, name := range keys.Sorted(s.Agents) {
		if len(name) > kernel.MaxNameBytes {
			// The kernel clips a child's name to this: a longer script
			// could never be delegated to by its name.
			return fieldErr(keyPath("agents").name(name), "a script name is at most %d bytes, got %d", kernel.MaxNameBytes, len(name))
		}
		for i, r := range s.Agents[name] {
			for j, c := range r.Calls {
				if err := s.checkCall(c, keyPath("agents", name).index(i).key("calls").index(j)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkCall: a call is a tool's or a delegation, with what belongs to it.
func (s *Scenario) checkCall(c Call, at fieldPath) *LoadError {
	switch {
	case (c.Tool == "") == (c.Delegate == ""):
		return fieldErr(at, "exactly one of tool or delegate")
	case c.Tool != "":
		if _, ok := s.Tools[c.Tool]; !ok {
			return fieldErr(at, "unknown tool %q (tools: %s)", c.Tool, strings.Join(keys.Sorted(s.Tools), ", "))
		}
		if c.Prompt != "" || c.Nameless || c.Profile != "" {
			return fieldErr(at, "prompt, profile and nameless belong to delegate calls")
		}
		return nil
	}
	return s.checkDelegation(c, at)
}

// checkDelegation: a delegation names a script other than the root's, no
// arguments, and a nameless one the nameless script.
func (s *Scenario) checkDelegation(c Call, at fieldPath) *LoadError {
	switch _, ok := s.Agents[c.Delegate]; {
	case !ok:
		return fieldErr(at, "delegate to unknown script %q (scripts: %s)", c.Delegate, strings.Join(keys.Sorted(s.Agents), ", "))
	case c.Delegate == RootScript:
		return fieldErr(at, "cannot delegate to the root script %q", RootScript)
	case c.Args != nil || c.ArgsRaw != "":
		return fieldErr(at, "args belong to tool calls")
	case c.Nameless && c.Delegate != NamelessScript:
		return fieldErr(at, "a nameless delegation runs the script %q, not %q", NamelessScript, c.Delegate)
	}
	return nil
}

// checkFaults: a fault names an agent and a tool that exist.
func (s *Scenario) checkFaults() *LoadError {
	for i, f := range s.Faults {
		at := keyPath("faults").index(i)
		if err := s.checkAgentRef(f.Agent); err != nil {
			return fieldErr(at.key("agent"), "%v", err)
		}
		if _, ok := s.Tools[f.Tool]; f.Tool != "" && !ok {
			return fieldErr(at.key("tool"), "unknown tool %q (tools: %s)", f.Tool, strings.Join(keys.Sorted(s.Tools), ", "))
		}
	}
	return nil
}

// checkInputs: each input does one thing, in time order; a cancel names
// an agent that exists, and only a cancel is bound to a turn.
func (s *Scenario) checkInputs() *LoadError {
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
		if err := s.checkCancel(in, at); err != nil {
			return err
		}
	}
	return nil
}

// checkCancel: a cancel names an agent that exists; only a cancel is
// bound to a turn.
func (s *Scenario) checkCancel(in Input, at fieldPath) *LoadError {
	if in.Cancel != "" {
		if err := s.checkAgentRef(in.Cancel); err != nil {
			return fieldErr(at.key("cancel"), "%v", err)
		}
	} else if in.Turn != 0 {
		return fieldErr(at.key("turn"), "only a cancel is bound to a turn")
	}
	return nil
}

// checkSchedule: a schedule's choices are indexes.
func (s *Scenario) checkSchedule() *LoadError {
	for i, pick := range s.Schedule {
		if pick < 0 {
			return fieldErr(keyPath("schedule").index(i), "a choice is an index, 0 or more (got %d)", pick)
		}
	}
	return nil
}

// checkExpectRefs: every agent an expectation names exists.
func (s *Scenario) checkExpectRefs() *LoadError {
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
	return nil
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
