package kernel

import (
	"errors"
	"fmt"
	"slices"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/internal/enumtext"
)

// AgentID names an agent inside one kernel (one tree). The root is 0; children
// get the next free index when they are spawned, so ids are deterministic.
type AgentID int32

// Root is the id of the tree's root agent ("main").
const Root AgentID = 0

// NoAgent marks "no agent" (the root's parent, an unset target).
const NoAgent AgentID = -1

// OpID names one operation the kernel started in the world: an LLM request, a
// tool call or a timer. Ids are never reused, so an event that names an op the
// kernel no longer tracks is stale by construction (I8). 0 means none.
type OpID uint64

// Config configures one kernel (one agent tree).
type Config struct {
	// Limits are the tree's deadlines and budgets. Unlike the other fields
	// they have no defaults: the zero Limits are refused (Validate), so
	// start from DefaultLimits() and change what you need.
	Limits
	// RootName is the root agent's name; "main" when empty.
	RootName string
	// System is the root's system prompt; none when empty.
	System string
	// History seeds the root's chat history (a resumed session). It must be a
	// complete, valid transcript; when it starts with a system message,
	// System must be empty or equal to it.
	History []Message
	// ChildSystem is every child's system prompt; none when empty. A tree
	// with Profiles takes its children's prompts from their profiles
	// instead, and refuses a ChildSystem.
	ChildSystem string
	// Profiles are the kinds of agent a delegation may name: each its own
	// system prompt, tools, delegations and budgets (docs/semantics.md,
	// "Profiles"). None: every child is like its parent, with ChildSystem.
	Profiles []Profile
	// RootProfile names the root's profile among Profiles; "" gives the
	// root every tool and every profile to delegate to. With a profile,
	// the root's system prompt is System when set, else the profile's.
	RootProfile string
	// DelegateTool is the tool name the kernel treats as a delegation;
	// DefaultDelegateTool when empty. Its arguments are {"task": string,
	// "name"?: string, "profile"?: string} (a profile is required when
	// the tree has Profiles).
	DelegateTool string
	// LogCapacity is how many lifecycle events the replay log keeps; 16384 when 0.
	LogCapacity int
	// Idempotent names the tools that are safe to run again when a crash
	// cut them off (EvRecover); a call of any other tool is answered
	// tool_lost instead, never silently re-run.
	Idempotent []string
	// Turns is how many turns the root has already had (a resumed
	// session): its next turn is numbered Turns+1, so turn numbers in a
	// session file and a trace never repeat.
	Turns uint64
	// Ask names the tools whose calls wait for a person's decision before
	// they start; "*" names every tool (never the delegate tool). Empty:
	// no call asks (docs/semantics.md, "Approvals").
	Ask []string
	// Grants are the session grants a resumed session had made
	// ("approve for this session": Grant, docs/semantics.md,
	// "Approvals"): a call they cover does not ask, as if the decisions
	// that made them had been taken in this kernel's life. None: a
	// session starts without grants.
	Grants []Grant
	// Machine is the configured agent state machine the kernel fires its
	// transitions through; a fresh fsm.NewMachine() when nil. Configuring
	// one costs more than the rest of New, so a host that builds many
	// kernels one after another (a simulator's sweep) may give them one
	// machine — but only kernels that never step at the same time: a Fire
	// holds its target state in the machine until it returns.
	Machine *fsm.Machine
}

// Defaults of Config fields left zero.
const (
	DefaultDelegateTool = "delegate"
)

func (c Config) withDefaults() Config {
	if c.RootName == "" {
		c.RootName = "main"
	}
	if c.DelegateTool == "" {
		c.DelegateTool = DefaultDelegateTool
	}
	if c.LogCapacity == 0 {
		c.LogCapacity = 1 << 14
	}
	return c
}

// Validate reports the first bad setting, naming it.
func (c Config) Validate() error {
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	c = c.withDefaults()
	if c.LogCapacity < 1 || c.LogCapacity > 1<<24 {
		return fmt.Errorf("log capacity must be in 1..%d, got %d", 1<<24, c.LogCapacity)
	}
	if err := validateAsk(c.Ask, c.DelegateTool); err != nil {
		return err
	}
	if err := validateGrants(c.Grants, c.DelegateTool); err != nil {
		return err
	}
	if len(c.History) > 0 {
		if err := ValidateTranscript(c.History, false); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		if h := c.History[0]; h.Role == RoleSystem && c.rootSystem() != "" && c.rootSystem() != h.Content {
			return errors.New("system prompt differs from the history's system message")
		}
	}
	return c.validateProfiles()
}

// Outcome is how a turn (or a child's task) ended. Exactly one per turn (I13).
type Outcome uint8

// Outcomes (F5: typed, never UI text).
const (
	OutcomeNone Outcome = iota
	OutcomeCompleted
	OutcomeInterrupted
	OutcomeTimedOut
	OutcomeFailed
	OutcomeBudgetExhausted
)

