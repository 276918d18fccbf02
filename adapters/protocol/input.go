package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
)

// What an input line asks for (docs/protocol.md, "Input").
const (
	// InputMessage: a user message — a new turn when the root is idle;
	// while a turn runs, what the command does with a line (chat's
	// --while-busy; run interjects it).
	InputMessage = "message"
	// InputInterject: text that joins the running turn (a new turn when
	// none runs).
	InputInterject = "interject"
	// InputQueue: the next turn, started once the running one has ended.
	InputQueue = "queue"
	// InputCancel: cancel the root's running turn, or a sub-agent's.
	InputCancel = "cancel"
	// InputApprove and InputDeny: a decision on a tool call that waits
	// for approval.
	InputApprove = "approve"
	InputDeny    = "deny"
)

// Input is one line of --input-format json input.
type Input struct {
	// Kind is one of the Input* verbs: the line's one verb key.
	Kind string
	// Text is a message's, an interjection's or a queued turn's text.
	Text string
	// Agent is the agent a cancel or a decision names by path ("" for a
	// cancel of the root's turn, or a decision whose call id is the
	// tree's only one).
	Agent string
	// CallID, Digest, For and Note are a decision's: the call it decides,
	// the digest of the arguments approved (or denied: optional), what an
	// approval grants besides ("args", "tool" or ""), a denial's note.
	CallID, Digest, For, Note string
}

// inputKeys are the keys each verb allows beside itself.
var inputKeys = map[string][]string{
	InputMessage:   nil,
	InputInterject: nil,
	InputQueue:     nil,
	InputCancel:    {"agent"},
	InputApprove:   {"digest", "agent", "for"},
	InputDeny:      {"note", "digest", "agent"},
}

// ErrInput is wrapped by every error ParseInput returns.
var ErrInput = errors.New("bad input line")

// ParseInput reads one input line: a JSON object with exactly one verb
// key (message, interject, queue, cancel, approve, deny) and the keys that
// verb allows. Its error says what is wrong in words a person can act on.
func ParseInput(line []byte) (Input, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return Input{}, inputErr("not a JSON object (%s)", describe(err))
	}
	if dec.More() {
		return Input{}, inputErr("more than one JSON value on the line")
	}
	var verbs []string
	for k := range obj {
		if _, ok := inputKeys[k]; ok {
			verbs = append(verbs, k)
		}
	}
	slices.Sort(verbs)
	if len(verbs) != 1 {
		return Input{}, inputErr("want exactly one of message, interject, queue, cancel, approve, deny; got %s", listOrNone(verbs))
	}
	in := Input{Kind: verbs[0]}
	for k := range obj {
		if k != in.Kind && !slices.Contains(inputKeys[in.Kind], k) {
			return Input{}, inputErr("%s does not take %q (it takes %s)", in.Kind, k, listOrNone(inputKeys[in.Kind]))
		}
	}
	return in, in.fill(obj)
}

// IsDecision says line is shaped as an approve or deny line: one JSON
// object with exactly one of those two verbs and no key that neither
// takes (inputKeys) — not whether ParseInput can act on it (a missing
// digest, a "for" on a denial). A host whose stdin holds text messages
// (chat --json with text input: docs/protocol.md, "Input") takes such a
// line as a decision, refused with ParseInput's reason when malformed,
// so that a decision is never sent to the model as a message; every
// other line stays a message.
func IsDecision(line []byte) bool {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	if dec.Decode(&obj) != nil || obj == nil || dec.More() {
		return false
	}
	verbs := 0
	for k := range obj {
		switch {
		case k == InputApprove || k == InputDeny:
			verbs++
		case !slices.Contains(inputKeys[InputApprove], k) && !slices.Contains(inputKeys[InputDeny], k):
			return false
		}
	}
	return verbs == 1
}

