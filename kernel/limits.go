package kernel

import (
	"fmt"
	"iter"
	"time"
)

// Limits are the deadlines and budgets of a tree (docs/semantics.md,
// "Deadlines" and "Budgets and caps"). Every wait has a deadline: all
// durations must be positive. The fields are described once, in LimitTable:
// validation, the CLI's flags, the scenario format and the trace header are
// all built from that table.
type Limits struct {
	// Grace is how long a cancelled operation gets to stop before it is
	// abandoned (F3). The tree is quiescent by interrupt time + Grace (I3).
	Grace time.Duration `json:"grace"`
	// FirstTokenTimeout bounds the silence between a request's start and its
	// first chunk.
	FirstTokenTimeout time.Duration `json:"first_token_timeout"`
	// StallTimeout bounds the silence between two chunks of one stream. It
	// watches only that stream (F4).
	StallTimeout time.Duration `json:"stall_timeout"`
	// ToolTimeout bounds one tool call, from start to result.
	ToolTimeout time.Duration `json:"tool_timeout"`
	// TurnTimeout bounds a whole turn. A child's turn deadline is the earlier of
	// its own and its parent's (child ≤ parent's remaining time).
	TurnTimeout time.Duration `json:"turn_timeout"`
	// Debounce is how long, after an interjection cuts a stream, more
	// interjections may join before the request restarts. (Repeated cancels
	// need no window: the first acts at once and the FSM coalesces the rest,
	// see onCancel.)
	Debounce time.Duration `json:"debounce"`
	// MaxDepth is the deepest an agent may sit (the root is depth 0). A
	// delegation that would go deeper gets an error tool result.
	MaxDepth int `json:"max_depth"`
	// MaxChildren is how many children one agent may delegate to per turn.
	MaxChildren int `json:"max_children"`
	// MaxAgents is how many agents the tree may hold at once: the root and
	// every child not yet freed (docs/semantics.md, "Finished agents"). A
	// delegation beyond it is refused with reason max_agents.
	MaxAgents int `json:"max_agents"`
	// MaxRequests is how many LLM requests one agent may make per turn.
	MaxRequests int `json:"max_requests"`
	// MaxMessageBytes caps what one streamed assistant message may hold:
	// its text plus its tool calls' names and arguments. A stream that
	// goes past it is cut like an abort with reason output_limit; what
	// arrived within the cap is kept as partial text.
	MaxMessageBytes int `json:"max_message_bytes"`
	// MaxCalls is how many tool calls (delegations included) of one
	// assistant message run; every further call gets a refusal result with
	// reason max_calls, so the model is told which calls did not run.
	MaxCalls int `json:"max_calls"`
	// MaxParallelTools is how many tool calls of one agent run at once; the
	// rest wait their turn in call order (each still cancellable, and its
	// tool deadline starts when it starts).
	MaxParallelTools int `json:"max_parallel_tools"`
	// MaxParallelRequests is how many model requests the whole tree
	// streams at once (a cancelled one counts until it ends); the rest wait
	// their turn in the order they were asked for, and a request's
	// first-token deadline starts when it really starts.
	MaxParallelRequests int `json:"max_parallel_requests"`
	// ApprovalTimeout bounds a call's wait for a person's decision; the
	// turn deadline bounds it too, whichever comes first.
	ApprovalTimeout time.Duration `json:"approval_timeout"`
	// ContextWindow is the model's context window in tokens; 0 is unknown,
	// and the kernel then never compacts on its own (docs/semantics.md,
	// "Compaction").
	ContextWindow int `json:"context_window"`
	// CompactPercent is the compaction threshold: a request whose estimate
	// passes this share of ContextWindow is preceded by a compaction.
	CompactPercent int `json:"compact_percent"`
}

// LimitUnit says how a limit's value reads.
type LimitUnit uint8

// Limit units.
const (
	// UnitDuration: a time.Duration (Go syntax in flags and scenarios).
	UnitDuration LimitUnit = iota + 1
	// UnitCount: a whole number.
	UnitCount
)

// LimitSpec describes one limit: the row of LimitTable that everything
// derives from.
type LimitSpec struct {
	// Name is the limit's key in scenario files and trace headers.
	Name string
	// Flag is the CLI flag that sets it (without "--").
	Flag string
	// Unit says whether it is a duration or a count.
	Unit LimitUnit
	// Default is the value DefaultLimits has (nanoseconds for durations).
	Default int64
	// Min and Max bound valid values (nanoseconds for durations).
	Min, Max int64
	// Usage is one line for --help and the documentation.
	Usage string

	field limitField
}

// limitField names the field of Limits a LimitSpec describes. A switch,
// not a func per row: a func value would make every Get copy its Limits to
// the heap (the trace header and Validate read all of them per run).
type limitField uint8

const (
	limitGrace limitField = iota + 1 // zero: a LimitSpec not from the table
	limitFirstTokenTimeout
	limitStallTimeout
	limitToolTimeout
	limitTurnTimeout
	limitDebounce
	limitMaxDepth
	limitMaxChildren
	limitMaxAgents
	limitMaxRequests
	limitMaxMessageBytes
	limitMaxCalls
	limitMaxParallelTools
	limitMaxParallelRequests
	limitApprovalTimeout
	limitContextWindow
	limitCompactPercent
)