var outcomeNames = [...]string{"none", "completed", "interrupted", "timed_out", "failed", "budget_exhausted"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// ParseOutcome is the inverse of Outcome.String.
func ParseOutcome(s string) (Outcome, error) {
	if i := slices.Index(outcomeNames[:], s); i > 0 { // not "none": a turn's outcome is one of the others
		return Outcome(i), nil
	}
	return OutcomeNone, fmt.Errorf("unknown outcome %q (want completed, interrupted, timed_out, failed or budget_exhausted)", s)
}

// MarshalText makes outcomes print as their names in JSON.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Reason says why a turn, a tool call or a delegation ended the way it did.
// Every abort carries one (F13): it drives the marker, the parent's result and
// the lifecycle events, so a watchdog is never reported as a user cancel.
type Reason uint8

// Reasons.
const (
	ReasonNone Reason = iota
	// ReasonUserCancel: the user cancelled this agent (Esc / Ctrl-C / /cancel).
	ReasonUserCancel
	// ReasonParentCancelled: an ancestor was aborted (for any reason) and the
	// abort travelled down the tree (F2).
	ReasonParentCancelled
	ReasonFirstTokenTimeout
	ReasonStallTimeout
	ReasonToolTimeout
	ReasonTurnTimeout
	// ReasonBudget: the per-turn LLM request budget ran out.
	ReasonBudget
	// ReasonShutdown: the host is shutting down.
	ReasonShutdown
	// ReasonLLMError: the model's stream failed (after the adapter's retries).
	ReasonLLMError
	// ReasonMaxDepth and ReasonMaxChildren: a delegation was refused.
	ReasonMaxDepth
	ReasonMaxChildren
	// ReasonMalformed: a tool call's arguments were not valid JSON, or a
	// delegation lacked its task.
	ReasonMalformed
	// ReasonToolError: the tool reported an error (or crashed).
	ReasonToolError
	// ReasonMaxAgents: a delegation was refused because the tree holds as
	// many agents as Limits.MaxAgents allows.
	ReasonMaxAgents
	// ReasonOutputLimit: a streamed assistant message went past
	// Limits.MaxMessageBytes; the stream was cut.
	ReasonOutputLimit
	// ReasonMaxCalls: a tool call was refused because its message asked for
	// more than Limits.MaxCalls calls.
	ReasonMaxCalls
	// ReasonCrash: the host crashed while the call ran (EvRecover).
	ReasonCrash
	// ReasonApprovalDenied: a decision denied a call that needed approval.
	ReasonApprovalDenied
	// ReasonApprovalTimeout: nobody decided on a call that needed
	// approval within Limits.ApprovalTimeout.
	ReasonApprovalTimeout
	// ReasonCompactionFailed: a compaction's summarising request failed or
	// answered no summary (docs/semantics.md, "Compaction").
	ReasonCompactionFailed
	// ReasonContextExhausted: the next request cannot be made to fit the
	// context window, even after a compaction.
	ReasonContextExhausted
	// ReasonNotInProfile: a call was refused because its agent's profile
	// does not allow it: a tool the profile does not list, or a
	// delegation to a profile it may not delegate to (docs/semantics.md,
	// "Profiles").
	ReasonNotInProfile
)

var reasonNames = [...]string{
	"", "user_cancel", "parent_cancelled", "first_token_timeout", "stall_timeout",
	"tool_timeout", "turn_timeout", "budget", "shutdown", "llm_error",
	"max_depth", "max_children", "malformed", "tool_error", "max_agents",
	"output_limit", "max_calls", "crash", "approval_denied", "approval_timeout",
	"compaction_failed", "context_exhausted", "not_in_profile",
}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// MarshalText makes reasons print as their names in JSON.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// IsTimeout reports whether r is one of the deadline reasons.
func (r Reason) IsTimeout() bool {
	return r == ReasonFirstTokenTimeout || r == ReasonStallTimeout || r == ReasonToolTimeout || r == ReasonTurnTimeout
}

// OutcomeOf maps an abort reason to the turn outcome it produces.
func OutcomeOf(r Reason) Outcome {
	switch r {
	case ReasonNone:
		return OutcomeCompleted
	case ReasonUserCancel, ReasonParentCancelled, ReasonShutdown:
		return OutcomeInterrupted
	case ReasonFirstTokenTimeout, ReasonStallTimeout, ReasonToolTimeout, ReasonTurnTimeout:
		return OutcomeTimedOut
	case ReasonBudget:
		return OutcomeBudgetExhausted
	default:
		return OutcomeFailed
	}
}

// Sentinel errors for inputs the kernel refuses (raft style). An EffError's
// Err wraps them, and so does the error live.Driver's Submit, Interject, Say
// and Cancel return, so errors.Is matches them wherever a refusal surfaces;
// Detail and the LifeRejected record carry the same text.
var (
	ErrUnknownAgent = errors.New("unknown agent")
	ErrEmptyText    = errors.New("empty text")
	ErrShutdown     = errors.New("kernel is shutting down")
)

// UnmarshalText parses an outcome name ("none" included).
func (o *Outcome) UnmarshalText(b []byte) error {
	return enumtext.Parse(o, outcomeNames[:], b, "outcome")
}

// UnmarshalText parses a reason name.
func (r *Reason) UnmarshalText(b []byte) error { return enumtext.Parse(r, reasonNames[:], b, "reason") }
