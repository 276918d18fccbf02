package kernel

import (
	"strconv"
	"strings"

	"github.com/escapement/escapement/fsm"
)

// Usage is token accounting (docs/semantics.md, "Usage"). On a stream's
// end (Event.Usage) and its op_ended record it is what the server
// reported for that request: nil there means the server reported nothing
// — unknown, never zero. On a turn_ended record it is the turn's total:
// the sums of what its requests and its descendants' reported, with
// Requests and Unreported saying how many requests the total counts and
// how many of them reported nothing.
type Usage struct {
	// PromptTokens is the input, its cached part included.
	PromptTokens int `json:"prompt_tokens,omitempty"`
	// CompletionTokens is the output, its reasoning part included.
	CompletionTokens int `json:"completion_tokens,omitempty"`
	// CachedTokens is the part of the input read from the provider's
	// prompt cache, when the server breaks it down.
	CachedTokens int `json:"cached_tokens,omitempty"`
	// ReasoningTokens is the part of the output spent on hidden
	// reasoning, when the server breaks it down.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	// Requests is, in a turn's total, how many requests it counts: every
	// request (compactions included) its agent and its descendants started
	// in the turn. Zero in a request's own usage.
	Requests int `json:"requests,omitempty"`
	// Unreported is, in a turn's total, how many of those requests had
	// reported no usage when the turn ended: the sums are a lower bound
	// unless it is 0.
	Unreported int `json:"unreported,omitempty"`
}

// add adds u's token counts to t (not its request counts).
func (t *Usage) add(u Usage) {
	t.PromptTokens += u.PromptTokens
	t.CompletionTokens += u.CompletionTokens
	t.CachedTokens += u.CachedTokens
	t.ReasoningTokens += u.ReasoningTokens
}

// String prints the counts for Describe lines: "prompt=10 completion=5
// cached=2 requests=2 unreported=1" — the input and output always (a
// request's usage says them), the rest when set; a total that counts
// nothing reported prints only its request counts.
func (u Usage) String() string {
	var b strings.Builder
	nothing := u.Requests > 0 && u.Unreported == u.Requests
	for _, f := range [...]struct {
		name string
		n    int
	}{
		{"prompt", u.PromptTokens}, {"completion", u.CompletionTokens}, {"cached", u.CachedTokens},
		{"reasoning", u.ReasoningTokens}, {"requests", u.Requests}, {"unreported", u.Unreported},
	} {
		if f.n == 0 && (nothing || (f.name != "prompt" && f.name != "completion")) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(f.name)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(f.n))
	}
	return b.String()
}

// turnUsage accumulates one turn's total while the turn runs.
type turnUsage struct {
	total    Usage // token sums and Requests; Unreported is set when the turn ends
	reported int   // requests counted in total that reported usage
}

// started counts a request (or a compaction) the agent started in its turn.
func (t *turnUsage) started() { t.total.Requests++ }

// ended counts what a request of the turn reported at its end (nil: nothing).
func (t *turnUsage) ended(u *Usage) {
	if u == nil {
		return
	}
	t.total.add(*u)
	t.reported++
}

// child adds a child turn's total (its Unreported set) to t.
func (t *turnUsage) child(u *Usage) {
	if u == nil {
		return
	}
	t.total.add(*u)
	t.total.Requests += u.Requests
	t.reported += u.Requests - u.Unreported
}

// final is the turn's total for its turn_ended record; nil when the turn
// made no request.
func (t *turnUsage) final() *Usage {
	if t.total.Requests == 0 {
		return nil
	}
	u := t.total
	u.Unreported = u.Requests - t.reported
	return &u
}

// noteRequestEnd records what request o of agent a reported at its end:
// it counts towards a's turn total when it ends within the turn it was
// started in (docs/semantics.md, "Usage"), and a request's prompt size is
// remembered for the context estimate ("Compaction").
func (k *Kernel) noteRequestEnd(a *agent, o op, u *Usage) {
	if o.turn == a.turn && a.state != fsm.Idle {
		a.ctx.usage.ended(u)
	}
	if u != nil && u.PromptTokens > 0 && !o.compact && !o.cancelling {
		a.ctx.reported, a.ctx.reportedAt = u.PromptTokens, o.sent
	}
}

// usageOf is the usage an op's terminal event reported: a stream's end may
// carry it; nothing else does.
func usageOf(ev Event) *Usage {
	if ev.Kind == EvLLMEnd {
		return ev.Usage
	}
	return nil
}