// fieldOf is the field f of l: a duration or a count (the other nil).
func (l *Limits) fieldOf(f limitField) (*time.Duration, *int) {
	switch f {
	case limitGrace:
		return &l.Grace, nil
	case limitFirstTokenTimeout:
		return &l.FirstTokenTimeout, nil
	case limitStallTimeout:
		return &l.StallTimeout, nil
	case limitToolTimeout:
		return &l.ToolTimeout, nil
	case limitTurnTimeout:
		return &l.TurnTimeout, nil
	case limitDebounce:
		return &l.Debounce, nil
	case limitMaxDepth:
		return nil, &l.MaxDepth
	case limitMaxChildren:
		return nil, &l.MaxChildren
	case limitMaxAgents:
		return nil, &l.MaxAgents
	case limitMaxRequests:
		return nil, &l.MaxRequests
	case limitMaxMessageBytes:
		return nil, &l.MaxMessageBytes
	case limitMaxCalls:
		return nil, &l.MaxCalls
	case limitMaxParallelTools:
		return nil, &l.MaxParallelTools
	case limitMaxParallelRequests:
		return nil, &l.MaxParallelRequests
	case limitApprovalTimeout:
		return &l.ApprovalTimeout, nil
	case limitContextWindow:
		return nil, &l.ContextWindow
	case limitCompactPercent:
		return nil, &l.CompactPercent
	}
	return nil, nil
}

// Ceilings on the configurable limits: a limit on everything (TigerBeetle).
const (
	MaxDepthCeiling    = 1 << 16
	MaxChildrenCeiling = 1 << 20
	MaxRequestsCeiling = 1 << 20
	// MaxMessageBytesCeiling bounds MaxMessageBytes (1 GiB).
	MaxMessageBytesCeiling = 1 << 30
	// MaxCallsCeiling bounds MaxCalls and MaxParallelTools.
	MaxCallsCeiling = 1 << 16
	// MaxAgentsCeiling bounds MaxAgents and MaxParallelRequests (a tree
	// streams at most one request per agent).
	MaxAgentsCeiling = 1 << 22
	// ContextWindowCeiling bounds ContextWindow (a billion tokens).
	ContextWindowCeiling = 1 << 30
	// maxDuration is the longest any deadline may be (about 292 years,
	// the most a time.Duration holds).
	maxDuration = int64(1<<63 - 1)
)

// limitTable is the one definition of the limits, in the order every
// rendering (trace header, canonical scenario, --help) uses.
var limitTable = [...]LimitSpec{
	{Name: "grace", Flag: "grace", Unit: UnitDuration, Default: int64(2 * time.Second), Min: 1, Max: maxDuration,
		Usage: "time a cancelled stream or tool gets to stop before it is abandoned",
		field: limitGrace},
	{Name: "first_token_timeout", Flag: "first-token-timeout", Unit: UnitDuration, Default: int64(30 * time.Second), Min: 1, Max: maxDuration,
		Usage: "silence allowed from a request's start to its first chunk",
		field: limitFirstTokenTimeout},
	{Name: "stall_timeout", Flag: "stall-timeout", Unit: UnitDuration, Default: int64(30 * time.Second), Min: 1, Max: maxDuration,
		Usage: "silence allowed between two chunks of one stream",
		field: limitStallTimeout},
	{Name: "tool_timeout", Flag: "tool-timeout", Unit: UnitDuration, Default: int64(2 * time.Minute), Min: 1, Max: maxDuration,
		Usage: "time one tool call may take, from its start to its result",
		field: limitToolTimeout},
	{Name: "turn_timeout", Flag: "turn-timeout", Unit: UnitDuration, Default: int64(10 * time.Minute), Min: 1, Max: maxDuration,
		Usage: "time one turn may take (a child gets at most its parent's remaining time)",
		field: limitTurnTimeout},
	{Name: "debounce", Flag: "debounce", Unit: UnitDuration, Default: int64(100 * time.Millisecond), Min: 0, Max: maxDuration,
		Usage: "how long more interjections may join a cut stream before its request restarts",
		field: limitDebounce},
	{Name: "max_depth", Flag: "max-depth", Unit: UnitCount, Default: 8, Min: 0, Max: MaxDepthCeiling,
		Usage: "deepest delegation level (the root is 0); deeper delegations are refused",
		field: limitMaxDepth},
	{Name: "max_children", Flag: "max-children", Unit: UnitCount, Default: 16, Min: 0, Max: MaxChildrenCeiling,
		Usage: "delegations per agent per turn; further ones are refused",
		field: limitMaxChildren},
	{Name: "max_agents", Flag: "max-agents", Unit: UnitCount, Default: 64, Min: 1, Max: MaxAgentsCeiling,
		Usage: "agents one tree holds at once (the root and every child not yet finished); further delegations are refused",
		field: limitMaxAgents},
	{Name: "max_requests", Flag: "max-requests", Unit: UnitCount, Default: 50, Min: 1, Max: MaxRequestsCeiling,
		Usage: "LLM requests per agent per turn; the turn ends budget_exhausted when they run out",
		field: limitMaxRequests},
	{Name: "max_message_bytes", Flag: "max-message-bytes", Unit: UnitCount, Default: 1 << 20, Min: 1, Max: MaxMessageBytesCeiling,
		Usage: "bytes one streamed assistant message may hold (text and tool calls); beyond it the stream is cut, reason output_limit",
		field: limitMaxMessageBytes},
	{Name: "max_calls", Flag: "max-calls", Unit: UnitCount, Default: 64, Min: 1, Max: MaxCallsCeiling,
		Usage: "tool calls of one assistant message that run; each further call gets a refusal result (reason max_calls)",
		field: limitMaxCalls},
	{Name: "max_parallel_tools", Flag: "max-parallel-tools", Unit: UnitCount, Default: 8, Min: 1, Max: MaxCallsCeiling,
		Usage: "tool calls one agent runs at once; the rest wait their turn in call order",
		field: limitMaxParallelTools},
	{Name: "max_parallel_requests", Flag: "max-parallel-requests", Unit: UnitCount, Default: 8, Min: 1, Max: MaxAgentsCeiling,
		Usage: "model requests one tree streams at once; the rest wait their turn in the order asked, their first-token deadline from their real start",
		field: limitMaxParallelRequests},
	{Name: "approval_timeout", Flag: "approval-timeout", Unit: UnitDuration, Default: int64(5 * time.Minute), Min: 1, Max: maxDuration,
		Usage: "time a call that needs approval waits for a decision before it expires (never past the turn's deadline)",
		field: limitApprovalTimeout},
	{Name: "context_window", Flag: "context-window", Unit: UnitCount, Default: 0, Min: 0, Max: ContextWindowCeiling,
		Usage: "the model's context window in tokens; past compact_percent of it a compaction runs before the request (0: unknown, no compaction on its own)",
		field: limitContextWindow},
	{Name: "compact_percent", Flag: "compact-percent", Unit: UnitCount, Default: 80, Min: 1, Max: 100,
		Usage: "the share of context_window, in percent, a request's estimate may reach before a compaction runs first",
		field: limitCompactPercent},
}

