package scenario

import (
	"fmt"
	"strings"

	"github.com/escapement/escapement/internal/keys"
	"github.com/escapement/escapement/kernel"
)

// What a scenario says of tokens and compaction (docs/semantics.md,
// "Usage" and "Compaction"; docs/scenarios.md, "Scenario format"):
//
//   - limits.context_window and limits.compact_percent are the kernel's
//     limits, measured with the kernel's own measure (kernel.EstimateTokens),
//     so a scenario's window is exact, not an approximation of a tokenizer;
//   - summaries: the replies an agent's compaction requests take, one per
//     compaction, in order, beside (never from) its script: a compaction
//     does not take the agent's next reply. Past the list a compaction gets
//     DerivedSummary. A summary reply is a Reply: its text is the summary
//     (an empty one fails the compaction), its calls are dropped by the
//     kernel, its latency and rate are a stream's;
//   - usage: every scripted request reports usage derived from what it
//     sent and what it answered (RequestUsage), but for the agents listed
//     unreported, whose server reports none;
//   - a fault with compaction: true hits only compaction requests, and one
//     without hits only ordinary ones; fault context_length is the server
//     refusing a request as longer than its window (kernel's
//     FailureContextLength), before its first token.

// FaultContextLength: the server refuses the request as longer than the
// model's context window (OpenAI's context_length_exceeded), before its
// first token.
const FaultContextLength FaultKind = "context_length"

// ContextLengthMessage is the refusal's text, as OpenAI words it.
const ContextLengthMessage = "400 context_length_exceeded: This model's maximum context length was exceeded (simulated)"

// UsageSpec is what the scripted servers report of a request's tokens.
type UsageSpec struct {
	// PromptExtra is added to every request's measured prompt: what a real
	// server counts that the kernel's measure does not (tool schemas,
	// templates). 0: the server's count is the kernel's measure.
	PromptExtra int `scenario:"prompt_extra,omitempty,check=nonnegative"`
	// Unreported names agents (script, instance or path) whose requests
	// report no usage (absent: unknown).
	Unreported []string `scenario:"unreported,omitempty"`
}

// RequestUsage is the usage a scripted server reports for a request that
// sent msgs and answered text and calls whose arguments measure callBytes:
// the prompt is the kernel's measure of what was sent plus PromptExtra,
// the completion a quarter of the answer's bytes, rounded up. Derived, not
// drawn: the same request reports the same usage in every run.
func (u UsageSpec) RequestUsage(msgs []kernel.Message, text string, callBytes int) *kernel.Usage {
	return &kernel.Usage{
		PromptTokens:     kernel.EstimateTokens(msgs) + u.PromptExtra,
		CompletionTokens: (len(text) + callBytes + 3) / 4,
	}
}

// SummaryReply is the reply compaction n (from 0) of an agent running
// script takes: its summaries' n-th, else DerivedSummary.
func (s *Scenario) SummaryReply(script string, n int, sent []kernel.Message) Reply {
	if list := s.Summaries[script]; n < len(list) {
		return list[n]
	}
	return Reply{Text: DerivedSummary(sent), FirstToken: DefaultFirstToken, Rate: DefaultRate}
}

// DerivedSummary is the summary a compaction gets when its script lists
// none: a short text that names what it summarised (the bytes of the
// request's last message, which holds the rendered history), so two
// compactions of different histories give different summaries.
func DerivedSummary(sent []kernel.Message) string {
	n := 0
	if len(sent) > 0 {
		n = len(sent[len(sent)-1].Content)
	}
	return fmt.Sprintf("Summary: the conversation so far (%d bytes) is summarised here.", n)
}

// cloneScripts copies a map of scripts reply by reply.
func cloneScripts(m map[string]Script) map[string]Script {
	if m == nil {
		return nil
	}
	c := make(map[string]Script, len(m))
	for name, script := range m { // determinism: a copy, entry by entry
		cp := make(Script, len(script))
		for i, r := range script {
			r.Calls = append([]Call(nil), r.Calls...)
			cp[i] = r
		}
		c[name] = cp
	}
	return c
}

// checkCompaction: summaries belong to scripts the scenario defines (their
// calls checked as a script's), unreported names agents that exist, and
// a compaction fault is a request's fault.
func (s *Scenario) checkCompaction() *LoadError {
	for _, name := range keys.Sorted(s.Summaries) {
		if _, ok := s.Agents[name]; !ok {
			return fieldErr(keyPath("summaries").name(name), "summaries for unknown script %q (scripts: %s)", name, strings.Join(keys.Sorted(s.Agents), ", "))
		}
		for i, r := range s.Summaries[name] {
			for j, c := range r.Calls {
				if err := s.checkCall(c, keyPath("summaries", name).index(i).key("calls").index(j)); err != nil {
					return err
				}
			}
		}
	}
	for i, name := range s.Usage.Unreported {
		if err := s.checkAgentRef(name); err != nil {
			return fieldErr(keyPath("usage", "unreported").index(i), "%v", err)
		}
	}
	for i, f := range s.Faults {
		if f.Compaction && (f.Tool != "" || f.Fault == FaultToolPanic) {
			return fieldErr(keyPath("faults").index(i).key("compaction"), "a compaction fault hits a compaction's request, not a tool")
		}
	}
	return nil
}
