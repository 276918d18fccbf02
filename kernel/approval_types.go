package kernel

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/escapement/escapement/internal/enumtext"
)

// The vocabulary of approvals (docs/semantics.md, "Approvals"): what a
// decision says, how a wait ends, the digest that binds a decision to the
// arguments it decides on, and the errors a refused decision carries.

// Verdict is what a decision (EvDecision) says about the call it names.
type Verdict uint8

// Verdicts.
const (
	VerdictNone Verdict = iota
	// VerdictApprove: the call may start.
	VerdictApprove
	// VerdictApproveArgs: the call may start, and so may every call of the
	// same tool with exactly the same arguments for the rest of the session.
	VerdictApproveArgs
	// VerdictApproveTool: the call may start, and so may every call of the
	// same tool, whatever its arguments, for the rest of the session.
	VerdictApproveTool
	// VerdictDeny: the call never runs; the decision's note reaches the
	// model in the call's result.
	VerdictDeny
)

var verdictNames = [...]string{"", "approve", "approve_args", "approve_tool", "deny"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// MarshalText prints verdicts by name.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText parses a verdict name.
func (v *Verdict) UnmarshalText(b []byte) error {
	return enumtext.Parse(v, verdictNames[:], b, "verdict")
}

// approves reports whether v lets the call start.
func (v Verdict) approves() bool {
	return v == VerdictApprove || v == VerdictApproveArgs || v == VerdictApproveTool
}

// ApprovalEnd is how a call's wait for a decision ended: exactly one per
// wait (LifeApprovalResolved).
type ApprovalEnd uint8

// Approval ends.
const (
	ApprovalNone ApprovalEnd = iota
	// ApprovalApproved: a decision (or a session grant made while it
	// waited) approved it; the call starts, or waits for a slot.
	ApprovalApproved
	// ApprovalDenied: a decision denied it.
	ApprovalDenied
	// ApprovalExpired: Limits.ApprovalTimeout passed without a decision.
	ApprovalExpired
	// ApprovalWithdrawn: its turn was aborted while it waited (a cancel of
	// its agent or an ancestor, a turn deadline, a shutdown).
	ApprovalWithdrawn
)

var approvalEndNames = [...]string{"", "approved", "denied", "expired", "withdrawn"}

func (e ApprovalEnd) String() string {
	if int(e) < len(approvalEndNames) {
		return approvalEndNames[e]
	}
	return fmt.Sprintf("approval_end(%d)", uint8(e))
}

// MarshalText prints approval ends by name.
func (e ApprovalEnd) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText parses an approval end name.
func (e *ApprovalEnd) UnmarshalText(b []byte) error {
	return enumtext.Parse(e, approvalEndNames[:], b, "approval end")
}

// Errors of a refused decision (an EffError's Err wraps them).
var (
	// ErrNotWaiting: the decision names a call of its agent that never
	// asked for approval (or no call at all).
	ErrNotWaiting = errors.New("the call is not waiting for approval")
	// ErrDigestMismatch: the decision's digest is not the digest of the
	// waiting call's arguments (or an approval gives none): it was meant
	// for other arguments, and is never applied to these.
	ErrDigestMismatch = errors.New("the digest does not match the call's arguments")
	// ErrDecisionStale is what a host reports to whoever decided when the
	// kernel recorded the decision stale (LifeStale: the wait had already
	// ended). The kernel itself returns no error effect for a stale
	// decision, as for any stale event (I8).
	ErrDecisionStale = errors.New("the call's wait for approval has ended")
)

// DigestLen is the length of a digest in hexadecimal digits.
const DigestLen = 16

// Digest is the digest that binds a decision to the arguments it decides
// on: the first DigestLen lowercase hexadecimal digits of the SHA-256 of
// args, byte for byte as the model streamed them and the tool receives
// them (no normalisation). docs/semantics.md, "Approvals".
func Digest(args string) string {
	sum := sha256.Sum256([]byte(args))
	return hex.EncodeToString(sum[:DigestLen/2])
}

// Decide is a decision on call callID of agent: verdict v, for the
// arguments whose digest is digest (a denial may leave it empty), with a
// note for the model (a denial's).
func Decide(at time.Duration, agent AgentID, callID, digest string, v Verdict, note string) Event {
	return Event{Kind: EvDecision, At: at, Agent: agent, CallID: callID, Digest: digest, Verdict: v, Text: note}
}

// Approve approves call callID of agent, whose arguments have digest.
func Approve(at time.Duration, agent AgentID, callID, digest string) Event {
	return Decide(at, agent, callID, digest, VerdictApprove, "")
}

// Deny denies call callID of agent; note reaches the model in its result.
func Deny(at time.Duration, agent AgentID, callID, note string) Event {
	return Decide(at, agent, callID, "", VerdictDeny, note)
}

// Grant is a session grant ("approve for this session", docs/semantics.md,
// "Approvals"): calls of Tool need no approval — every call, or, when
// Exact, only those whose arguments are Args, byte for byte. A decision
// approve_tool makes the first kind, approve_args the second; each is
// recorded as LifeApprovalGranted (GrantOf reads it back), Kernel.Grants
// lists them, and Config.Grants carries them into a resumed session.
type Grant struct {
	Tool  string `json:"tool"`
	Args  string `json:"args,omitempty"`
	Exact bool   `json:"exact,omitempty"`
}

// GrantOf is the grant an approval_granted record (LifeApprovalGranted)
// says was made: an exact one when the record carries the arguments'
// digest.
func GrantOf(l Lifecycle) Grant {
	if l.Digest == "" {
		return Grant{Tool: l.Name}
	}
	return Grant{Tool: l.Name, Args: l.Text, Exact: true}
}

// Approval is a call waiting for a decision, as Kernel.Approvals lists it.
type Approval struct {
	Agent  AgentID
	CallID string
	Tool   string
	// Args are the call's arguments as the tool would receive them, and
	// Digest their digest, which an approval must name.
	Args   string
	Digest string
	// AskedAt is when the wait began; EndsAt is when it ends by itself:
	// its expiry, or its turn deadline when that comes first (Expires
	// false: the turn deadline withdraws it).
	AskedAt time.Duration
	EndsAt  time.Duration
	Expires bool
}

func describeDecision(b *strings.Builder, e Event) {
	fmt.Fprintf(b, " agent=%d call=%s %s", e.Agent, e.CallID, e.Verdict)
	if e.Digest != "" {
		b.WriteString(" digest=" + e.Digest)
	}
	if e.Text != "" {
		fmt.Fprintf(b, " note=%q", e.Text)
	}
}

func describeApproval(b *strings.Builder, l Lifecycle) {
	switch l.Kind {
	case LifeApprovalRequested:
		fmt.Fprintf(b, " call=%s %s args=%s digest=%s within=%v", l.CallID, nameOrEmpty(l.Name), quoteArgs(l.Text), l.Digest, l.Delay)
	case LifeApprovalResolved:
		fmt.Fprintf(b, " call=%s %s %s", l.CallID, nameOrEmpty(l.Name), l.Approval)
		if l.Reason != ReasonNone {
			fmt.Fprintf(b, " reason=%s", l.Reason)
		}
		if l.Text != "" {
			fmt.Fprintf(b, " note=%q", l.Text)
		}
		fmt.Fprintf(b, " since=%v", l.Since)
	case LifeApprovalGranted:
		fmt.Fprintf(b, " call=%s %s", l.CallID, nameOrEmpty(l.Name))
		if l.Digest != "" {
			fmt.Fprintf(b, " args=%s digest=%s", quoteArgs(l.Text), l.Digest)
		} else {
			b.WriteString(" any args")
		}
		b.WriteString(" for the session")
	}
}

// notApprovedContent is the result of a call that was denied or expired.
func notApprovedContent(status CallStatus, reason Reason, note string) string {
	w := newJSON(96 + len(note))
	w.str("type", "tool_not_approved", false)
	w.str("status", status.String(), false)
	w.str("reason", reason.String(), false)
	w.str("note", note, true)
	return w.done()
}

// withdrawnContent is the result of a call whose wait an abort withdrew:
// the abort's, as every call the abort closes gets, saying it waited.
func withdrawnContent(status CallStatus, reason Reason) string {
	w := newJSON(112)
	w.str("type", "tool_aborted", false)
	w.str("status", status.String(), false)
	w.str("reason", reason.String(), false)
	w.str("approval", ApprovalWithdrawn.String(), false)
	return w.done()
}
