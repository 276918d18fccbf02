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
	ids := make(map[string]bool)
	var open []kernel.ToolCall // calls of the last assistant message
	var answered []bool
	openAt := -1
	unanswered := func() int {
		n := 0
		for _, a := range answered {
			if !a {
				n++
			}
		}
		return n
	}
	for i, m := range msgs {
		if open != nil && m.Role != kernel.RoleTool {
			if n := unanswered(); n > 0 {
				return i, fmt.Sprintf("%d call(s) of message %d have no result before this %s message", n, openAt, m.Role)
			}
			open, answered = nil, nil
		}
		switch m.Role {
		case kernel.RoleSystem:
			if i != 0 {
				return i, "a system message after the start"
			}
		case kernel.RoleUser:
			if m.Content == "" {
				return i, "an empty user message"
			}
		case kernel.RoleAssistant:
			if m.Content == "" && len(m.ToolCalls) == 0 {
				return i, "an empty assistant message"
			}
			if len(m.ToolCalls) == 0 {
				continue
			}
			open, answered, openAt = m.ToolCalls, make([]bool, len(m.ToolCalls)), i
			for _, tc := range m.ToolCalls {
				switch {
				case tc.ID == "":
					return i, "a tool call without an id"
				case tc.Name == "":
					return i, "tool call " + tc.ID + " without a name"
				case ids[tc.ID]:
					return i, "tool call id " + tc.ID + " used twice"
				}
				ids[tc.ID] = true
			}
		case kernel.RoleTool:
			if open == nil {
				return i, fmt.Sprintf("a result for %q follows no assistant message with calls", m.ToolCallID)
			}
			k := -1
			for j, tc := range open {
				if tc.ID == m.ToolCallID {
					k = j
				}
			}
			switch {
			case k < 0:
				return i, fmt.Sprintf("a result for %q, which is not a call of message %d", m.ToolCallID, openAt)
			case answered[k]:
				return i, "call " + m.ToolCallID + " answered twice"
			}
			answered[k] = true
		default:
			return i, fmt.Sprintf("unknown role %q", m.Role)
		}
	}
	if open != nil && !openTail {
		if n := unanswered(); n > 0 {
			return len(msgs), fmt.Sprintf("%d call(s) of message %d have no result", n, openAt)
		}
	}
	return -1, ""
}
