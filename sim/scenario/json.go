package scenario

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/escapement/escapement/kernel"
)

// appendJSONHTML appends s exactly as json.Marshal writes a string: as
// kernel.AppendJSONString does, and '<', '>', '&' escaped too.
func appendJSONHTML(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "<>&") {
		return kernel.AppendJSONString(b, s)
	}
	j, err := json.Marshal(s)
	if err != nil {
		panic("sim: a string does not marshal: " + err.Error()) // json.Marshal never fails on a string
	}
	return append(b, j...)
}

// argsJSON renders call arguments exactly as json.Marshal does (keys
// sorted). Every run renders every call's arguments twice (the trace
// header's scenario, the model's stream), so the flat maps of strings,
// integers and booleans that scenarios hold skip reflection; anything else
// goes to json.Marshal. TestArgsJSON compares the two.
func argsJSON(m map[string]any) ([]byte, error) {
	return appendArgsJSON(make([]byte, 0, 64), m)
}

// appendArgsJSON is argsJSON appending to b.
func appendArgsJSON(b []byte, m map[string]any) ([]byte, error) {
	if m == nil {
		return append(b, "null"...), nil
	}
	var small [8]string
	keys := small[:0]
	for k := range m { // determinism: the keys are sorted before use
		keys = append(keys, k)
	}
	slices.Sort(keys)
	start := len(b)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONHTML(b, k)
		b = append(b, ':')
		switch v := m[k].(type) {
		case string:
			b = appendJSONHTML(b, v)
		case int:
			b = strconv.AppendInt(b, int64(v), 10)
		case bool:
			b = strconv.AppendBool(b, v)
		case nil:
			b = append(b, "null"...)
		default:
			j, err := json.Marshal(m)
			return append(b[:start], j...), err
		}
	}
	return append(b, '}'), nil
}

// Wire is the call as the simulated model streams it: the function name
// and the arguments' JSON (a delegation's {"task":…,"name":…,"profile":…}
// included).
// It panics on arguments Validate refused.
func (c Call) Wire() (name, args string) {
	if c.Delegate != "" {
		// {"task":…,"name":…}, as json.Marshal writes the struct.
		b := appendJSONHTML([]byte(`{"task":`), c.Prompt)
		if !c.Nameless {
			b = appendJSONHTML(append(b, `,"name":`...), c.Delegate)
		}
		if c.Profile != "" {
			b = appendJSONHTML(append(b, `,"profile":`...), c.Profile)
		}
		return "delegate", string(append(b, '}'))
	}
	if c.ArgsRaw != "" {
		return c.Tool, c.ArgsRaw
	}
	if c.Args == nil {
		return c.Tool, "{}"
	}
	b, err := argsJSON(c.Args) // map keys are sorted: deterministic
	if err != nil {
		panic("sim: call args passed Validate but do not marshal: " + err.Error())
	}
	return c.Tool, string(b)
}
