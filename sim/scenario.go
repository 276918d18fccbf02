// Package sim is escapement's deterministic simulator: a virtual clock with
// an event queue ordered by (virtual time, insertion sequence), a scripted
// world (models, tools, faults, user inputs), the invariant oracle checked
// after every step (docs/semantics.md), JSON Lines traces with their SHA-256, and the
// scenario format.
//
// Nothing here reads the wall clock, uses global randomness, starts a
// goroutine or lets map order reach an output: every random choice comes from
// the scenario's seed through a PRNG the run owns, so the same scenario and
// seed give byte-identical traces (I6).
package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/escapement/escapement/kernel"
)

// Scenario is a reproducible story: scripts for the models, tool behaviours,
// faults, user inputs and expectations. It is a plain value so a generator
// can build one; Load builds one from YAML.
type Scenario struct {
	Name   string
	About  string
	Seed   uint64
	Limits kernel.Limits
	// Agents maps a script name to its replies; the root's script is "main".
	Agents map[string]Script
	Tools  map[string]ToolSpec
	Faults []Fault
	Inputs []Input
	Expect Expect
	// File is where the scenario was loaded from ("" when generated).
	File string
	// Line positions of top-level sections, for error messages.
	line map[string]int
}

// RootScript is the root agent's script name.
const RootScript = "main"

// Script is one agent's replies: reply i answers its i-th LLM request. A
// request beyond the script gets an empty reply (the turn completes with no
// text).
type Script []Reply

// Reply is the model's answer to one request.
type Reply struct {
	Text string
	// FirstToken is the latency before the first chunk (default 200ms).
	FirstToken time.Duration
	// Rate is tokens per second after the first (default 50); text is split
	// into tokens on spaces.
	Rate  float64
	Calls []Call
	Line  int
}

// Interval is the time between two chunks of the reply's stream (at least
// 1ns).
func (r Reply) Interval() time.Duration {
	return max(time.Duration(float64(time.Second)/r.Rate), time.Nanosecond)
}

// Tokens is how many text chunks the reply streams: the text is cut after
// every space (see nextToken), so the chunks concatenate back to it.
func (r Reply) Tokens() int {
	if r.Text == "" {
		return 0
	}
	n := strings.Count(r.Text, " ") + 1
	if strings.HasSuffix(r.Text, " ") {
		n-- // the last space stays with the token before it
	}
	return n
}

// Chunks is how many chunks the reply's stream has: one per token, three
// per call (its name, then its arguments in two halves).
func (r Reply) Chunks() int { return r.Tokens() + 3*len(r.Calls) }

// Call is one tool call or delegation in a reply. Calls of one reply run in
// parallel.
type Call struct {
	// Tool names a tool of the scenario; Args are its JSON arguments.
	Tool string
	Args map[string]any
	// ArgsRaw, when set, is sent verbatim as the arguments (for malformed
	// JSON tests).
	ArgsRaw string
	// Delegate names the script of a child agent; Prompt is its task.
	Delegate string
	Prompt   string
	Line     int
}

// CancelMode is what a scripted tool does when cancelled.
type CancelMode int

// Cancel modes.
const (
	// CancelStop acknowledges the cancel at once.
	CancelStop CancelMode = iota
	// CancelIgnore runs to completion as if nothing happened (F3).
	CancelIgnore
	// CancelDelay acknowledges after ToolSpec.CancelDelay.
	CancelDelay
)

// ToolSpec scripts a tool.
type ToolSpec struct {
	Duration    time.Duration
	Result      string
	Error       string // when set, the tool fails with this error
	OnCancel    CancelMode
	CancelDelay time.Duration
	Line        int
}

// FaultKind names an injected fault.
type FaultKind string

