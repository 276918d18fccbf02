package console

import (
	"fmt"
	"strings"

	"github.com/escapement/escapement/adapters/protocol"
	"github.com/escapement/escapement/kernel"
)

// UsageText is chat's /usage: the session's token usage — what its file
// recorded before this run (prior) and this run's root turns (run), their
// sub-agents and compactions included (docs/semantics.md, "Usage"). A
// request that reported nothing is never counted as 0 tokens: the text
// says how many did not report, and that the sums are a lower bound then;
// with none reported the counts are unknown.
func UsageText(prior kernel.Usage, run protocol.Usage) string {
	total := run
	total.Add(protocol.UsageOf(&prior))
	var b strings.Builder
	fmt.Fprintf(&b, "usage of this session: %s", usageLine(total))
	if total.Requests != run.Requests {
		fmt.Fprintf(&b, "\n  of which this run: %s", usageLine(run))
	}
	return b.String()
}

// usageLine words one total.
func usageLine(u protocol.Usage) string {
	switch {
	case u.Requests == 0:
		return "no requests yet"
	case u.Unreported == u.Requests:
		return fmt.Sprintf("%s; unknown: the server reported no usage", plural(u.Requests, "request"))
	}
	s := fmt.Sprintf("%s: %d input tokens (%d cached), %d output tokens (%d reasoning)",
		plural(u.Requests, "request"), u.PromptTokens, u.CachedTokens, u.CompletionTokens, u.ReasoningTokens)
	if u.Unreported > 0 {
		s += fmt.Sprintf("; %s reported no usage, so these counts are a lower bound", plural(u.Unreported, "request"))
	}
	return s
}

// plural is n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
