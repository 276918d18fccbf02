package oracle

import (
	"fmt"
	"strings"

	"github.com/escapement/escapement/kernel"
)

// transcriptChecker holds I4 (F11) and I12 (F5): every history is a valid
// chat transcript a strict provider accepts, read incrementally as it grows
// (the model records what breaks it); it only ever grows; every request
// sends a valid transcript with every call answered; and no UI string ever
// enters one.
type transcriptChecker struct{ judge }

func (c *transcriptChecker) step(s *stepObs) {
	for _, an := range s.anomalies {
		c.violate(ValidTranscripts, an.a.id, "%s", an.detail)
	}
	for i := range s.msgs {
		o := &s.msgs[i]
		for _, ui := range kernel.UIStrings() {
			if strings.Contains(o.m.Content, ui) {
				c.violate(NoUIText, o.a.id, "UI text %q in a %s message", ui, o.m.Role)
			}
		}
	}
	for i := range s.effs {
		if e := &s.effs[i]; e.Kind == kernel.EffStartLLM {
			c.request(e)
		}
	}
}

// request: a request sends a valid transcript, every call answered.
func (c *transcriptChecker) request(e *kernel.Effect) {
	if at, why := validTranscript(e.Messages, false); why != "" {
		c.violate(ValidTranscripts, e.Agent, "request %d sends an invalid transcript: message %d: %s", e.Op, at, why)
	}
}

// validTranscript is the oracle's own statement of a valid transcript
// (docs/semantics.md, "Transcripts"): known roles; a system message only
// first; no empty user or assistant message; every tool call with an id
// and a name, ids unique; the tool messages answering an assistant
// message's calls follow it directly, one per call, each naming one of its
// calls. With openTail the last assistant message's calls may still lack
// results. It returns the index of the first problem and what it is ("":
// valid). TestTranscriptRulesAgree holds kernel.ValidateTranscript to it.
func validTranscript(msgs []kernel.Message, openTail bool) (int, string) {
	t := transcript{ids: make(map[string]bool), openAt: -1}
	for i, m := range msgs {
		if why := t.next(i, m); why != "" {
			return i, why
		}
	}
	if t.open != nil && !openTail {
		if n := t.unanswered(); n > 0 {
			return len(msgs), fmt.Sprintf("%d call(s) of message %d have no result", n, t.openAt)
		}
	}
	return -1, ""
}

// transcript is validTranscript's reading so far.
type transcript struct {
	ids      map[string]bool
	open     []kernel.ToolCall // calls of the last assistant message
	answered []bool
	openAt   int
}

func (t *transcript) unanswered() int {
	n := 0
	for _, a := range t.answered {
		if !a {
			n++
		}
	}
	return n
}

// next reads message i: what is wrong with it ("": nothing).
func (t *transcript) next(i int, m kernel.Message) string {
	if t.open != nil && m.Role != kernel.RoleTool {
		if n := t.unanswered(); n > 0 {
			return fmt.Sprintf("%d call(s) of message %d have no result before this %s message", n, t.openAt, m.Role)
		}
		t.open, t.answered = nil, nil
	}
	switch m.Role {
	case kernel.RoleSystem:
		if i != 0 {
			return "a system message after the start"
		}
	case kernel.RoleUser:
		if m.Content == "" {
			return "an empty user message"
		}
	case kernel.RoleAssistant:
		return t.assistant(i, m)
	case kernel.RoleTool:
		return t.result(m)
	default:
		return fmt.Sprintf("unknown role %q", m.Role)
	}
	return ""
}

// assistant reads an assistant message and opens its calls.
func (t *transcript) assistant(i int, m kernel.Message) string {
	if m.Content == "" && len(m.ToolCalls) == 0 {
		return "an empty assistant message"
	}
	if len(m.ToolCalls) == 0 {
		return ""
	}
	t.open, t.answered, t.openAt = m.ToolCalls, make([]bool, len(m.ToolCalls)), i
	for _, tc := range m.ToolCalls {
		switch {
		case tc.ID == "":
			return "a tool call without an id"
		case tc.Name == "":
			return "tool call " + tc.ID + " without a name"
		case t.ids[tc.ID]:
			return "tool call id " + tc.ID + " used twice"
		}
		t.ids[tc.ID] = true
	}
	return ""
}

// result reads a tool message: it answers an open call, once.
func (t *transcript) result(m kernel.Message) string {
	if t.open == nil {
		return fmt.Sprintf("a result for %q follows no assistant message with calls", m.ToolCallID)
	}
	k := -1
	for j, tc := range t.open {
		if tc.ID == m.ToolCallID {
			k = j
		}
	}
	switch {
	case k < 0:
		return fmt.Sprintf("a result for %q, which is not a call of message %d", m.ToolCallID, t.openAt)
	case t.answered[k]:
		return "call " + m.ToolCallID + " answered twice"
	}
	t.answered[k] = true
	return ""
}
