package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Version is the protocol's version (docs/protocol.md, "Versions"): the
// started event carries it. It goes up whenever an event type or a field
// is added, removed or changes meaning.
const Version = 2

// TextCap bounds the tool arguments and results an event carries, in
// bytes: a longer one is cut at a character boundary and the event's
// truncated field says so.
const TextCap = 16 << 10

// Event is one line of the protocol. Type says which event it is, and so
// which of the fields are present (Fields(Type)); the others are not
// written. A field that may have no value for its type is written as null
// then (the schema says which); all others are always written, zero or not.
type Event struct {
	Type      string `json:"type"`
	Seq       uint64 `json:"seq"`
	ElapsedMS int64  `json:"elapsed_ms"`

	// started
	Protocol  int              `json:"protocol"`
	Version   string           `json:"version"`
	Model     string           `json:"model"`
	Endpoint  string           `json:"endpoint"`
	Profiles  []string         `json:"profiles"`
	Session   string           `json:"session"`
	Resumed   bool             `json:"resumed"`
	Workspace string           `json:"workspace"`
	Tools     []string         `json:"tools"`
	Limits    map[string]int64 `json:"limits"`

	// lifecycle events
	Agent      string `json:"agent"` // the agent's path: "main", "main/explore"
	Turn       uint64 `json:"turn"`
	Op         uint64 `json:"op"`
	N          int    `json:"n"`
	Text       string `json:"text"`
	From       string `json:"from"`
	Trigger    string `json:"trigger"`
	To         string `json:"to"`
	State      string `json:"state"`
	Attempt    int    `json:"attempt"`
	DelayMS    int64  `json:"delay_ms"`
	Cause      string `json:"cause"`
	OpKind     string `json:"op_kind"`
	End        string `json:"end"`
	Usage      *Usage `json:"usage"`
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	Arguments  string `json:"arguments"`
	Args       string `json:"args"` // approval_requested's arguments again, under the name decision scripts use
	Result     string `json:"result"`
	Truncated  bool   `json:"truncated"`
	Status     string `json:"status"`
	Reason     string `json:"reason"`
	Outcome    string `json:"outcome"`
	Detail     string `json:"detail"`
	Child      string `json:"child"`
	Name       string `json:"name"`
	Task       string `json:"task"`
	Queued     bool   `json:"queued"`
	SinceMS    int64  `json:"since_ms"`
	Approval   string `json:"approval"`
	Note       string `json:"note"`
	Digest     string `json:"digest"`
	EndsInMS   int64  `json:"ends_in_ms"`
	Expires    bool   `json:"expires"`
	WaitedMS   int64  `json:"waited_ms"`
	Profile    string `json:"profile"`
	Compaction bool   `json:"compaction"`
	Why        string `json:"why"`
	Estimate   int    `json:"estimate"`
	Focus      string `json:"focus"`
	Summarised int    `json:"summarised"`
	Summary    string `json:"summary"`

	// mcp
	MCPEvent  string   `json:"event"`
	Server    string   `json:"server"`
	Progress  *float64 `json:"progress"`
	Total     float64  `json:"total"`
	Message   string   `json:"message"`
	RequestID string   `json:"request_id"`

	// error
	Source string `json:"source"`
	Line   int    `json:"line"`

	// result
	Answer     string `json:"answer"`
	Turns      int    `json:"turns"`
	Requests   int    `json:"requests"`
	DurationMS int64  `json:"duration_ms"`
	Resume     string `json:"resume"`
}

// Usage is token accounting (docs/protocol.md, "Usage"): what one request
// reported, or the sum over several — a turn's requests and its
// sub-agents', a run's turns. Requests counts the requests summed and
// Unreported how many of them reported nothing: the sums are a lower bound
// unless it is 0.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	ReasoningTokens  int `json:"reasoning_tokens"`
	Requests         int `json:"requests"`
	Unreported       int `json:"unreported"`
}

// Add adds u's counts to t.
func (t *Usage) Add(u Usage) {
	t.PromptTokens += u.PromptTokens
	t.CompletionTokens += u.CompletionTokens
	t.CachedTokens += u.CachedTokens
	t.ReasoningTokens += u.ReasoningTokens
	t.Requests += u.Requests
	t.Unreported += u.Unreported
}

