package scenario

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
)

// Scenario is a reproducible story: scripts for the models, tool behaviours,
// faults, user inputs and expectations. It is a plain value so a generator
// can build one; Load builds one from YAML.
//
// The struct tags are the scenario format (format.go reads them): the YAML
// name of each field and its rules. Field order is the canonical order.
type Scenario struct {
	Name   string        `scenario:"name,required,check=name"`
	About  string        `scenario:"about,omitempty"`
	Seed   uint64        `scenario:"seed,default=1"`
	Limits kernel.Limits `scenario:"limits"`
	// Agents maps a script name to its replies; the root's script is "main".
	Agents map[string]Script   `scenario:"agents,keys=name"`
	Tools  map[string]ToolSpec `scenario:"tools,omitempty,keys=tool"`
	// Profiles are the agent profiles a delegation may name, by name
	// (profiles.go); RootProfile the root's.
	Profiles    map[string]ProfileSpec `scenario:"profiles,omitempty,keys=name"`
	RootProfile string                 `scenario:"root_profile,omitempty"`
	Faults      []Fault                `scenario:"faults,omitempty"`
	Inputs      []Input                `scenario:"inputs,omitempty"`
	// Schedule fixes the order of events due at one instant: at each
	// instant where two or more are due, in turn, the index of the one
	// delivered first among them, in queue order (inputs by their index,
	// then faults, then world events and timers in the order they were
	// scheduled); 0 is the order a run has without it, and choices past
	// the list take 0. `escapement sim explore` writes it into the
	// scenario of every violation it finds (docs/semantics.md,
	// "Exploration").
	Schedule []int  `scenario:"schedule,omitempty"`
	Expect   Expect `scenario:"expect,omitempty"`
	// File is where the scenario was loaded from ("" when generated).
	File string `scenario:"-"`
}

// RootScript is the root agent's script name.
const RootScript = "main"

// NamelessScript is the name of a child its parent's model delegated to
// without naming it, so the script it runs (docs/semantics.md, "Scripts").
const NamelessScript = "agent"

// Script is one agent's replies: reply i answers its i-th LLM request. A
// request beyond the script gets an empty reply (the turn completes with no
// text).
type Script []Reply

// Reply is the model's answer to one request.
type Reply struct {
	Text string `scenario:"text,omitempty"`
	// FirstToken is the latency before the first chunk (DefaultFirstToken).
	FirstToken time.Duration `scenario:"first_token,omitempty,default=200ms"`
	// Rate is tokens per second after the first (DefaultRate); text is
	// split into tokens on spaces.
	Rate  float64 `scenario:"rate,omitempty,default=50,check=positive"`
	Calls []Call  `scenario:"calls,omitempty,flow"`
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
	// Tool names a tool of the scenario; Args are its JSON arguments (nil:
	// none, which differs from {}).
	Tool string         `scenario:"tool,omitempty"`
	Args map[string]any `scenario:"args,omitnil"`
	// ArgsRaw, when set, is sent verbatim as the arguments (for malformed
	// JSON tests).
	ArgsRaw string `scenario:"args_raw,omitempty"`
	// Delegate names the script of a child agent; Prompt is its task.
	Delegate string `scenario:"delegate,omitempty"`
	Prompt   string `scenario:"prompt,omitempty"`
	// Profile names the child's profile (docs/semantics.md, "Profiles");
	// one the scenario lacks exercises the kernel's answer to it.
	Profile string `scenario:"profile,omitempty"`
	// Nameless sends a delegation without its optional name, as a model
	// may; the kernel names such a child NamelessScript, so Delegate must
	// be that script (docs/semantics.md, "Scripts").
	Nameless bool `scenario:"nameless,omitempty"`
	// ID is the call id the model streams; empty: a fresh one per call.
	// Models that number their calls per message repeat ids across
	// messages, which the kernel makes unique (docs/semantics.md,
	// "Transcripts").
	ID string `scenario:"id,omitempty"`
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
	Duration time.Duration `scenario:"duration"`
	Result   string        `scenario:"result,omitempty"`
	Error    string        `scenario:"error,omitempty"` // when set, the tool fails with this error
	// OnCancel is written stop, ignore or "delay 5s" (CancelDelay).
	OnCancel    CancelMode    `scenario:"on_cancel,omitempty,with=CancelDelay"`
	CancelDelay time.Duration `scenario:"-"`
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
	At    time.Duration `scenario:"at"`
	Agent string        `scenario:"agent,required"` // script or instance name or path
	Fault FaultKind     `scenario:"fault,required"`
	// Tool restricts the fault to calls of this tool.
	Tool string `scenario:"tool,omitempty"`
	// After is how many tokens stream before stream_error/disconnect
	// (default: half the reply's tokens).
	After int `scenario:"after,omitempty,check=nonnegative"`
	// RetryAfter is each rate-limit retry's wait (default 1s); Attempts the
	// number of refused attempts (default 1).
	RetryAfter time.Duration `scenario:"retry_after,omitempty"`
	Attempts   int           `scenario:"attempts,omitempty"`
	// Delay is how late a late_event arrives (default 5s).
	Delay time.Duration `scenario:"delay,omitempty"`
}

