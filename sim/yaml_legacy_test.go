package sim

// legacyYAML is the hand-written emitter the format replaced, kept verbatim
// (test code) so the derived emitter is compared with it byte for byte and
// benchmarked beside it in one run.
import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/escapement/escapement/kernel"
)

// YAML renders the scenario in the loader's format, canonically: fixed field
// order, map keys sorted, defaults omitted. It is what a trace header embeds
// (so every run computes it), what a generator writes for a failing world,
// and what Load reads back to the same value (TestYAMLRoundTrip).
//
// Structure is block YAML; every leaf is written as JSON (a JSON string is a
// valid YAML double-quoted scalar, a JSON object a valid flow mapping), so
// quoting is always right and rendering needs no reflection.
func (s *Scenario) legacyYAML() []byte {
	y := legacyOut{b: make([]byte, 0, 4096)}
	y.kv(0, "name", s.Name)
	if s.About != "" {
		y.kv(0, "about", s.About)
	}
	y.raw(0, "seed", strconv.FormatUint(s.Seed, 10))
	y.key(0, "limits")
	for _, spec := range kernel.LimitTable() {
		v := spec.Get(s.Limits)
		if spec.Unit == kernel.UnitDuration {
			y.dur(1, spec.Name, time.Duration(v))
		} else {
			y.raw(1, spec.Name, strconv.FormatInt(v, 10))
		}
	}
	y.key(0, "agents")
	for _, name := range sortedKeys(s.Agents) {
		script := s.Agents[name]
		if len(script) == 0 {
			y.raw(1, y.q(name), "[]")
			continue
		}
		y.key(1, y.q(name))
		for _, r := range script {
			y.item(2)
			n := 0
			if r.Text != "" {
				y.kvInline(3, &n, "text", r.Text)
			}
			if r.FirstToken != DefaultFirstToken {
				y.rawInline(3, &n, "first_token", legacyJSONString(r.FirstToken.String()))
			}
			if r.Rate != DefaultRate {
				y.rawInline(3, &n, "rate", strconv.FormatFloat(r.Rate, 'g', -1, 64))
			}
			if len(r.Calls) > 0 {
				y.rawInline(3, &n, "calls", "")
				for _, c := range r.Calls {
					y.callLine(4, c)
				}
			}
			if n == 0 {
				y.b = append(y.b, "{}\n"...)
			}
		}
	}
	if len(s.Tools) > 0 {
		y.key(0, "tools")
		for _, name := range sortedKeys(s.Tools) {
			t := s.Tools[name]
			y.key(1, y.q(name))
			y.dur(2, "duration", t.Duration)
			if t.Result != "" {
				y.kv(2, "result", t.Result)
			}
			if t.Error != "" {
				y.kv(2, "error", t.Error)
			}
			switch t.OnCancel {
			case CancelIgnore:
				y.kv(2, "on_cancel", "ignore")
			case CancelDelay:
				y.kv(2, "on_cancel", "delay "+t.CancelDelay.String())
			}
		}
	}
	if len(s.Faults) > 0 {
		y.key(0, "faults")
		for _, f := range s.Faults {
			y.item(1)
			n := 0
			y.rawInline(2, &n, "at", legacyJSONString(f.At.String()))
			y.kvInline(2, &n, "agent", f.Agent)
			y.kvInline(2, &n, "fault", string(f.Fault))
			if f.Tool != "" {
				y.kvInline(2, &n, "tool", f.Tool)
			}
			if f.After != 0 {
				y.rawInline(2, &n, "after", strconv.Itoa(f.After))
			}
			if f.RetryAfter != 0 {
				y.rawInline(2, &n, "retry_after", legacyJSONString(f.RetryAfter.String()))
			}
			if f.Attempts != 0 {
				y.rawInline(2, &n, "attempts", strconv.Itoa(f.Attempts))
			}
			if f.Delay != 0 {
				y.rawInline(2, &n, "delay", legacyJSONString(f.Delay.String()))
			}
		}
	}
	if len(s.Inputs) > 0 {
		y.key(0, "inputs")
		for _, in := range s.Inputs {
			y.item(1)
			n := 0
			y.rawInline(2, &n, "at", legacyJSONString(in.At.String()))
			switch {
			case in.Submit != "":
				y.kvInline(2, &n, "submit", in.Submit)
			case in.Interject != "":
				y.kvInline(2, &n, "interject", in.Interject)
			case in.Cancel != "":
				y.kvInline(2, &n, "cancel", in.Cancel)
				if in.Turn != 0 {
					y.rawInline(2, &n, "turn", strconv.FormatUint(in.Turn, 10))
				}
			case in.Shutdown:
				y.rawInline(2, &n, "shutdown", "true")
			}
		}
	}
	e := s.Expect
	if len(e.Outcomes)+len(e.LLMRequests)+len(e.History) > 0 || e.QuiescentBy > 0 {
		y.key(0, "expect")
		if len(e.Outcomes) > 0 {
			y.key(1, "outcomes")
			for _, k := range sortedKeys(e.Outcomes) {
				y.kv(2, y.q(k), e.Outcomes[k])
			}
		}
		if len(e.LLMRequests) > 0 {
			y.key(1, "llm_requests")
			for _, k := range sortedKeys(e.LLMRequests) {
				y.raw(2, y.q(k), strconv.Itoa(e.LLMRequests[k]))
			}
		}
		if e.QuiescentBy > 0 {
			y.dur(1, "quiescent_by", e.QuiescentBy)
		}
		if len(e.History) > 0 {
			y.key(1, "history")
			for _, k := range sortedKeys(e.History) {
				h := e.History[k]
				y.key(2, y.q(k))
				if h.Marker != nil {
					y.raw(3, "marker", strconv.FormatBool(*h.Marker))
				}
				if h.Partial != nil {
					y.raw(3, "partial", strconv.FormatBool(*h.Partial))
				}
				if len(h.Contains) > 0 {
					y.raw(3, "contains", legacyJSONValue(h.Contains))
				}
				if len(h.Absent) > 0 {
					y.raw(3, "absent", legacyJSONValue(h.Absent))
				}
				if h.Marker == nil && h.Partial == nil && len(h.Contains)+len(h.Absent) == 0 {
					y.b = y.b[:len(y.b)-1]
					y.b = append(y.b, " {}\n"...)
				}
			}
		}
	}
	return y.b
}