// Event types (docs/protocol.md, "Events"). Every kernel lifecycle kind
// is one of them, under its own name; Started, MCP, Error and Result are
// the run's.
const (
	TypeStarted           = "started"
	TypeTurnStarted       = "turn_started"
	TypeTransition        = "transition"
	TypeRequestWaiting    = "request_waiting"
	TypeRequestStarted    = "request_started"
	TypeDelta             = "delta"
	TypeRetry             = "retry"
	TypeOpEnded           = "op_ended"
	TypeToolStarted       = "tool_started"
	TypeCallFinished      = "call_finished"
	TypeCallDropped       = "call_dropped"
	TypeDelegated         = "delegated"
	TypeInterjected       = "interjected"
	TypeInterrupted       = "interrupted"
	TypeTimedOut          = "timed_out"
	TypeTurnEnded         = "turn_ended"
	TypeLate              = "late"
	TypeStale             = "stale"
	TypeIgnored           = "ignored"
	TypeRejected          = "rejected"
	TypeRecovered         = "recovered"
	TypeApprovalRequested = "approval_requested"
	TypeApprovalResolved  = "approval_resolved"
	TypeApprovalGranted   = "approval_granted"
	TypeCompactionStarted = "compaction_started"
	TypeCompacted         = "compacted"
	TypeMCP               = "mcp"
	TypeError             = "error"
	TypeResult            = "result"
)

// field is one field of an event type: its JSON name, and whether it is
// written as null when its Go value is the zero value.
type field struct {
	name     string
	nullable bool
}

// Field shorthands for the table below.
var (
	fAgent = field{name: "agent"}
	fTurn  = field{name: "turn"}
	fOp    = field{name: "op"}
)

// f is a field that is always written; n one that is null when zero.
func f(name string) field { return field{name: name} }
func n(name string) field { return field{name: name, nullable: true} }

// shapes is each event type's fields after type, seq and elapsed_ms, in
// the order they are written. docs/protocol.md and schema.json say the
// same (tests hold both to it).
var shapes = map[string][]field{
	TypeStarted:           {f("protocol"), f("version"), f("model"), f("endpoint"), n("profile"), f("profiles"), f("session"), f("resumed"), f("workspace"), f("tools"), f("limits")},
	TypeTurnStarted:       {fAgent, fTurn, f("text")},
	TypeTransition:        {fAgent, fTurn, f("from"), f("trigger"), f("to")},
	TypeRequestWaiting:    {fAgent, fTurn, n("n"), f("compaction")},
	TypeRequestStarted:    {fAgent, fTurn, fOp, f("n")},
	TypeDelta:             {fAgent, fTurn, fOp, f("text")},
	TypeRetry:             {fAgent, fTurn, fOp, f("attempt"), f("delay_ms"), f("cause")},
	TypeOpEnded:           {fAgent, fTurn, fOp, n("op_kind"), f("end"), n("usage")},
	TypeToolStarted:       {fAgent, fTurn, fOp, f("call_id"), f("tool"), f("arguments"), f("truncated")},
	TypeCallFinished:      {fAgent, fTurn, n("op"), f("call_id"), f("tool"), f("status"), n("reason"), f("result"), f("truncated"), n("child"), n("outcome")},
	TypeCallDropped:       {fAgent, fTurn, f("call_id"), f("tool"), f("arguments"), f("truncated")},
	TypeDelegated:         {fAgent, fTurn, f("child"), f("call_id"), f("name"), n("profile"), f("task")},
	TypeInterjected:       {fAgent, fTurn, f("text"), f("queued")},
	TypeInterrupted:       {fAgent, fTurn, f("reason")},
	TypeTimedOut:          {fAgent, fTurn, f("reason"), n("op"), f("since_ms")},
	TypeTurnEnded:         {fAgent, fTurn, f("outcome"), n("reason"), f("text"), n("detail"), f("usage")},
	TypeLate:              {fAgent, fTurn, n("op"), f("text")},
	TypeStale:             {n("agent"), fTurn, n("op"), n("call_id"), f("text")},
	TypeIgnored:           {fAgent, fTurn, f("text")},
	TypeRejected:          {fAgent, fTurn, n("state"), n("trigger"), f("text")},
	TypeRecovered:         {fAgent, fTurn, f("n"), f("text")},
	TypeApprovalRequested: {fAgent, fTurn, f("call_id"), f("tool"), f("arguments"), f("args"), f("truncated"), f("digest"), f("ends_in_ms"), f("expires")},
	TypeApprovalResolved:  {fAgent, fTurn, f("call_id"), f("tool"), f("approval"), n("reason"), n("note"), f("digest"), f("waited_ms")},
	TypeApprovalGranted:   {fAgent, fTurn, f("call_id"), f("tool"), n("arguments"), n("digest")},
	TypeCompactionStarted: {fAgent, fTurn, fOp, f("why"), f("estimate"), n("focus")},
	TypeCompacted:         {fAgent, fTurn, fOp, f("summarised"), f("summary"), f("truncated")},
	TypeMCP:               {f("event"), f("server"), n("agent"), n("tool"), n("op"), n("progress"), n("total"), n("message"), n("detail"), n("request_id")},
	TypeError:             {f("source"), n("line"), f("message")},
	TypeResult:            {n("outcome"), n("reason"), n("detail"), f("answer"), f("turns"), f("requests"), f("usage"), f("duration_ms"), f("session"), f("resume")},
}