// Input is one user action at a virtual time.
type Input struct {
	At        time.Duration `scenario:"at,required"`
	Submit    string        `scenario:"submit,omitempty"`
	Interject string        `scenario:"interject,omitempty"`
	// Cancel names the agent whose turn is cancelled (script, instance or path).
	Cancel string `scenario:"cancel,omitempty"`
	// Turn binds a cancel to a turn of its agent (0: the current one) (F14).
	Turn     uint64 `scenario:"turn,omitempty,check=turn"`
	Shutdown bool   `scenario:"shutdown,omitempty"`
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
	Outcomes map[string]string `scenario:"outcomes,omitempty,check=outcome"`
	// LLMRequests maps an agent to the number of requests it made in the run.
	LLMRequests map[string]int `scenario:"llm_requests,omitempty,check=nonnegative"`
	// QuiescentBy: the tree is quiescent by this virtual time (0: unchecked).
	QuiescentBy time.Duration            `scenario:"quiescent_by,omitempty"`
	History     map[string]HistoryExpect `scenario:"history,omitempty"`
	// ScheduleDependent names the expectations above that hold on some
	// schedules only (Scenario.ExpectNames: outcomes.REF, history.REF, …).
	// A plain run judges them like the others; `escapement sim explore`
	// requires the rest on every schedule it explores and says on how
	// many schedules each of these held (docs/semantics.md,
	// "Exploration").
	ScheduleDependent []string `scenario:"schedule_dependent,omitempty"`
}

// HistoryExpect constrains one agent's final history.
type HistoryExpect struct {
	Marker   *bool    `scenario:"marker,omitempty"`
	Partial  *bool    `scenario:"partial,omitempty"`
	Contains []string `scenario:"contains,omitempty"`
	Absent   []string `scenario:"absent,omitempty"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Defaults for replies and faults. The reply defaults are also in the
// format's tags (TestFormatDefaults keeps the two equal).
const (
	DefaultFirstToken = 200 * time.Millisecond
	DefaultRate       = 50.0
	DefaultRetryAfter = time.Second
	DefaultLateDelay  = 5 * time.Second
)

// FillDefaults fills zero fields with documented defaults, as Load does:
// those the format's tags give, and the faults' that depend on the fault's
// kind (for a scenario built in code). Limits are filled by the loader (a
// zero limit there is an explicit, invalid value).
func (s *Scenario) FillDefaults() {
	fillDefaults(scenarioPlan(), reflect.ValueOf(s).Elem())
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

// fillDefaults sets every zero field that has a default in v (settable),
// by plan p.
func fillDefaults(p *typePlan, v reflect.Value) {
	if !p.defaults {
		return
	}
	switch p.kind {
	case kStruct:
		for i := range p.fields {
			f := &p.fields[i]
			fv := v.Field(f.index)
			if f.def.IsValid() && fv.IsZero() {
				fv.Set(f.def)
			}
			fillDefaults(f.plan, fv)
		}
	case kList:
		for i := range v.Len() {
			fillDefaults(p.elem, v.Index(i))
		}
	case kMap:
		it := v.MapRange()
		for it.Next() { // determinism: each value is filled on its own
			val := reflect.New(p.elem.typ).Elem()
			val.Set(it.Value())
			fillDefaults(p.elem, val)
			v.SetMapIndex(it.Key(), val)
		}
	}
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
			return fmt.Errorf("agent %q: no script named %q defines it (scripts: %s)", ref, base, strings.Join(keys.Sorted(s.Agents), ", "))
		}
	}
	return nil
}

// RefMatches reports whether an agent reference of a scenario (a fault's
// agent, a cancel's target, an expectation's key) names the agent with
// this path, instance name and script: its path, its instance name, or —
// a bare name, with no / or # — its script (docs/scenarios.md).
func RefMatches(ref, path, name, script string) bool {
	if path == ref || name == ref {
		return true
	}
	return !strings.ContainsAny(ref, "/#") && script == ref
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

// KernelConfig is the kernel configuration a run of s uses.
func (s *Scenario) KernelConfig() kernel.Config {
	return kernel.Config{Limits: s.Limits, RootName: RootScript, Profiles: s.kernelProfiles(), RootProfile: s.RootProfile}
}
