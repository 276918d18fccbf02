package kernel

import (
	"strconv"
	"strings"

	"github.com/escapement/escapement/internal/textcut"
)

// A compaction's summarising request: the instruction, the summarised
// messages rendered as text and held to the threshold, and the user
// message the summary becomes (docs/semantics.md, "Compaction", "The
// summarising request").

// compactInstruction asks the model for the summary.
const compactInstruction = "Summarise the conversation between the <conversation> tags; your summary will replace it. " +
	"Keep what is needed to go on: the user's requests and constraints, decisions, facts, files and tool results that still matter, " +
	"work in progress and what remains to do; say when a turn was cut off. Be concise. Answer with the summary only."

// summaryContent is the user message that stands for the summarised ones.
func summaryContent(summary string) string {
	return "<conversation_summary>\n" + summary + "\n</conversation_summary>"
}

// summaryRequest builds c's summarising request: the system prompt and one
// user message holding the instruction and the summarised messages, held
// to the threshold when the window is known (docs/semantics.md,
// "Compaction", "The summarising request"). ok is false when even the
// instruction does not fit.
func (k *Kernel) summaryRequest(a *agent, c *compaction) (msgs []Message, ok bool) {
	sys := a.history[:c.first]
	head := summaryHead(c)
	items := renderItems(a.history[c.first:c.cut])
	body := ""
	if k.cfg.ContextWindow <= 0 {
		body = joinItems(items, -1)
	} else {
		avail := k.summaryRoom(sys, head)
		if avail < minSummaryBody {
			return nil, false
		}
		body = fitItems(items, avail)
	}
	msgs = make([]Message, 0, len(sys)+1)
	msgs = append(msgs, sys...)
	msgs = append(msgs, Message{Role: RoleUser, Content: head + body + summaryTail})
	return msgs, true
}

// summaryFits reports whether summaryRequest would find room for the
// conversation, without rendering it.
func (k *Kernel) summaryFits(a *agent, c *compaction) bool {
	return k.cfg.ContextWindow <= 0 || k.summaryRoom(a.history[:c.first], summaryHead(c)) >= minSummaryBody
}

// summaryHead opens the summarising request's user message: the
// instruction, the focus asked for, and the conversation's opening tag.
func summaryHead(c *compaction) string {
	head := compactInstruction
	if c.focus != "" {
		head += "\n\nFocus the summary on: " + c.focus
	}
	return head + "\n\n<conversation>\n"
}

// summaryTail closes the conversation summaryHead opened.
const summaryTail = "</conversation>"

// summaryRoom is how many bytes of conversation a summarising request
// sending sys and head may hold within the threshold.
func (k *Kernel) summaryRoom(sys []Message, head string) int {
	return 4*(k.threshold()-EstimateTokens(sys)-messageFraming) - len(head) - len(summaryTail)
}

// minSummaryBody is the least room, in bytes, a summarising request must
// leave for the conversation it summarises.
const minSummaryBody = 256

// item is one rendered piece of a summarised message: a heading and the
// text under it (clipped to fit).
type item struct{ head, body string }

// renderItems renders messages for the summariser, in order, each headed
// by its role; a call by its name and id, a result by its call's id.
func renderItems(msgs []Message) []item {
	var out []item
	for _, m := range msgs {
		switch m.Role {
		case RoleUser:
			head := "[user]"
			switch {
			case m.Summary:
				head = "[summary of the conversation before]"
			case m.Marker:
				head = "[note: the turn above ended early]"
			case m.Interjection:
				head = "[user, typed while the assistant worked]"
			}
			out = append(out, item{head, m.Content})
		case RoleAssistant:
			if m.Content != "" {
				head := "[assistant]"
				if m.Partial {
					head = "[assistant, cut off]"
				}
				out = append(out, item{head, m.Content})
			}
			for _, c := range m.ToolCalls {
				out = append(out, item{"[assistant calls " + c.Name + ", call " + c.ID + "]", c.Arguments})
			}
		case RoleTool:
			out = append(out, item{"[result of call " + m.ToolCallID + "]", m.Content})
		default:
			out = append(out, item{"[" + string(m.Role) + "]", m.Content})
		}
	}
	return out
}

// joinItems renders items with each body clipped to at most limit bytes
// (-1: whole).
func joinItems(items []item, limit int) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.head)
		b.WriteByte('\n')
		b.WriteString(clipMiddle(it.body, limit))
		b.WriteString("\n\n")
	}
	return b.String()
}

// joinedLen is len(joinItems(items, limit)) without building it.
func joinedLen(items []item, limit int) int {
	n := 0
	for _, it := range items {
		n += len(it.head) + 3 + len(clipMiddle(it.body, limit))
	}
	return n
}

// fitItems renders items into at most avail bytes: whole when they fit,
// else each body clipped to the largest common length that fits, else the
// middle of the rendered text left out.
func fitItems(items []item, avail int) string {
	longest := 0
	for _, it := range items {
		longest = max(longest, len(it.body))
	}
	if joinedLen(items, -1) <= avail {
		return joinItems(items, -1)
	}
	// joinedLen is non-decreasing in the limit: the largest that fits.
	lo, hi := -1, longest // joinedLen(lo) fits (lo -1: none known), hi does not
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if joinedLen(items, max(mid, 0)) <= avail {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo >= 0 {
		return joinItems(items, lo)
	}
	return clipMiddle(joinItems(items, 0), avail)
}

// clipMiddle is s when it has at most limit bytes (or limit is negative),
// else its first and last bytes around a note of how many were left out,
// in at most limit bytes when limit leaves room for the note — or s when
// that would not be shorter. Cuts fall on rune boundaries.
func clipMiddle(s string, limit int) string {
	if limit < 0 || len(s) <= limit {
		return s
	}
	note := func(n int) string { return "\n[… " + strconv.Itoa(n) + " bytes left out …]\n" }
	keep := max(limit-len(note(len(s))), 0)
	head := textcut.Prefix(s, keep/2)
	tail := suffix(s, keep-len(head))
	out := head + note(len(s)-len(head)-len(tail)) + tail
	if len(out) >= len(s) {
		return s
	}
	return out
}

// suffix is the longest suffix of s of at most n bytes that does not start
// inside a UTF-8 sequence.
func suffix(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if n >= len(s) {
		return s
	}
	return string(textcut.TrimPartialStart([]byte(s[len(s)-n:])))
}
