package live

import (
	"context"
	"fmt"

	"github.com/escapement/escapement/kernel"
)

// Approvals (docs/semantics.md, "Approvals"): a call of a tool
// kernel.Config.Ask names waits for a decision. A person's decision comes
// in through Decide, an input like Cancel; a host's own — Config.Policy,
// asked for every request, re-asks after a recovery included — is queued
// and stepped as the driver's next input. Either way the decision is a
// kernel event, in the write-ahead log before anything it causes happens,
// so a replay decides exactly as the run did; nothing bypasses the kernel.

// ApprovalRequest is a call waiting for a decision, as Config.Policy sees
// it: the kernel's view of the wait (kernel.Approval: its agent, call id,
// tool, arguments, digest, when it ends by itself) and its agent's path.
type ApprovalRequest struct {
	kernel.Approval
	Path string
}

// Decision is what a policy decides on a waiting call: a verdict
// (kernel.VerdictApprove, VerdictApproveArgs, VerdictApproveTool or
// VerdictDeny) and, for a denial, a note the model reads in the call's
// result.
type Decision struct {
	Verdict kernel.Verdict
	Note    string
}

// Policy decides a waiting call on the host's behalf — by its tool, its
// arguments, its agent's path, anything the host knows — or leaves it to a
// person (decided false: the call waits for Decide). It is called on the
// kernel's goroutine in the step the call asked (and again for each wait a
// recovery asks again), so it must not block: a decision that needs a
// person is Decide's, from another goroutine.
type Policy func(ApprovalRequest) (d Decision, decided bool)

// askPolicy hands every request of a step's effects to the policy and
// queues what it decides, for the loop to step before its next input.
func (d *Driver) askPolicy(effects []kernel.Effect) {
	if d.cfg.Policy == nil {
		return
	}
	var waits []kernel.Approval
	for i := range effects {
		e := &effects[i]
		if e.Kind != kernel.EffEmit || e.Life.Kind != kernel.LifeApprovalRequested {
			continue
		}
		if waits == nil {
			waits = d.k.Approvals(nil)
		}
		for _, w := range waits {
			if w.Agent != e.Life.Agent || w.CallID != e.Life.CallID {
				continue
			}
			if dec, ok := d.cfg.Policy(ApprovalRequest{Approval: w, Path: d.path(w.Agent)}); ok {
				d.decided = append(d.decided, kernel.Decide(0, w.Agent, w.CallID, w.Digest, dec.Verdict, dec.Note))
			}
		}
	}
}

// stepDecided steps the decisions the policy made, in the order it made
// them, at the time they are stepped.
func (d *Driver) stepDecided() {
	for len(d.decided) > 0 && d.failed == nil {
		ev := d.decided[0]
		d.decided = d.decided[1:]
		ev.At = d.clock()
		d.step(ev)
	}
	d.decided = nil
}

// Decide takes a decision on call callID of agent: verdict v
// (kernel.VerdictApprove; VerdictApproveArgs or VerdictApproveTool to also
// grant the tool for the session, with these arguments or any;
// VerdictDeny), for the arguments whose digest is digest (the
// approval_requested record's; a denial may leave it empty), with note for
// the model (a denial's). It is an input like Cancel: it returns once the
// kernel has stepped it. A refusal wraps ErrRejected and the kernel's
// error — kernel.ErrDigestMismatch (other arguments), kernel.ErrNotWaiting
// (a call that never asked), kernel.ErrUnknownAgent; a decision that came
// after the wait ended (expired, withdrawn, decided already) changed
// nothing and returns kernel.ErrDecisionStale. It is protocol.Decider's
// Decide, so adapters/protocol's approve and deny lines reach it.
func (d *Driver) Decide(ctx context.Context, agent kernel.AgentID, callID, digest string, v kernel.Verdict, note string) error {
	return d.do(ctx, input{kind: inDecide, agent: agent, text: note, callID: callID, digest: digest, verdict: v})
}

// Approvals lists the calls waiting for a decision (kernel.Approvals,
// read on the kernel's goroutine), each with its agent's path.
func (d *Driver) Approvals(ctx context.Context) ([]ApprovalRequest, error) {
	var out []ApprovalRequest
	err := d.Inspect(ctx, func(k *kernel.Kernel) {
		for _, w := range k.Approvals(nil) {
			out = append(out, ApprovalRequest{Approval: w, Path: k.AgentPath(w.Agent)})
		}
	})
	return out, err
}

// staleDecision reports whether a decision's step only recorded it stale.
func staleDecision(ev kernel.Event, effects []kernel.Effect) error {
	if ev.Kind != kernel.EvDecision || len(effects) != 1 {
		return nil
	}
	if l := effects[0].Life; effects[0].Kind == kernel.EffEmit && l.Kind == kernel.LifeStale && l.CallID == ev.CallID {
		return fmt.Errorf("decision for call %s: %w (%s)", ev.CallID, kernel.ErrDecisionStale, l.Text)
	}
	return nil
}