// Fault kinds. A fault hits the agent's request (or tool call) in flight at
// At, else the next one it starts. A fault that hits an op already in flight
// takes effect at At: a stream error or disconnect fails the stream at once
// (After counts only for a fresh request), a hang silences it, a rate limit
// sends its retries from At, a tool panic crashes the tool at At, and a
// duplicate or late fault reschedules the op's final event.
const (
	// FaultStreamError: the stream fails after After chunks (a typed stream
	// error); After 0 means halfway, and an After past the reply's last
	// chunk fails it just before its end.
	FaultStreamError FaultKind = "stream_error"
	// FaultDisconnect: the connection drops after After chunks (as above).
	FaultDisconnect FaultKind = "disconnect"
	// FaultHang: the stream goes silent and never ends on its own.
	FaultHang FaultKind = "hang"
	// FaultRateLimit: Attempts rate-limit retries before the first token,
	// each waiting RetryAfter plus up to 20% seeded jitter (the base does not
	// grow); the request then succeeds. Attempts < 0: it never does.
	FaultRateLimit FaultKind = "rate_limit"
	// FaultToolPanic: the tool crashes halfway through.
	FaultToolPanic FaultKind = "tool_panic"
	// FaultDuplicate: the op's next chunk and its final event are delivered twice.
	FaultDuplicate FaultKind = "duplicate_event"
	// FaultLate: the op's final event (or cancel acknowledgement) arrives
	// Delay later than it should.
	FaultLate FaultKind = "late_event"
)

// FaultKinds lists every fault kind.
func FaultKinds() []FaultKind {
	return []FaultKind{FaultStreamError, FaultDisconnect, FaultHang, FaultRateLimit, FaultToolPanic, FaultDuplicate, FaultLate}
}

func (f FaultKind) known() bool { return slices.Contains(FaultKinds(), f) }

// Fault is one injected fault.
type Fault struct {
	At    time.Duration
	Agent string // script or instance name or path
	Fault FaultKind
	// Tool restricts the fault to calls of this tool.
	Tool string
	// After is how many tokens stream before stream_error/disconnect
	// (default: half the reply's tokens).
	After int
	// RetryAfter is each rate-limit retry's wait (default 1s); Attempts the
	// number of refused attempts (default 1).
	RetryAfter time.Duration
	Attempts   int
	// Delay is how late a late_event arrives (default 5s).
	Delay time.Duration
	Line  int
}

// Input is one user action at a virtual time.
type Input struct {
	At        time.Duration
	Submit    string
	Interject string
	// Cancel names the agent whose turn is cancelled (script, instance or path).
	Cancel string
	// Turn binds a cancel to a turn of its agent (0: the current one) (F14).
	Turn     uint64
	Shutdown bool
	Line     int
}

// Kind names the input's action.
func (in Input) Kind() string {
	switch {
	case in.Submit != "":
		return "submit"
	case in.Interject != "":
		return "interject"
	case in.Cancel != "":
		return "cancel"
	case in.Shutdown:
		return "shutdown"
	}
	return ""
}

// Expect is what must hold at the end besides the oracle's invariants.
type Expect struct {
	// Outcomes maps an agent (script, instance or path) to the outcome of its
	// last turn.
	Outcomes map[string]string
	// LLMRequests maps an agent to the number of requests it made in the run.
	LLMRequests map[string]int
	// QuiescentBy: the tree is quiescent by this virtual time (0: unchecked).
	QuiescentBy time.Duration
	History     map[string]HistoryExpect
	Line        int
	lines       map[string]int // "section.agent" → line, for messages
}

