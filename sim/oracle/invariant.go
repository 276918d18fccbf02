package oracle

import (
	"encoding/json"
	"fmt"
	"time"
)

// Invariant names what a violation broke: one of the invariants of
// docs/semantics.md ("The oracle"), or — for the last three constants — a
// run limit or a scenario's expectation. Its value is what traces, the CLI
// and sweep summaries print ("I5", "liveness").
type Invariant string

// The invariants, each checked in exactly one file (its Checker;
// TestInvariantsCheckedOnce holds it to that): a checker of this package,
// or — for the two the simulator checks itself, I6 by running a scenario
// twice and I24 by rebuilding a crashed host — a file of package sim.
const (
	NoRequestAfterInterrupt Invariant = "I1"
	CancelReachesSubtree    Invariant = "I2"
	QuiescentByGrace        Invariant = "I3"
	ValidTranscripts        Invariant = "I4"
	DeadlinesOnTime         Invariant = "I5"
	Deterministic           Invariant = "I6"
	DeclaredTransitions     Invariant = "I7"
	StaleChangesNothing     Invariant = "I8"
	OpsAccounted            Invariant = "I9"
	UserTextOnce            Invariant = "I10"
	IdempotentInterrupts    Invariant = "I11"
	NoUIText                Invariant = "I12"
	TypedOutcomes           Invariant = "I13"
	FinishedCallsOnly       Invariant = "I14"
	CapsHold                Invariant = "I15"
	ChildDeadlineClamped    Invariant = "I16"
	MarkersTell             Invariant = "I17"
	InputsAnswered          Invariant = "I18"
	RequestBudget           Invariant = "I19"
	ResultsCarryText        Invariant = "I20"
	OpEndsTruthful          Invariant = "I21"
	NoWaitingForNothing     Invariant = "I22"
	ViewsTellTruth          Invariant = "I23"
	RebuildsExactly         Invariant = "I24"
	SpansEnd                Invariant = "I25"
	ProfileTools            Invariant = "I26"
	Liveness                Invariant = "liveness"

	// RunLimit is no invariant: the run hit its event budget.
	RunLimit Invariant = "limit"
	// Expectation is no invariant: a scenario's `expect` was not met.
	Expectation Invariant = "expect"
)

// invariantSpec is one row of the specification table: what an invariant
// says and which file checks it.
type invariantSpec struct {
	inv       Invariant
	statement string
	checker   string
}