type legacyOut struct{ b []byte }

func (y *legacyOut) indent(level int) {
	for i := 0; i < level; i++ {
		y.b = append(y.b, "  "...)
	}
}

// q quotes a map key (names may contain / and #, which YAML allows, but a
// quoted key is unambiguous whatever it holds).
func (y *legacyOut) q(s string) string { return legacyJSONString(s) }

func (y *legacyOut) key(level int, k string) {
	y.indent(level)
	y.b = append(y.b, k...)
	y.b = append(y.b, ":\n"...)
}

func (y *legacyOut) raw(level int, k, v string) {
	y.indent(level)
	y.b = append(y.b, k...)
	y.b = append(y.b, ": "...)
	y.b = append(y.b, v...)
	y.b = append(y.b, '\n')
}

// kv writes a string field, quoting v straight into the output (every run
// renders its scenario, so this avoids a string per field).
func (y *legacyOut) kv(level int, k, v string) {
	y.indent(level)
	y.b = append(y.b, k...)
	y.b = append(y.b, ": "...)
	y.b = kernel.AppendJSONString(y.b, v)
	y.b = append(y.b, '\n')
}

func (y *legacyOut) dur(level int, k string, d time.Duration) {
	y.raw(level, k, legacyJSONString(d.String()))
}

// item starts a list item whose fields follow inline ("- a: 1\n  b: 2").
func (y *legacyOut) item(level int) {
	y.indent(level)
	y.b = append(y.b, "- "...)
}

// rawInline writes a field of the current list item: the first on the dash's
// line, the others aligned below it. An empty v opens a nested block.
func (y *legacyOut) rawInline(level int, n *int, k, v string) {
	if *n > 0 {
		y.indent(level)
	}
	*n++
	y.b = append(y.b, k...)
	if v == "" {
		y.b = append(y.b, ":\n"...)
		return
	}
	y.b = append(y.b, ": "...)
	y.b = append(y.b, v...)
	y.b = append(y.b, '\n')
}

func (y *legacyOut) kvInline(level int, n *int, k, v string) {
	if *n > 0 {
		y.indent(level)
	}
	*n++
	y.b = append(y.b, k...)
	y.b = append(y.b, ": "...)
	y.b = kernel.AppendJSONString(y.b, v)
	y.b = append(y.b, '\n')
}

// callLine writes one call as a flow mapping on one line.
func (y *legacyOut) callLine(level int, c Call) {
	y.indent(level)
	y.b = append(y.b, "- {"...)
	sep := false
	key := func(k string) {
		if sep {
			y.b = append(y.b, ", "...)
		}
		sep = true
		y.b = append(y.b, k...)
		y.b = append(y.b, ": "...)
	}
	str := func(k, v string) {
		if v != "" {
			key(k)
			y.b = kernel.AppendJSONString(y.b, v)
		}
	}
	str("tool", c.Tool)
	if c.Args != nil {
		key("args")
		args, err := argsJSON(c.Args)
		if err != nil {
			panic("sim: render scenario value: " + err.Error())
		}
		y.b = append(y.b, args...)
	}
	str("args_raw", c.ArgsRaw)
	str("delegate", c.Delegate)
	str("prompt", c.Prompt)
	y.b = append(y.b, "}\n"...)
}

func legacyJSONString(s string) string { return string(kernel.AppendJSONString(nil, s)) }

// jsonValue renders decoded YAML values (maps, lists, scalars) as JSON flow;
// encoding/json sorts map keys, so the output is deterministic.
func legacyJSONValue(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic("sim: render scenario value: " + err.Error())
	}
	return string(b)
}
