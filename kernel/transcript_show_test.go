package kernel

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/escapement/escapement/fsm"
)

// The commands that show the kernel's state rather than step it.

// state prints every agent, the live timers, the calls waiting for
// approval and whether the tree is quiescent.
func (d *transcriptDriver) state(dir directive) ([]string, error) {
	if err := dir.want(0, 0); err != nil {
		return nil, err
	}
	k := d.kernel()
	var out []string
	for id := range k.NumAgents() {
		v := k.Agent(AgentID(id))
		if v.Freed() {
			out = append(out, fmt.Sprintf("agent %d: freed (it finished; docs/semantics.md, \"Finished agents\")", id))
			continue
		}
		line := fmt.Sprintf("%s: %s, turn %d", v.Path(), v.State(), v.Turn())
		if o, r := v.Outcome(); o != OutcomeNone && v.State() == fsm.Idle {
			line += " " + o.String()
			if r != ReasonNone {
				line += "/" + r.String()
			}
		}
		if n := v.InFlight(); n > 0 {
			line += fmt.Sprintf(", %d op(s) in flight", n)
		}
		if n := v.LiveChildren(); n > 0 {
			line += fmt.Sprintf(", %d child(ren) working", n)
		}
		out = append(out, line)
	}
	timers := make([]Effect, 0, len(d.timers))
	for _, e := range d.timers { // determinism: sorted below
		timers = append(timers, e)
	}
	slices.SortFunc(timers, func(a, b Effect) int { return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Op, b.Op)) })
	line := "timers: none"
	if len(timers) > 0 {
		parts := make([]string, len(timers))
		for i, e := range timers {
			parts[i] = fmt.Sprintf("op=%d %s at=%v", e.Op, e.Timer, e.At)
		}
		line = "timers: " + strings.Join(parts, ", ")
	}
	out = append(out, line)
	for _, w := range k.Approvals(nil) {
		ends := "expires"
		if !w.Expires {
			ends = "turn deadline"
		}
		out = append(out, fmt.Sprintf("waiting for approval: %s call=%s %s digest=%s since=%v, %s at=%v", k.AgentPath(w.Agent), w.CallID, w.Tool, w.Digest, w.AskedAt, ends, w.EndsAt))
	}
	if k.Quiescent() {
		out = append(out, "quiescent")
	}
	return out, nil
}

// history prints an agent's chat history, one message a line: index, role,
// the kernel's flags, then the call id a tool message answers, the content
// and the calls an assistant message makes.
func (d *transcriptDriver) history(dir directive) ([]string, error) {
	if err := dir.want(1, 1); err != nil {
		return nil, err
	}
	id, err := d.agent(dir.arg(0))
	if err != nil {
		return nil, err
	}
	var out []string
	for i, m := range d.kernel().Agent(id).History() {
		var b strings.Builder
		fmt.Fprintf(&b, "%d %s", i, m.Role)
		for _, f := range []struct {
			on   bool
			name string
		}{{m.Partial, "partial"}, {m.Interjection, "interjection"}, {m.Marker, "marker"}, {m.Synthetic, "synthetic"}, {m.Summary, "summary"}} {
			if f.on {
				b.WriteString(" [" + f.name + "]")
			}
		}
		if m.ToolCallID != "" {
			b.WriteString(" " + m.ToolCallID + ":")
		}
		if m.Content != "" {
			b.WriteString(" " + quoteText(m.Content))
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, " call=%s %s(%s)", c.ID, c.Name, c.Arguments)
		}
		if r := m.Reasoning; r != nil {
			fmt.Fprintf(&b, " reasoning(%s)=%s", r.Field, quoteText(r.Text+r.Details))
		}
		out = append(out, b.String())
	}
	return out, nil
}

// sent prints the messages of the agent's last request as the adapter gets
// them (a compaction's summarising request among them), one a line, with
// the request's estimate.
func (d *transcriptDriver) sent(dir directive) ([]string, error) {
	if err := dir.want(1, 1); err != nil {
		return nil, err
	}
	id, err := d.agent(dir.arg(0))
	if err != nil {
		return nil, err
	}
	e, ok := d.started[id]
	if !ok {
		return nil, fmt.Errorf("%s has sent no request", dir.arg(0))
	}
	out := []string{fmt.Sprintf("op=%d compact=%v estimate=%d", e.Op, e.Compact, EstimateTokens(e.Messages))}
	for i, m := range e.Messages {
		out = append(out, fmt.Sprintf("%d %s %s", i, m.Role, quoteText(m.Content)))
	}
	return out, nil
}

// quoteText quotes a message's text so JSON stays readable: in backquotes
// when it can be, else as a Go string.
func quoteText(s string) string {
	if strconv.CanBackquote(s) {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

// replayLog is a subscriber that starts late (F10): it reads the lifecycle
// log from a sequence number, and must read exactly what was emitted then.
func (d *transcriptDriver) replayLog(dir directive) ([]string, error) {
	if err := dir.want(0, 0, "from"); err != nil {
		return nil, err
	}
	from, err := strconv.ParseUint(dir.kv["from"], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("from=: %w", err)
	}
	got, err := d.kernel().Log().From(from, nil)
	if err != nil {
		return []string{"error: " + err.Error()}, nil
	}
	emitted := map[uint64]string{}
	for _, s := range d.run.steps {
		for _, e := range s.effs {
			if e.Kind == EffEmit {
				emitted[e.Life.Seq] = e.Life.Describe()
			}
		}
	}
	out := make([]string, 0, len(got))
	for _, l := range got {
		if emitted[l.Seq] != l.Describe() {
			return nil, fmt.Errorf("the log replays %s where step emitted %q", l.Describe(), emitted[l.Seq])
		}
		out = append(out, l.Describe())
	}
	if from > 1 && len(got) > 0 {
		d.run.logReplays++
	}
	return out, nil
}
