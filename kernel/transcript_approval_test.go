package kernel

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The commands of a person deciding on a call that waits for approval
// (docs/semantics.md, "Approvals").

// approvalKey names a call of an agent: call ids are unique per agent.
type approvalKey struct {
	agent AgentID
	call  string
}

// approve: approve AGENT CALL_ID [digest=HEX] [for=args|tool].
func (d *transcriptDriver) approve(dir directive) ([]string, error) {
	if err := dir.want(2, 2, "digest", "for"); err != nil {
		return nil, err
	}
	v := VerdictApprove
	switch dir.kv["for"] {
	case "":
	case "args":
		v = VerdictApproveArgs
	case "tool":
		v = VerdictApproveTool
	default:
		return nil, fmt.Errorf("for=%s: want args or tool", dir.kv["for"])
	}
	return d.decide(dir, v, "")
}

// deny: deny AGENT CALL_ID ["note"] [digest=HEX].
func (d *transcriptDriver) deny(dir directive) ([]string, error) {
	if err := dir.want(2, 3, "digest"); err != nil {
		return nil, err
	}
	return d.decide(dir, VerdictDeny, dir.arg(2))
}

// decide feeds the decision. An approval names the digest its request
// showed unless digest= gives another; a denial names one only when given.
func (d *transcriptDriver) decide(dir directive, v Verdict, note string) ([]string, error) {
	id, err := d.agent(dir.arg(0))
	if err != nil {
		return nil, err
	}
	digest, given := dir.kv["digest"]
	if !given && v != VerdictDeny {
		digest = d.digests[approvalKey{id, dir.arg(1)}]
	}
	return d.step(Decide(0, id, dir.arg(1), digest, v, note), "")
}

// approvalPromises checks what every run keeps of docs/semantics.md,
// "Approvals": a call of a tool that asks starts only after an approval of
// it, or under a grant that covers it; a wait ends at most once, and a
// call whose wait ended otherwise never starts; a call is asked about
// once, and again only after a recovery.
func approvalPromises(r *transcriptRun) []error {
	var errs []error
	asked := map[approvalKey]bool{}
	ended := map[approvalKey]ApprovalEnd{}
	grantTool := map[string]bool{}
	grantArgs := map[[2]string]bool{}
	asks := func(name string) bool {
		return name != DefaultDelegateTool && (slices.Contains(r.ask, "*") || slices.Contains(r.ask, name))
	}
	for i, s := range r.steps {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("step %d (%s): %s", i+1, s.ev.Describe(), fmt.Sprintf(format, args...)))
		}
		for _, e := range s.effs {
			if e.Kind == EffStartTool && asks(e.Call.Name) {
				key := approvalKey{e.Agent, e.Call.ID}
				covered := grantTool[e.Call.Name] || grantArgs[[2]string{e.Call.Name, e.Call.Arguments}]
				if end, ok := ended[key]; (ok && end != ApprovalApproved) || (!ok && !covered) {
					fail("call %s of agent %d started without an approval (its wait: %s)", e.Call.ID, e.Agent, end)
				}
			}
			l, ok := lifeOf(e)
			if !ok {
				continue
			}
			key := approvalKey{l.Agent, l.CallID}
			switch l.Kind {
			case LifeApprovalRequested:
				if asked[key] && s.ev.Kind != EvRecover {
					fail("call %s of agent %d asked twice", l.CallID, l.Agent)
				}
				if _, done := ended[key]; done {
					fail("call %s of agent %d asked after its wait ended", l.CallID, l.Agent)
				}
				asked[key] = true
			case LifeApprovalResolved:
				if end, done := ended[key]; done {
					fail("call %s of agent %d resolved %s after it was %s", l.CallID, l.Agent, l.Approval, end)
				}
				if !asked[key] {
					fail("call %s of agent %d resolved without a request", l.CallID, l.Agent)
				}
				ended[key] = l.Approval
			case LifeApprovalGranted:
				if l.Digest != "" {
					grantArgs[[2]string{l.Name, l.Text}] = true
				} else {
					grantTool[l.Name] = true
				}
			}
		}
	}
	return errs
}

// TestApprovalPromisesCatchBreaks proves approvalPromises can fail: a call
// that starts unapproved, one that starts after its denial, a wait
// resolved twice and a call asked twice are each reported.
func TestApprovalPromisesCatchBreaks(t *testing.T) {
	life := func(l Lifecycle) Effect { return Effect{Kind: EffEmit, Agent: l.Agent, Life: l} }
	start := func(id string) Effect {
		return Effect{Kind: EffStartTool, Agent: Root, Op: 4, Call: ToolCall{ID: id, Name: "shell", Arguments: "{}"}}
	}
	r := &transcriptRun{ask: []string{"shell"}, steps: []transcriptStep{
		{ev: LLMEnd(0, 2), effs: []Effect{
			start("c0"),
			life(Lifecycle{Kind: LifeApprovalRequested, CallID: "c1"}),
			life(Lifecycle{Kind: LifeApprovalRequested, CallID: "c2"}),
			life(Lifecycle{Kind: LifeApprovalRequested, CallID: "c2"}),
		}},
		{ev: Deny(0, Root, "c1", ""), effs: []Effect{
			life(Lifecycle{Kind: LifeApprovalResolved, CallID: "c1", Approval: ApprovalDenied}),
			start("c1"),
		}},
		{ev: Approve(0, Root, "c2", "d"), effs: []Effect{
			life(Lifecycle{Kind: LifeApprovalResolved, CallID: "c2", Approval: ApprovalApproved}),
			life(Lifecycle{Kind: LifeApprovalResolved, CallID: "c2", Approval: ApprovalApproved}),
			start("c2"),
		}},
	}}
	errs := approvalPromises(r)
	for _, want := range []string{"c0 of agent 0 started without an approval", "c1 of agent 0 started without an approval (its wait: denied)", "c2 of agent 0 asked twice", "c2 of agent 0 resolved approved after it was approved"} {
		if !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), want) }) {
			t.Errorf("approvalPromises missed %q: %v", want, errs)
		}
	}
	if len(errs) != 4 {
		t.Errorf("%d errors, want 4: %v", len(errs), errs)
	}
}