// fill reads the verb's value and its other keys.
func (in *Input) fill(obj map[string]json.RawMessage) error {
	verb := obj[in.Kind]
	switch in.Kind {
	case InputCancel:
		if string(verb) == "true" {
			break
		}
		if err := str(verb, InputCancel, &in.Agent, "true or an agent's path"); err != nil {
			return err
		}
	case InputApprove, InputDeny:
		if err := str(verb, in.Kind, &in.CallID, "a call id"); err != nil {
			return err
		}
	default:
		if err := str(verb, in.Kind, &in.Text, "the text"); err != nil {
			return err
		}
	}
	for _, k := range []struct {
		name string
		dst  *string
	}{{"agent", &in.Agent}, {"digest", &in.Digest}, {"for", &in.For}, {"note", &in.Note}} {
		if raw, ok := obj[k.name]; ok {
			if err := str(raw, k.name, k.dst, "a string"); err != nil && !(k.name == "note" && string(raw) == `""`) {
				return err
			}
		}
	}
	return in.check()
}

// check refuses values that cannot be acted on.
func (in *Input) check() error {
	switch {
	case in.Kind == InputApprove && in.Digest == "":
		return inputErr("approve needs the digest of the call's arguments (the approval_requested event's digest)")
	case in.For != "" && in.For != "args" && in.For != "tool":
		return inputErr(`"for" is "args" or "tool", not %q`, in.For)
	}
	return nil
}

// verdicts are the kernel's verdict of each decision line: its verb and
// what an approval grants besides.
var verdicts = map[[2]string]kernel.Verdict{
	{InputApprove, ""}: kernel.VerdictApprove, {InputApprove, "args"}: kernel.VerdictApproveArgs,
	{InputApprove, "tool"}: kernel.VerdictApproveTool, {InputDeny, ""}: kernel.VerdictDeny,
}

// Decision is the kernel's decision (kernel.EvDecision, its time left for
// the driver to stamp) that an approve or deny line asks for, addressed to
// the agent whose call it decides (docs/protocol.md, "Input"): the agent
// the line names, else the one agent whose call of that id waits, else
// the root — the kernel then says whether that call's wait has ended
// (stale) or it never asked. Call ids are unique per agent only: a bare
// id that calls of two agents wait under is refused. k is read, never
// stepped (call it on the kernel's goroutine: the driver's Inspect).
func (in Input) Decision(k *kernel.Kernel) (kernel.Event, error) {
	v, ok := verdicts[[2]string{in.Kind, in.For}]
	if !ok {
		return kernel.Event{}, inputErr("%s is no decision", in.Kind)
	}
	agent, err := in.decided(k)
	if err != nil {
		return kernel.Event{}, err
	}
	return kernel.Decide(0, agent, in.CallID, in.Digest, v, in.Note), nil
}

// decided is the agent whose call a decision names.
func (in Input) decided(k *kernel.Kernel) (kernel.AgentID, error) {
	if in.Agent != "" {
		id, ok := k.Find(in.Agent)
		if !ok {
			return kernel.NoAgent, inputErr("no agent %q is running (a call of an agent that has finished waits no more)", in.Agent)
		}
		return id, nil
	}
	var waits []string
	agent := kernel.Root
	for _, w := range k.Approvals(nil) {
		if w.CallID == in.CallID {
			agent = w.Agent
			waits = append(waits, k.AgentPath(w.Agent))
		}
	}
	if len(waits) > 1 {
		return kernel.NoAgent, inputErr("calls of %s wait under the call id %q: name the agent (\"agent\": \"…\")", strings.Join(waits, " and "), in.CallID)
	}
	return agent, nil
}

// str reads raw into dst: a string that is not blank.
func str(raw json.RawMessage, key string, dst *string, want string) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return inputErr("%q must be %s, not %s", key, want, clipRaw(raw))
	}
	if strings.TrimSpace(*dst) == "" {
		return inputErr("%q is empty", key)
	}
	return nil
}

func inputErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInput, fmt.Sprintf(format, args...))
}

func describe(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}

func listOrNone(keys []string) string {
	if len(keys) == 0 {
		return "none"
	}
	return strings.Join(keys, ", ")
}

func clipRaw(raw json.RawMessage) string { return textcut.Clip(string(raw), 40) }