// header is what every event starts with.
var header = []field{f("type"), f("seq"), f("elapsed_ms")}

// Types lists the event types, sorted.
func Types() []string {
	types := make([]string, 0, len(shapes))
	for t := range shapes {
		types = append(types, t)
	}
	slices.Sort(types)
	return types
}

// Fields lists the fields an event of type t has, in the order they are
// written, type, seq and elapsed_ms first; nullable says which of them
// may be null. Nil for an unknown type.
func Fields(t string) (names []string, nullable map[string]bool) {
	shape, ok := shapes[t]
	if !ok {
		return nil, nil
	}
	nullable = map[string]bool{}
	for _, fl := range append(append([]field(nil), header...), shape...) {
		names = append(names, fl.name)
		if fl.nullable {
			nullable[fl.name] = true
		}
	}
	return names, nullable
}

// fieldIndex maps each JSON name to its field of Event (built once from
// the struct's tags; read only).
var fieldIndex = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeFor[Event]()
	for i := range t.NumField() {
		m[strings.Split(t.Field(i).Tag.Get("json"), ",")[0]] = i
	}
	return m
}()

// MarshalJSON writes the fields of e's type, in order: a nullable field
// whose value is the zero value as null, every other field as it is.
func (e Event) MarshalJSON() ([]byte, error) {
	shape, ok := shapes[e.Type]
	if !ok {
		return nil, fmt.Errorf("protocol: unknown event type %q", e.Type)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	v := reflect.ValueOf(e)
	b.WriteByte('{')
	for i, fl := range append(append(make([]field, 0, len(header)+len(shape)), header...), shape...) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", fl.name)
		fv := v.Field(fieldIndex[fl.name])
		if fl.nullable && fv.IsZero() {
			b.WriteString("null")
			continue
		}
		if err := enc.Encode(fv.Interface()); err != nil {
			return nil, fmt.Errorf("protocol: %s.%s: %w", e.Type, fl.name, err)
		}
		b.Truncate(b.Len() - 1) // the encoder's newline
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// mapStrings returns e with fn applied to every string it holds (a
// redaction).
func (e Event) mapStrings(fn func(string) string) Event {
	v := reflect.ValueOf(&e).Elem()
	for i := range v.NumField() {
		switch fv := v.Field(i); fv.Kind() {
		case reflect.String:
			fv.SetString(fn(fv.String()))
		case reflect.Slice:
			if s, ok := fv.Interface().([]string); ok && s != nil {
				out := make([]string, len(s))
				for j := range s {
					out[j] = fn(s[j])
				}
				fv.Set(reflect.ValueOf(out))
			}
		}
	}
	return e
}
