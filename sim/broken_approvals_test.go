package sim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/oracle"
)

// The broken loops of the approval invariants, I27–I31 (docs/semantics.md,
// "Approvals"): each is the kernel with one thing about a person's
// decision done the way a real loop gets it wrong.
func approvalLoops() []BrokenLoop {
	return []BrokenLoop{
		{"approval-approve", "I27: approvals ignored: the loop approves every request itself the moment it makes it, and tells no one", oracle.ApprovedBeforeStart, broken(approvingAtOnce)},
		{"approval-expired", "I28: the expiry timer is set a second past approval_timeout", oracle.ApprovalEndsOnce,
			retiming(kernel.TimerApproval, func(kernel.Config) time.Duration { return time.Second })},
		{"approval-wrong-digest", "I28: a duplicate decision ends the wait again", oracle.ApprovalEndsOnce, broken(reapplyingStale)},
		{"approval-expired", "I29: an expiry approves the call instead of ending its wait", oracle.EndsNeverAuthorize, broken(expiryApproves)},
		{"approval-wrong-digest", "I30: the digest is not checked: a decision for other arguments is applied", oracle.DecisionsBind, broken(digestUnchecked)},
		{"approval-withdrawn-cancel", "I31: a withdrawn call's result is written as a denial", oracle.WithdrawalNotDenial, broken(withdrawalAsDenial)},
	}
}

// TestOracleCatchesApprovalLoops: each scenario passes with the kernel and
// fails — the right invariant named first — with its broken loop.
func TestOracleCatchesApprovalLoops(t *testing.T) {
	for _, bl := range approvalLoops() {
		t.Run(string(bl.Invariant)+"/"+bl.Scenario, func(t *testing.T) {
			assertCaught(t, bl.Scenario, bl.Core, bl.Invariant, bl.Failure)
		})
	}
}

// asked is what a broken loop remembers of a request.
type asked struct {
	agent        kernel.AgentID
	call, digest string
}

// requests are the approval requests among effs.
func requests(effs []kernel.Effect) []asked {
	var out []asked
	for _, e := range effs {
		if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeApprovalRequested {
			out = append(out, asked{e.Life.Agent, e.Life.CallID, e.Life.Digest})
		}
	}
	return out
}

// approvingAtOnce: every request is approved by the loop in its own step,
// and the approval's record is hidden.
func approvingAtOnce(b *brokenCore) {
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		out := b.inner(ev)
		for _, r := range requests(out) {
			more := b.inner(kernel.Approve(ev.At, r.agent, r.call, r.digest))
			out = append(out, slices.DeleteFunc(more, func(e kernel.Effect) bool {
				return e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeApprovalResolved
			})...)
		}
		return out
	}
}

// expiryApproves: when a wait's expiry timer fires, the loop approves the
// call (and stops no timer: the one that fired was its own).
func expiryApproves(b *brokenCore) {
	timers := map[kernel.OpID]asked{}
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		if r, ok := timers[ev.Op]; ok && ev.Kind == kernel.EvTimer {
			delete(timers, ev.Op)
			out := b.inner(kernel.Approve(ev.At, r.agent, r.call, r.digest))
			return slices.DeleteFunc(out, func(e kernel.Effect) bool { return e.Kind == kernel.EffStopTimer && e.Op == ev.Op })
		}
		out := b.inner(ev)
		var set []kernel.OpID // an expiry timer is set right before its request
		for _, e := range out {
			if e.Kind == kernel.EffSetTimer && e.Timer == kernel.TimerApproval {
				set = append(set, e.Op)
			}
		}
		for i, r := range requests(out) {
			if i < len(set) {
				timers[set[i]] = r
			}
		}
		return out
	}
}

// digestUnchecked: a decision for a call that asked is taken with the
// call's own digest, whatever digest it named.
func digestUnchecked(b *brokenCore) {
	digests := map[askKey]string{}
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		if d, ok := digests[askKey{ev.Agent, ev.CallID}]; ok && ev.Kind == kernel.EvDecision && ev.Digest != "" {
			ev.Digest = d
		}
		out := b.inner(ev)
		for _, r := range requests(out) {
			digests[askKey{r.agent, r.call}] = r.digest
		}
		return out
	}
}

// reapplyingStale: a decision for a wait that ended ends it again (the
// loop keeps no record of what it decided).
func reapplyingStale(b *brokenCore) {
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		out := b.inner(ev)
		if ev.Kind != kernel.EvDecision {
			return out
		}
		for i, e := range out {
			if e.Kind == kernel.EffEmit && e.Life.Kind == kernel.LifeStale && e.Life.CallID == ev.CallID {
				out[i].Life = kernel.Lifecycle{Kind: kernel.LifeApprovalResolved, At: ev.At, Agent: ev.Agent, CallID: ev.CallID, Approval: kernel.ApprovalApproved}
			}
		}
		return out
	}
}

// withdrawalAsDenial: a withdrawn call's result reads as a denial's, in
// its call_finished and in the tool message the model reads.
func withdrawalAsDenial(b *brokenCore) {
	withdrawn := map[askKey]bool{}
	b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
		out := b.inner(ev)
		for i, e := range out {
			l := &out[i].Life
			switch {
			case e.Kind != kernel.EffEmit:
			case l.Kind == kernel.LifeApprovalResolved && l.Approval == kernel.ApprovalWithdrawn:
				withdrawn[askKey{l.Agent, l.CallID}] = true
			case l.Kind == kernel.LifeCallFinished && withdrawn[askKey{l.Agent, l.CallID}]:
				l.Status, l.Reason = kernel.CallDenied, kernel.ReasonApprovalDenied
			}
		}
		return out
	}
	b.view = rewriting(func(m *kernel.Message) {
		if m.Role == kernel.RoleTool && strings.Contains(m.Content, `"approval":"withdrawn"`) {
			m.Content = `{"type":"tool_not_approved","status":"denied","reason":"approval_denied"}`
		}
	})
}

// ApprovalLoops returns the broken loops of I27–I31 (for the teeth test
// in random worlds, TestApprovalTeethRapid).
func ApprovalLoops() []BrokenLoop { return approvalLoops() }

// ExpiryRaceLoop is a loop that judges a decision stale by the clock, not
// by whether its wait ended: a decision that comes at the very instant its
// wait expired — delivered after the expiry — ends the wait again. Only an
// order of that one instant shows it (TestExploreFindsApprovalRace).
func ExpiryRaceLoop() BrokenLoop {
	return BrokenLoop{"", "I28: a decision at the instant its wait expired, delivered after the expiry, ends the wait again", oracle.ApprovalEndsOnce,
		broken(func(b *brokenCore) {
			expired := map[askKey]time.Duration{}
			b.step = func(b *brokenCore, ev kernel.Event) []kernel.Effect {
				out := b.inner(ev)
				for i, e := range out {
					l := &out[i].Life
					switch {
					case e.Kind != kernel.EffEmit:
					case l.Kind == kernel.LifeApprovalResolved && l.Approval == kernel.ApprovalExpired:
						expired[askKey{l.Agent, l.CallID}] = ev.At
					case l.Kind == kernel.LifeStale && ev.Kind == kernel.EvDecision:
						if at, ok := expired[askKey{ev.Agent, ev.CallID}]; ok && at == ev.At {
							*l = kernel.Lifecycle{Kind: kernel.LifeApprovalResolved, At: ev.At, Agent: ev.Agent, CallID: ev.CallID, Approval: kernel.ApprovalApproved}
						}
					}
				}
				return out
			}
		})}
}
