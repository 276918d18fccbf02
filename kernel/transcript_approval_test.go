package kernel

import "fmt"

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
