package sim

import (
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/sim/scenario"
)

// The scripted world's side of tokens and compaction (docs/semantics.md,
// "Usage" and "Compaction"; the format in sim/scenario/compaction.go): a
// compaction's summarising request takes its agent's next summary, never
// its next scripted reply; every request reports the usage its scenario
// derives; a context_length fault is the server's refusal.

// replyFor is the reply request e takes and its index (in its agent's
// script, or in its summaries for a compaction): the next one, or the one
// the lost request was getting when e restarts it after a crash.
func (w *world) replyFor(c Core, e *kernel.Effect, lost *worldOp) (int, scenario.Reply) {
	v := c.View(e.Agent)
	if e.Compact {
		n := w.summaries[e.Agent]
		if lost != nil {
			n = lost.reply
		} else {
			w.summaries[e.Agent] = n + 1
		}
		return n, w.s.SummaryReply(v.Script, n, e.Messages)
	}
	n := w.cursor[e.Agent]
	if lost != nil {
		n = lost.reply
	} else {
		w.cursor[e.Agent] = n + 1
	}
	if script := w.s.Agents[v.Script]; n < len(script) {
		return n, script[n]
	}
	return n, scenario.Reply{FirstToken: scenario.DefaultFirstToken, Rate: scenario.DefaultRate}
}

// usageOf is the usage request e's end reports: derived from what it sent
// and what op answers, nil for an agent the scenario lists unreported.
func (w *world) usageOf(c Core, e *kernel.Effect, op *worldOp) *kernel.Usage {
	u := &w.s.Usage
	if len(u.Unreported) > 0 {
		v := c.View(e.Agent)
		for _, name := range u.Unreported {
			if v.Matches(name) {
				return nil
			}
		}
	}
	calls := 0
	for i := range op.frags {
		f := &op.frags[i]
		calls += len(f.ID) + len(f.Name) + len(f.Args)
	}
	return u.RequestUsage(e.Messages, op.text, calls)
}

// failure is the error event that ends op's stream (errKind's).
func (op *worldOp) failure() kernel.Event {
	if op.errKind == kernel.FailureContextLength {
		return kernel.LLMError(0, op.id, op.errKind, scenario.ContextLengthMessage)
	}
	return kernel.LLMError(0, op.id, op.errKind, "simulated "+op.errKind.String())
}
