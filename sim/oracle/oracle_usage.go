package oracle

import "github.com/escapement/escapement/kernel"

// The model's account of usage (docs/semantics.md, "Usage"): every
// request an agent starts in a turn — a compaction's included — counts in
// the turn's requests; what a request's end reported counts in its turn's
// sums when it ends before the turn does; a child's turn total counts in
// its parent's running turn when the child's turn ends. I20 holds a turn's
// end to that total (contentChecker.usage).

// requestStarted counts a request of a's running turn.
func (m *model) requestStarted(a *agentObs, op *opObs) {
	if op != nil {
		op.turn = a.t.turn
	}
	a.t.usage.Requests++
}

// requestEnded adds what request op of a reported at its end (u, from its
// op_ended record; nil: nothing) to its turn, when that turn still runs.
func (m *model) requestEnded(a *agentObs, op *opObs, u *kernel.Usage) {
	if op.tool || u == nil || op.turn != a.t.turn || a.endedTurn >= op.turn {
		return
	}
	addTokens(&a.t.usage, u)
	a.t.reported++
}

// childTotal adds a child's turn total to its parent's running turn.
func (m *model) childTotal(child *agentObs, u *kernel.Usage) {
	p := m.agent(child.parent)
	if p == nil || u == nil || child.id == kernel.Root {
		return
	}
	addTokens(&p.t.usage, u)
	p.t.usage.Requests += u.Requests
	p.t.reported += u.Requests - u.Unreported
}

func addTokens(t *kernel.Usage, u *kernel.Usage) {
	t.PromptTokens += u.PromptTokens
	t.CompletionTokens += u.CompletionTokens
	t.CachedTokens += u.CachedTokens
	t.ReasoningTokens += u.ReasoningTokens
}

// total is the usage a turn with facts f must end with: nil when it made
// no request.
func (f *turnFacts) total() *kernel.Usage {
	if f.usage.Requests == 0 {
		return nil
	}
	u := f.usage
	u.Unreported = u.Requests - f.reported
	return &u
}