// HistoryExpect constrains one agent's final history.
type HistoryExpect struct {
	Marker   *bool
	Partial  *bool
	Contains []string
	Absent   []string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Defaults for replies and faults.
const (
	DefaultFirstToken = 200 * time.Millisecond
	DefaultRate       = 50.0
	DefaultRetryAfter = time.Second
	DefaultLateDelay  = 5 * time.Second
)

// applyDefaults fills zero fields with documented defaults. Limits are
// filled by the loader (a zero limit there is an explicit, invalid value).
func (s *Scenario) applyDefaults() {
	if s.Seed == 0 {
		s.Seed = 1
	}
	for name, sc := range s.Agents { // determinism: each script on its own
		for i := range sc {
			if sc[i].FirstToken == 0 {
				sc[i].FirstToken = DefaultFirstToken
			}
			if sc[i].Rate == 0 {
				sc[i].Rate = DefaultRate
			}
		}
		s.Agents[name] = sc
	}
	for i := range s.Faults {
		f := &s.Faults[i]
		if f.Fault == FaultRateLimit {
			if f.RetryAfter == 0 {
				f.RetryAfter = DefaultRetryAfter
			}
			if f.Attempts == 0 {
				f.Attempts = 1
			}
		}
		if f.Fault == FaultLate && f.Delay == 0 {
			f.Delay = DefaultLateDelay
		}
	}
}

// Validate checks what the YAML shape cannot: references between sections
// and value ranges. Errors name file:line where the scenario has positions.
func (s *Scenario) Validate() error {
	errAt := func(line int, format string, args ...any) error {
		return &LoadError{File: s.File, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	if s.Name == "" {
		return errAt(1, "name: required")
	}
	if !nameRE.MatchString(s.Name) {
		return errAt(s.line["name"], "name: %q must match %s", s.Name, nameRE)
	}
	if err := s.Limits.Validate(); err != nil {
		return errAt(s.line["limits"], "limits: %v", err)
	}
	if _, ok := s.Agents[RootScript]; !ok {
		return errAt(s.line["agents"], "agents: the root script %q is missing", RootScript)
	}
	for _, name := range sortedKeys(s.Agents) {
		if !nameRE.MatchString(name) {
			return errAt(s.line["agents"], "agents: script name %q must match %s", name, nameRE)
		}
		for i, r := range s.Agents[name] {
			where := fmt.Sprintf("agents.%s[%d]", name, i)
			if r.FirstToken < 0 {
				return errAt(r.Line, "%s.first_token: negative duration %v", where, r.FirstToken)
			}
			if r.Rate <= 0 {
				return errAt(r.Line, "%s.rate: must be positive, got %v", where, r.Rate)
			}
			for j, c := range r.Calls {
				cw := fmt.Sprintf("%s.calls[%d]", where, j)
				switch {
				case (c.Tool == "") == (c.Delegate == ""):
					return errAt(c.Line, "%s: exactly one of tool or delegate", cw)
				case c.Tool != "":
					if _, ok := s.Tools[c.Tool]; !ok {
						return errAt(c.Line, "%s: unknown tool %q (tools: %s)", cw, c.Tool, strings.Join(sortedKeys(s.Tools), ", "))
					}
					if c.Prompt != "" {
						return errAt(c.Line, "%s: prompt belongs to delegate calls", cw)
					}
					if c.Args != nil {
						// The model streams the args as JSON: a value JSON
						// cannot hold (.nan, .inf, a non-string key) is bad
						// input here, not a surprise at run time.
						if _, err := json.Marshal(c.Args); err != nil {
							return errAt(c.Line, "%s.args: not representable as JSON: %v", cw, err)
						}
					}
				default:
					if _, ok := s.Agents[c.Delegate]; !ok {
						return errAt(c.Line, "%s: delegate to unknown script %q (scripts: %s)", cw, c.Delegate, strings.Join(sortedKeys(s.Agents), ", "))
					}
					if c.Delegate == RootScript {
						return errAt(c.Line, "%s: cannot delegate to the root script %q", cw, RootScript)
					}
					if c.Args != nil || c.ArgsRaw != "" {
						return errAt(c.Line, "%s: args belong to tool calls", cw)
					}
				}
			}
		}
	}
	for _, name := range sortedKeys(s.Tools) {
		t := s.Tools[name]
		if !nameRE.MatchString(name) || name == "delegate" {
			return errAt(t.Line, "tools: tool name %q must match %s and not be \"delegate\"", name, nameRE)
		}
		if t.Duration < 0 || t.CancelDelay < 0 {
			return errAt(t.Line, "tools.%s: negative duration", name)
		}
	}
	for i, f := range s.Faults {
		where := fmt.Sprintf("faults[%d]", i)
		if !f.Fault.known() {
			return errAt(f.Line, "%s.fault: unknown fault %q (want %s)", where, f.Fault, faultList())
		}
		if f.At < 0 || f.RetryAfter < 0 || f.Delay < 0 {
			return errAt(f.Line, "%s: negative duration", where)
		}
		if err := s.checkAgentRef(f.Agent); err != nil {
			return errAt(f.Line, "%s.agent: %v", where, err)
		}
		if f.Tool != "" {
			if _, ok := s.Tools[f.Tool]; !ok {
				return errAt(f.Line, "%s.tool: unknown tool %q", where, f.Tool)
			}
		}
		if f.After < 0 {
			return errAt(f.Line, "%s.after: must not be negative", where)
		}
	}
	last := time.Duration(0)
	for i, in := range s.Inputs {
		where := fmt.Sprintf("inputs[%d]", i)
		n := 0
		for _, set := range []bool{in.Submit != "", in.Interject != "", in.Cancel != "", in.Shutdown} {
			if set {
				n++
			}
		}
		if n != 1 {
			return errAt(in.Line, "%s: exactly one of submit, interject, cancel or shutdown", where)
		}
		if in.At < 0 {
			return errAt(in.Line, "%s.at: negative duration %v", where, in.At)
		}
		if in.At < last {
			return errAt(in.Line, "%s.at: %v is before the previous input's %v; list inputs in time order", where, in.At, last)
		}
		last = in.At
		if in.Cancel != "" {
			if err := s.checkAgentRef(in.Cancel); err != nil {
				return errAt(in.Line, "%s.cancel: %v", where, err)
			}
		} else if in.Turn != 0 {
			return errAt(in.Line, "%s.turn: only a cancel is bound to a turn", where)
		}
	}
	for _, key := range sortedKeys(s.Expect.Outcomes) {
		if err := s.checkAgentRef(key); err != nil {
			return errAt(s.Expect.lines["outcomes."+key], "expect.outcomes: %v", err)
		}
		if _, err := kernel.ParseOutcome(s.Expect.Outcomes[key]); err != nil {
			return errAt(s.Expect.lines["outcomes."+key], "expect.outcomes.%s: %v", key, err)
		}
	}
	for _, key := range sortedKeys(s.Expect.LLMRequests) {
		if err := s.checkAgentRef(key); err != nil {
			return errAt(s.Expect.lines["llm_requests."+key], "expect.llm_requests: %v", err)
		}
		if s.Expect.LLMRequests[key] < 0 {
			return errAt(s.Expect.lines["llm_requests."+key], "expect.llm_requests.%s: must not be negative", key)
		}
	}
	for _, key := range sortedKeys(s.Expect.History) {
		if err := s.checkAgentRef(key); err != nil {
			return errAt(s.Expect.lines["history."+key], "expect.history: %v", err)
		}
	}
	if s.Expect.QuiescentBy < 0 {
		return errAt(s.Expect.Line, "expect.quiescent_by: negative duration")
	}
	return nil
}

// checkAgentRef accepts "main", a script name, an instance name (script#N)
// or a path of those.
func (s *Scenario) checkAgentRef(ref string) error {
	if ref == "" {
		return fmt.Errorf("agent name required")
	}
	for _, part := range strings.Split(ref, "/") {
		base, n, hasN := strings.Cut(part, "#")
		if hasN {
			if k, err := parseInstance(n); err != nil || k < 2 {
				return fmt.Errorf("agent %q: bad instance %q (name#2, name#3, …)", ref, part)
			}
		}
		if _, ok := s.Agents[base]; !ok {
			return fmt.Errorf("agent %q: no script named %q defines it (scripts: %s)", ref, base, strings.Join(sortedKeys(s.Agents), ", "))
		}
	}
	return nil
}

// refScripts is the script names an agent reference (script, name#2, or a
// path main/task1#2/explore) mentions.
func refScripts(ref string) []string {
	parts := strings.Split(ref, "/")
	for i, part := range parts {
		parts[i], _, _ = strings.Cut(part, "#")
	}
	return parts
}

func parseInstance(s string) (int, error) {
	n := 0
	if s == "" {
		return 0, fmt.Errorf("empty")
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("not a number")
		}
		n = n*10 + int(r-'0')
		if n > 1<<20 {
			return 0, fmt.Errorf("too large")
		}
	}
	return n, nil
}

func faultList() string {
	var b []string
	for _, k := range FaultKinds() {
		b = append(b, string(k))
	}
	return strings.Join(b, ", ")
}

// sortedKeys returns a map's keys in order: map iteration order must never
// reach an output (I6).
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K { return slices.Sorted(maps.Keys(m)) }

// KernelConfig is the kernel configuration a run of s uses.
func (s *Scenario) KernelConfig() kernel.Config {
	return kernel.Config{Limits: s.Limits, RootName: RootScript}
}