// LimitTable returns the limits' specifications in their canonical order
// (a fresh slice each call).
func LimitTable() []LimitSpec { return append([]LimitSpec(nil), limitTable[:]...) }

// LimitSpecs yields LimitTable's rows with their index, without copying
// the table (every trace header reads it).
func LimitSpecs() iter.Seq2[int, LimitSpec] {
	return func(yield func(int, LimitSpec) bool) {
		for i, s := range limitTable {
			if !yield(i, s) {
				return
			}
		}
	}
}

// DurationPtr is the field s describes in l, for a duration limit (nil for
// a count), so flag packages can bind it directly.
func (s LimitSpec) DurationPtr(l *Limits) *time.Duration {
	d, _ := l.fieldOf(s.field)
	return d
}

// IntPtr is the field s describes in l, for a count limit (nil for a
// duration).
func (s LimitSpec) IntPtr(l *Limits) *int {
	_, n := l.fieldOf(s.field)
	return n
}

// Get reads the limit from l (nanoseconds for durations).
func (s LimitSpec) Get(l Limits) int64 {
	d, n := l.fieldOf(s.field)
	if d != nil {
		return int64(*d)
	}
	return int64(*n)
}

// Set writes v into l (nanoseconds for durations); it does not validate.
func (s LimitSpec) Set(l *Limits, v int64) {
	if d, n := l.fieldOf(s.field); d != nil {
		*d = time.Duration(v)
	} else {
		*n = int(v)
	}
}

// Check reports why v is not a valid value for s, as a phrase to put after
// the limit's name ("must be positive, got 0s"); nil when it is valid.
func (s LimitSpec) Check(v int64) error {
	if v >= s.Min && v <= s.Max {
		return nil
	}
	if s.Unit == UnitDuration {
		if s.Min > 0 {
			return fmt.Errorf("must be positive, got %v", time.Duration(v))
		}
		return fmt.Errorf("must not be negative, got %v", time.Duration(v))
	}
	return fmt.Errorf("must be in %d..%d, got %d", s.Min, s.Max, v)
}

// Format prints v the way the scenario format and flags read it.
func (s LimitSpec) Format(v int64) string {
	if s.Unit == UnitDuration {
		return time.Duration(v).String()
	}
	return fmt.Sprint(v)
}

// DefaultLimits are the documented defaults (the scenario format's too).
func DefaultLimits() Limits {
	var l Limits
	for _, s := range limitTable {
		s.Set(&l, s.Default)
	}
	return l
}

// Validate reports the first limit that is out of range, naming it.
func (l Limits) Validate() error {
	for _, s := range limitTable {
		if err := s.Check(s.Get(l)); err != nil {
			return fmt.Errorf("limit %s %w", s.Name, err)
		}
	}
	return nil
}
