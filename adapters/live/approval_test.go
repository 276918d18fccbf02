package live

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/kernel"
)

// askingScript calls the shell tool once, then answers with what the
// tool's result said.
func askingScript() *script {
	return &script{gap: 10 * time.Millisecond, answer: func(req ports.Request) []chunk {
		if last(req).Role == kernel.RoleTool {
			return []chunk{{text: "result: " + last(req).Content}}
		}
		return []chunk{{call: &kernel.CallDelta{Index: 0, ID: "c1", Name: "shell", Args: `{"command":"rm -rf build"}`}}}
	}}
}

// countingTools counts the calls that really ran.
func countingTools(ran *atomic.Int32) ports.Tools {
	return ports.ToolsFunc(func(ctx context.Context, c ports.Call) ports.ToolResult {
		ran.Add(1)
		return ports.ToolResult{Status: kernel.ToolOK, Content: "done"}
	})
}

// waitFor returns the first waiting call once the kernel lists one.
func waitFor(t *testing.T, d *Driver) ApprovalRequest {
	t.Helper()
	for range 1000 {
		got, err := d.Approvals(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			return got[0]
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no call waits for approval")
	return ApprovalRequest{}
}

// TestDecideApproves: a call of a tool Config.Ask names waits, is listed
// with its path and digest, runs once it is approved, and a decision
// after its wait ended is reported stale (docs/semantics.md, "Approvals").
func TestDecideApproves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		rec := newRecorder()
		d := newDriver(t, askingScript(), countingTools(&ran), rec, func(c *kernel.Config) { c.Ask = []string{"shell"} })
		stop := start(t, d)
		if err := d.Submit(t.Context(), "clean"); err != nil {
			t.Fatal(err)
		}
		w := waitFor(t, d)
		if w.Path != "main" || w.CallID != "c1" || w.Tool != "shell" || w.Digest != kernel.Digest(w.Args) {
			t.Fatalf("waiting call %+v", w)
		}
		time.Sleep(time.Minute) // a person's think time: nothing runs meanwhile
		if ran.Load() != 0 {
			t.Fatal("the tool ran before a decision")
		}
		if err := d.Decide(t.Context(), w.Agent, w.CallID, w.Digest, kernel.VerdictApprove, ""); err != nil {
			t.Fatalf("Decide: %v", err)
		}
		end := <-rec.ended
		err := d.Decide(t.Context(), w.Agent, w.CallID, w.Digest, kernel.VerdictApprove, "")
		stop()
		if end.Outcome != kernel.OutcomeCompleted || ran.Load() != 1 {
			t.Fatalf("outcome %s, the tool ran %d times", end.Outcome, ran.Load())
		}
		if !errors.Is(err, kernel.ErrDecisionStale) || errors.Is(err, ErrRejected) {
			t.Errorf("a second decision: %v, want kernel.ErrDecisionStale (not a refusal)", err)
		}
		res := rec.lifes(kernel.LifeApprovalResolved)
		if len(res) != 1 || res[0].Approval != kernel.ApprovalApproved {
			t.Errorf("approval_resolved %+v", res)
		}
	})
}

// TestDecideRefuses: a decision for other arguments or a call that never
// asked is refused with the kernel's reason and changes nothing; a denial
// then ends the wait, and the model reads its note.
func TestDecideRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		rec := newRecorder()
		m := askingScript()
		d := newDriver(t, m, countingTools(&ran), rec, func(c *kernel.Config) { c.Ask = []string{"shell"} })
		stop := start(t, d)
		if err := d.Submit(t.Context(), "clean"); err != nil {
			t.Fatal(err)
		}
		w := waitFor(t, d)
		err := d.Decide(t.Context(), w.Agent, w.CallID, "0123456789abcdef", kernel.VerdictApprove, "")
		if !errors.Is(err, ErrRejected) || !errors.Is(err, kernel.ErrDigestMismatch) {
			t.Errorf("wrong digest: %v", err)
		}
		err = d.Decide(t.Context(), w.Agent, "c9", w.Digest, kernel.VerdictApprove, "")
		if !errors.Is(err, ErrRejected) || !errors.Is(err, kernel.ErrNotWaiting) {
			t.Errorf("a call that never asked: %v", err)
		}
		if err := d.Decide(t.Context(), w.Agent, w.CallID, "", kernel.VerdictDeny, "not on a Friday"); err != nil {
			t.Fatalf("deny: %v", err)
		}
		end := <-rec.ended
		stop()
		if end.Outcome != kernel.OutcomeCompleted || ran.Load() != 0 {
			t.Fatalf("outcome %s, the tool ran %d times", end.Outcome, ran.Load())
		}
		if got := last(m.requests[1]).Content; !strings.Contains(got, `"status":"denied"`) || !strings.Contains(got, "not on a Friday") {
			t.Errorf("the model read %s", got)
		}
	})
}

// TestPolicyDecides: Config.Policy sees each request with its agent's
// path and decides it at once; its decision is an input the kernel logs
// (the observer sees an EvDecision step), so a replay decides the same.
func TestPolicyDecides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		var asked []ApprovalRequest
		rec := newRecorder()
		m := askingScript()
		cfg := kernel.Config{Limits: kernel.DefaultLimits(), Ask: []string{"*"}}
		d, err := New(Config{Kernel: cfg, Model: m, Tools: countingTools(&ran), Observer: rec.observe,
			Policy: func(r ApprovalRequest) (Decision, bool) {
				asked = append(asked, r)
				return Decision{Verdict: kernel.VerdictDeny, Note: "no one can approve"}, true
			}})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		if err := d.Submit(t.Context(), "clean"); err != nil {
			t.Fatal(err)
		}
		end := <-rec.ended
		stop()
		if len(asked) != 1 || asked[0].Path != "main" || asked[0].Tool != "shell" {
			t.Fatalf("the policy was asked %+v", asked)
		}
		if end.Outcome != kernel.OutcomeCompleted || ran.Load() != 0 {
			t.Fatalf("outcome %s, ran %d", end.Outcome, ran.Load())
		}
		var decisions int
		for _, s := range rec.steps {
			if s.Event.Kind == kernel.EvDecision {
				decisions++
			}
		}
		if decisions != 1 {
			t.Errorf("%d decision steps, want 1", decisions)
		}
		if got := last(m.requests[1]).Content; !strings.Contains(got, "no one can approve") {
			t.Errorf("the model read %s", got)
		}
	})
}

// TestPolicyLeavesToPerson: a policy that does not decide leaves the call
// waiting for Decide.
func TestPolicyLeavesToPerson(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int32
		rec := newRecorder()
		cfg := kernel.Config{Limits: kernel.DefaultLimits(), Ask: []string{"shell"}}
		d, err := New(Config{Kernel: cfg, Model: askingScript(), Tools: countingTools(&ran), Observer: rec.observe,
			Policy: func(ApprovalRequest) (Decision, bool) { return Decision{}, false }})
		if err != nil {
			t.Fatal(err)
		}
		stop := start(t, d)
		if err := d.Submit(t.Context(), "clean"); err != nil {
			t.Fatal(err)
		}
		w := waitFor(t, d)
		if err := d.Decide(t.Context(), w.Agent, w.CallID, w.Digest, kernel.VerdictApproveTool, ""); err != nil {
			t.Fatal(err)
		}
		<-rec.ended
		stop()
		if ran.Load() != 1 {
			t.Fatalf("ran %d", ran.Load())
		}
		if g := d.Kernel().Grants(nil); len(g) != 1 || g[0].Tool != "shell" || g[0].Exact {
			t.Errorf("grants %+v", g)
		}
	})
}
