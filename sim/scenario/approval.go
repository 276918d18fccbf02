package scenario

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
)

// Approvals in a scenario (docs/semantics.md, "Approvals"; docs/scenarios.md):
// a tool declares `approval: required`, so its calls wait for a person's
// decision (kernel.Config.Ask), and the inputs `approve` and `deny` are
// that person, at virtual times, naming the waiting call by its agent and
// call id.

// ApprovalRequired is the one value of a tool's `approval`.
const ApprovalRequired = "required"

// WrongDigest, as a decision's digest, names a digest that is not the
// call's arguments' (a decision meant for other arguments: refused).
const WrongDigest = "wrong"

// Grants an approval's `for` may name: the session grant it makes.
const (
	GrantArgs = "args"
	GrantTool = "tool"
)

func checkApprovalMode(v reflect.Value) error {
	if s := v.String(); s != "" && s != ApprovalRequired {
		return fmt.Errorf("%q: the one value is %q (leave it out when calls need no approval)", s, ApprovalRequired)
	}
	return nil
}

func checkGrant(v reflect.Value) error {
	if s := v.String(); s != "" && s != GrantArgs && s != GrantTool {
		return fmt.Errorf("%q: want %s (these arguments) or %s (any arguments)", s, GrantArgs, GrantTool)
	}
	return nil
}

// AskAll, in a scenario's ask list, names every tool (kernel.Config.Ask's
// "*": the delegate tool never asks).
const AskAll = "all"

// KernelAsk is the kernel's Ask for s: "*" when the ask list says all,
// else the tools the list names and those that declare approval: required,
// in name order (map order must not reach the kernel: I6); nil when no
// call asks.
func (s *Scenario) KernelAsk() []string {
	if slices.Contains(s.Ask, AskAll) {
		return []string{"*"}
	}
	asks := len(s.Ask) > 0
	for _, t := range s.Tools { // determinism: only whether any asks
		asks = asks || t.Approval == ApprovalRequired
	}
	if !asks {
		return nil // most scenarios: no sorted copy of the names
	}
	out := slices.Clone(s.Ask)
	for _, name := range keys.Sorted(s.Tools) {
		if s.Tools[name].Approval == ApprovalRequired {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkAsk: the ask list names tools of the scenario, or all.
func (s *Scenario) checkAsk() *LoadError {
	for i, name := range s.Ask {
		if _, ok := s.Tools[name]; !ok && name != AskAll {
			return fieldErr(keyPath("ask").index(i), "unknown tool %q (tools: %s; or %s for every tool)", name, strings.Join(keys.Sorted(s.Tools), ", "), AskAll)
		}
	}
	return nil
}

// IsDecision reports whether the input is a person's decision (approve or
// deny).
func (in Input) IsDecision() bool { return in.Approve != "" || in.Deny != "" }

// DecisionAgent is the agent reference whose call a decision names.
func (in Input) DecisionAgent() string {
	if in.Agent == "" {
		return RootScript
	}
	return in.Agent
}

// Decision is the call id a decision names and its verdict.
func (in Input) Decision() (string, kernel.Verdict) {
	switch {
	case in.Deny != "":
		return in.Deny, kernel.VerdictDeny
	case in.For == GrantArgs:
		return in.Approve, kernel.VerdictApproveArgs
	case in.For == GrantTool:
		return in.Approve, kernel.VerdictApproveTool
	}
	return in.Approve, kernel.VerdictApprove
}

// DecisionDigest is the digest a decision names, given the arguments of
// the call it names (as the model streamed them): their digest when the
// input gives none, a digest of other arguments for WrongDigest, else the
// input's own. A denial without a digest names none (it denies whatever
// the call asks).
func (in Input) DecisionDigest(args string) string {
	switch {
	case in.Digest == WrongDigest:
		return kernel.Digest(args + " ")
	case in.Digest != "":
		return in.Digest
	case in.Deny != "":
		return ""
	}
	return kernel.Digest(args)
}

// checkDecision: a decision names an agent that exists; agent, digest,
// note and for belong to decisions only, a note to a denial, a grant to
// an approval.
func (s *Scenario) checkDecision(in Input, at fieldPath) *LoadError {
	if !in.IsDecision() {
		for _, f := range []struct {
			name string
			set  bool
		}{{"agent", in.Agent != ""}, {"digest", in.Digest != ""}, {"note", in.Note != ""}, {"for", in.For != ""}} {
			if f.set {
				return fieldErr(at.key(f.name), "only a decision (approve or deny) has %s", f.name)
			}
		}
		return nil
	}
	if err := s.checkAgentRef(in.DecisionAgent()); err != nil {
		return fieldErr(at.key("agent"), "%v", err)
	}
	switch {
	case in.Note != "" && in.Deny == "":
		return fieldErr(at.key("note"), "only a denial carries a note")
	case in.For != "" && in.Approve == "":
		return fieldErr(at.key("for"), "only an approval grants for the session")
	}
	return nil
}
