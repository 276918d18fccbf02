package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// Perfetto collects a run's timeline and writes it in the Chrome / Perfetto
// trace-event JSON format: one track (thread) per agent named by its path, a
// complete span ("X") per non-Idle state it was in, and instant events ("i")
// for interrupts, timeouts, user inputs and turn ends. Load the file in
// ui.perfetto.dev or chrome://tracing to see the nested timeline.
type Perfetto struct {
	name   string
	open   map[kernel.AgentID]span
	names  map[kernel.AgentID]string
	order  []kernel.AgentID
	events []perfEvent
}

type span struct {
	state fsm.State
	since time.Duration
}

// perfEvent is one trace event; field names are the format's.
type perfEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	S    string         `json:"s,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// NewPerfetto starts a timeline for the named run.
func NewPerfetto(name string) *Perfetto {
	return &Perfetto{name: name, open: map[kernel.AgentID]span{}, names: map[kernel.AgentID]string{}}
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func tid(id kernel.AgentID) int { return int(id) + 1 }

// Observe is an Options.Observe hook.
func (p *Perfetto) Observe(si StepInfo) {
	at := si.Event.At
	switch si.Event.Kind {
	case kernel.EvCancel, kernel.EvInterject, kernel.EvSubmit, kernel.EvShutdown:
		if si.Target != kernel.NoAgent {
			p.track(si.Target, si.Core)
			p.instant(si.Target, si.Event.Kind.String(), at, map[string]any{"text": si.Event.Text})
		}
	}
	for i := range si.Effects {
		e := &si.Effects[i]
		if e.Kind != kernel.EffEmit || e.Life.Agent < 0 {
			continue
		}
		l := e.Life
		p.track(l.Agent, si.Core)
		switch l.Kind {
		case kernel.LifeTransition:
			p.close(l.Agent, at)
			if l.To != fsm.Idle {
				p.open[l.Agent] = span{state: l.To, since: at}
			}
		case kernel.LifeInterrupted:
			p.instant(l.Agent, "interrupted", at, map[string]any{"reason": l.Reason.String()})
		case kernel.LifeTimedOut:
			p.instant(l.Agent, "timed out", at, map[string]any{"reason": l.Reason.String()})
		case kernel.LifeTurnEnded:
			p.instant(l.Agent, "turn "+l.Outcome.String(), at, map[string]any{"reason": l.Reason.String()})
		case kernel.LifeDelegated:
			p.track(l.Child, si.Core)
		}
	}
}

func (p *Perfetto) track(id kernel.AgentID, c Core) {
	if _, ok := p.names[id]; ok {
		return
	}
	p.names[id] = c.AgentPath(id)
	p.order = append(p.order, id)
}

func (p *Perfetto) close(id kernel.AgentID, at time.Duration) {
	sp, ok := p.open[id]
	if !ok {
		return
	}
	delete(p.open, id)
	dur := micros(at - sp.since)
	p.events = append(p.events, perfEvent{Name: sp.state.String(), Cat: "state", Ph: "X", Ts: micros(sp.since), Dur: &dur, Pid: 1, Tid: tid(id)})
}

func (p *Perfetto) instant(id kernel.AgentID, name string, at time.Duration, args map[string]any) {
	p.events = append(p.events, perfEvent{Name: name, Cat: "event", Ph: "i", S: "t", Ts: micros(at), Pid: 1, Tid: tid(id), Args: args})
}

// Write closes the spans still open at end and writes the JSON document.
func (p *Perfetto) Write(w io.Writer, end time.Duration) error {
	for _, id := range p.order {
		p.close(id, end)
	}
	meta := []perfEvent{{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "escapement " + p.name}}}
	for _, id := range p.order {
		meta = append(meta,
			perfEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: tid(id), Args: map[string]any{"name": p.names[id]}},
			perfEvent{Name: "thread_sort_index", Ph: "M", Pid: 1, Tid: tid(id), Args: map[string]any{"sort_index": int(id)}})
	}
	doc := struct {
		TraceEvents     []perfEvent `json:"traceEvents"`
		DisplayTimeUnit string      `json:"displayTimeUnit"`
	}{append(meta, p.events...), "ms"}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetIndent("", " ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write perfetto trace: %w", err)
	}
	return bw.Flush()
}
