package oracle

import (
	"fmt"
	"strings"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// refresh reads an agent's view: its state, turn and the messages appended
// to its history since the last read.
func (m *model) refresh(id kernel.AgentID) {
	s := &m.s
	a := m.observe(id)
	v := m.c.View(id)
	if a.freed || v.Freed {
		// A freed agent's view holds nothing to read; I23 judges that it
		// says Freed exactly when the agent finished before this step.
		a.viewFreed = v.Freed
		return
	}
	if v.State != a.state {
		s.changes = append(s.changes, stateChange{a: a, from: a.state, to: v.State})
		if (a.state == fsm.Idle) != (v.State == fsm.Idle) {
			if v.State == fsm.Idle {
				m.busy--
			} else {
				m.busy++
			}
		}
	} else if len(s.transOf(id)) > 0 {
		s.changes = append(s.changes, stateChange{a: a, from: a.state, to: v.State})
	}
	a.state, a.turn, a.view = v.State, v.Turn, v
	h := v.History
	switch {
	case len(h) < a.histLen:
		m.anomaly(a, "history shrank from %d to %d messages", a.histLen, len(h))
		a.histLen = len(h)
	case a.histLen > 0 && !sameMessage(h[a.histLen-1], a.last):
		m.anomaly(a, "message %d was rewritten", a.histLen-1)
	}
	for i := a.histLen; i < len(h); i++ {
		m.read(a, i, h[i])
	}
	a.histLen = len(h)
	if len(h) > 0 {
		a.last = h[len(h)-1]
	}
	if a.openCount > 0 && v.State != fsm.Tooling && v.State != fsm.Delegating {
		m.anomaly(a, "%d tool call(s) without a result while %s", a.openCount, v.State)
		clear(a.open)
		a.openCount = 0
	}
}

func (m *model) anomaly(a *agentObs, format string, args ...any) {
	m.s.anomalies = append(m.s.anomalies, anomaly{a: a, detail: fmt.Sprintf(format, args...)})
}

func sameMessage(x, y kernel.Message) bool {
	return x.Role == y.Role && x.Content == y.Content && x.ToolCallID == y.ToolCallID &&
		len(x.ToolCalls) == len(y.ToolCalls) && x.Partial == y.Partial && x.Marker == y.Marker
}

// read takes in message i of a's history: the calls it opens or answers,
// the marker it is.
func (m *model) read(a *agentObs, i int, msg kernel.Message) {
	o := msgObs{a: a, i: i, m: msg}
	if a.openCount > 0 && msg.Role != kernel.RoleTool {
		m.anomaly(a, "message %d (%s) arrives while %d tool call(s) lack results", i, msg.Role, a.openCount)
		clear(a.open)
		a.openCount = 0
	}
	if msg.Role != kernel.RoleTool && len(a.open) > 0 && a.openCount == 0 {
		clear(a.open)
	}
	switch msg.Role {
	case kernel.RoleSystem:
		if i != 0 {
			m.anomaly(a, "system message at %d", i)
		}
	case kernel.RoleUser:
		m.readUser(&o)
	case kernel.RoleAssistant:
		m.readAssistant(a, i, msg)
	case kernel.RoleTool:
		m.readTool(&o)
	default:
		m.anomaly(a, "unknown role %q at %d", msg.Role, i)
	}
	m.s.msgs = append(m.s.msgs, o)
	a.lastRead = msg
}

// readUser takes in a user message: a marker counts in its turn.
func (m *model) readUser(o *msgObs) {
	a, i, msg := o.a, o.i, o.m
	if msg.Content == "" {
		m.anomaly(a, "empty user message at %d", i)
	}
	if !msg.Marker {
		return
	}
	if a.markerTurn == a.turn {
		a.markers++
	} else {
		a.markerTurn, a.markers = a.turn, 1
	}
	a.marker = parseMarker(msg.Content)
	a.marker.above = i > 0 && a.lastRead.Role == kernel.RoleAssistant && a.lastRead.Partial
	o.markers = a.markers
}

// readAssistant takes in an assistant message: the calls it opens.
func (m *model) readAssistant(a *agentObs, i int, msg kernel.Message) {
	if msg.Content == "" && len(msg.ToolCalls) == 0 {
		m.anomaly(a, "empty assistant message at %d", i)
	}
	if len(msg.ToolCalls) > 0 {
		a.lastCalls = msg.ToolCalls
	}
	for _, c := range msg.ToolCalls {
		if _, dup := a.ids[c.ID]; dup || c.ID == "" {
			m.anomaly(a, "tool call id %q reused or empty at %d", c.ID, i)
		}
		a.ids[c.ID] = struct{}{}
		a.open[c.ID] = false
		a.openCount++
		a.calls = append(a.calls, c.ID)
	}
}

// readTool takes in a tool message: the open call it answers, and the
// structured result the kernel wrote.
func (m *model) readTool(o *msgObs) {
	a, msg := o.a, o.m
	answered, ok := a.open[msg.ToolCallID]
	switch {
	case !ok:
		m.anomaly(a, "tool message %d answers %q, which is not an open call", o.i, msg.ToolCallID)
		return
	case answered:
		m.anomaly(a, "call %s answered twice", msg.ToolCallID)
		return
	}
	a.open[msg.ToolCallID] = true
	a.openCount--
	o.f = m.calls[callKey{a.id, msg.ToolCallID}]
	if f := o.f; f != nil && !f.read {
		f.read = true
		if st := f.l.Status; st != kernel.CallOK && st != kernel.CallError {
			f.parsed = parseResult(msg.Content, &f.content)
		}
	}
}

// parseMarker reads a marker's attributes: `<turn_aborted outcome="…"
// reason="…" partial="…">` (docs/semantics.md, "Markers").
func parseMarker(content string) markerObs {
	var mk markerObs
	rest, ok := strings.CutPrefix(content, kernel.MarkerPrefix)
	if !ok {
		return mk
	}
	head, _, ok := strings.Cut(rest, ">")
	if !ok {
		return mk
	}
	for _, f := range []struct {
		name string
		to   *string
	}{{"outcome", &mk.outcome}, {"reason", &mk.reason}, {"partial", &mk.partial}} {
		attr, after, found := strings.Cut(head, f.name+`="`)
		if !found || (attr != "" && !strings.HasSuffix(attr, " ")) {
			return mk
		}
		val, tail, found := strings.Cut(after, `"`)
		if !found {
			return mk
		}
		*f.to, head = val, tail
	}
	mk.ok = strings.TrimSpace(head) == ""
	return mk
}