// invariantTable is the one list of invariants; docs/semantics.md's oracle
// table quotes it (TestSemanticsListsInvariants).
var invariantTable = [...]invariantSpec{
	{NoRequestAfterInterrupt, "no agent of an interrupted subtree asks the model again, and no child is spawned in it, until the user submits again", "sim/oracle/check_freeze.go"},
	{CancelReachesSubtree, "an acting cancel interrupts its target and every working descendant in its own step, and every op in flight in an aborted subtree gets exactly one cancel", "sim/oracle/check_cancel.go"},
	{QuiescentByGrace, "by interrupt time + grace the interrupted subtree has left its turn and every op in flight at the interrupt has ended", "sim/oracle/check_quiesce.go"},
	{ValidTranscripts, "every history is a valid transcript that only ever grows, and every request sends a valid transcript with every call answered", "sim/oracle/check_transcript.go"},
	{DeadlinesOnTime, "every deadline fires exactly when due: a first-token, stall, tool or turn timeout, an abandonment after grace and an interjection's restart happen neither before the watched silence or wait reaches its limit nor after", "sim/oracle/check_deadlines.go"},
	{Deterministic, "the same scenario and seed give byte-identical traces", "sim/recheck.go"},
	{DeclaredTransitions, "every transition is one the oracle's own statement of the machine declares, and a step's transitions explain each agent's change of state", "sim/oracle/check_fsm.go"},
	{StaleChangesNothing, "a stale event (an ended op's, a duplicate, a timer not set) changes no state, no history and causes no effect beyond its stale or late record", "sim/oracle/check_stale.go"},
	{OpsAccounted, "every op ends exactly once, no timer survives the run, and the lifecycle log replays to a late subscriber exactly as it was emitted", "sim/oracle/check_accounting.go"},
	{UserTextOnce, "each user text appears in the root's history as often as it was accepted (an interjection flagged so, right after the partial text it cut), and text a cut or a failure ends is kept as a partial message", "sim/oracle/check_usertext.go"},
	{IdempotentInterrupts, "a cancel that finds its turn interrupted or ended changes nothing beyond an ignored record; a turn is interrupted at most once and holds at most one marker", "sim/oracle/check_cancel.go"},
	{NoUIText, "UI strings never enter a transcript", "sim/oracle/check_transcript.go"},
	{TypedOutcomes, "one terminal outcome per turn and one result per call, each with a reason the run justifies; a delegation's result is its child's real outcome, a tool message says what the lifecycle says in its documented JSON form, and an aborted turn leaves exactly one marker", "sim/oracle/check_outcomes.go"},
	{FinishedCallsOnly, "a finished stream's message records the calls it delivered, and a tool starts only as one of them, only once (again after a crash only when its tool is idempotent); the calls a cut stream was still sending are recorded as dropped", "sim/oracle/check_calls.go"},
	{CapsHold, "a message past max_message_bytes is cut in that step (what fit kept, reason output_limit); at most max_calls calls of one message run, and a call is refused max_calls only when it could run and max_calls calls before it run (a call that never runs takes no slot); no agent runs more than max_parallel_tools tools, and a call waiting for a slot starts in the step one frees (whatever freed it), never behind a later call", "sim/oracle/check_calls.go"},
	{ChildDeadlineClamped, "a child's turn deadline never reaches past its parent's: a turn timer set for a child is earlier than the parent's deadline (a child without one is cut by its ancestor's)", "sim/oracle/check_deadlines.go"},
	{MarkersTell, "a marker's outcome and reason are its turn's, and partial=\"true\" exactly when the message right above it is assistant text that was cut off (by the turn's abort or failure, or a crash whose restart the budget refused)", "sim/oracle/check_content.go"},
	{InputsAnswered, "an input is refused exactly where the spec refuses it (empty text, after shutdown, a submission while the root works, a cancel naming no agent; a world event only when malformed), a refusal changes nothing, and an input accepted while the root is Interrupted starts the next turn in the step the tree settles", "sim/oracle/check_inputs.go"},
	{RequestBudget, "no agent makes more requests (max_requests) or spawns more children (max_children) in one turn than its budget, no agent streams two requests at once (a request starts only once every earlier one of its agent was answered or told to stop), no child sits deeper than max_depth, the tree never holds more than max_agents agents nor streams more than max_parallel_requests requests, and no request waits while a slot is free or starts ahead of one that waits", "sim/oracle/check_calls.go"},
	{ResultsCarryText, "streamed text and an adapter's retries are published once as they arrive, a turn's end carries the text its agent produced (the final answer, or what its abort or failure cut off), and a delegation's result tells the parent exactly that, under the child's name", "sim/oracle/check_content.go"},
	{OpEndsTruthful, "an op's end says what ended it (completed or failed by its own answer, cancelled by the answer to its cancel, abandoned when its grace ran out, lost when the host crashed and a recovery resolved it), in the step that ended it; a tool's real result that answers its cancel within its grace is dropped with one late record, and no other answer leaves one (after the grace abandoned the op, what it sends is stale, I8)", "sim/oracle/check_accounting.go"},
	{NoWaitingForNothing, "no agent waits for nothing: in the step the last of its calls gets its result it sends its next request or ends its turn, a delegation's call gets its result in the step its child's turn ends (if no abort closed it before), and an interrupted agent with nothing in flight and no child running settles in that step", "sim/oracle/check_progress.go"},
	{ViewsTellTruth, "what the kernel reports of an agent (its last outcome, reason and summary, its children, its turn's requests, deadline and abort reason, its ops in flight and live children, whether it was freed) and of the tree (quiescence, which agent a path or name finds) is what the oracle observed", "sim/oracle/check_views.go"},
	{RebuildsExactly, "a host rebuilt after a crash from the events it logged replays every logged step exactly as logged and holds the tree the crashed host held (every agent's view, the lifecycle log, quiescence)", "sim/crash.go"},
	{SpansEnd, "every span derived from the steps (an agent's turn, a request, a tool op, a delegation) starts in the step what it stands for starts, under its parent (a root turn's under none, a child's turn under the delegation that spawned it, the rest under their agent's turn), and ends exactly once, in the step the last of what it stands for and the spans under it ends, whatever ended it, with the error.type and typed reason of what did", "sim/oracle/check_spans.go"},
	{ProfileTools, "an agent acts within its profile: no tool starts that its profile does not list, a child is spawned only with the profile its delegation names and only one its parent's profile may delegate to, it starts with that profile's system prompt, and every request carries its agent's profile", "sim/oracle/check_profiles.go"},
	{Liveness, "after the last input or fault every tree is idle within 2×grace + turn_timeout + debounce, and at the end of the run", "sim/oracle/check_quiesce.go"},
	{RunLimit, "(a run limit, not an invariant) the run delivered as many events as it may", "sim/oracle/report.go"},
	{Expectation, "(not an invariant) an expectation of the scenario holds", "sim/oracle/expect.go"},
}

// Invariants lists the invariants in their table order (the run limit and
// the expectations left out).
func Invariants() []Invariant {
	out := make([]Invariant, 0, len(invariantTable))
	for _, s := range invariantTable {
		if s.inv != RunLimit && s.inv != Expectation {
			out = append(out, s.inv)
		}
	}
	return out
}

func (i Invariant) spec() invariantSpec {
	for _, s := range invariantTable {
		if s.inv == i {
			return s
		}
	}
	return invariantSpec{inv: i}
}

// Statement is the invariant's one-line statement ("" for an unknown one).
func (i Invariant) Statement() string { return i.spec().statement }

// Checker is the file that checks the invariant, from the repository's
// root (sim/oracle/check_freeze.go).
func (i Invariant) Checker() string { return i.spec().checker }

// Violation is one broken invariant, run limit or expectation, located in
// virtual time and in the tree.
type Violation struct {
	Invariant Invariant
	At        time.Duration
	Agent     string
	Detail    string
	// Recent are the last events delivered before it, oldest first.
	Recent []string
	// Expect names the expectation an Expectation violation is of
	// (ExpectVerdict.Name).
	Expect string
}

// MarshalJSON writes times in Go duration syntax.
func (v Violation) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Invariant string   `json:"invariant"`
		At        string   `json:"at"`
		Agent     string   `json:"agent"`
		Detail    string   `json:"detail"`
		Recent    []string `json:"recent,omitempty"`
	}{string(v.Invariant), v.At.String(), v.Agent, v.Detail, v.Recent})
}

func (v Violation) String() string {
	return fmt.Sprintf("%s @%v %s: %s", v.Invariant, v.At, v.Agent, v.Detail)
}
