package sim

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
)

// Perfetto collects a run's spans — the ones the live exporter sends over
// OTLP, from the same derivation (kernel/spans; docs/otel.md) — and writes
// them in the Chrome / Perfetto trace-event JSON format: a track (thread)
// per agent named by its path, a complete slice ("X") per span on its
// agent's track (spans that overlap without nesting, such as parallel tool
// calls, on further tracks of the agent), a flow arrow from each
// delegation to the child's turn, and instant events ("i") for user
// inputs, interrupts, timeouts and turn ends. It reads simulated runs
// (Options.Observe) and recorded ones alike (ReplayObserved: a live trace
// too). Load the file in ui.perfetto.dev or chrome://tracing.
type Perfetto struct {
	name   string
	cfg    spans.Config
	derive *spans.Deriver
	names  map[kernel.AgentID]string
	order  []kernel.AgentID
	spans  []spans.Span
	events []perfEvent
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
	ID   uint64         `json:"id,omitempty"`
	Bp   string         `json:"bp,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// NewPerfetto starts a timeline for the named run of a kernel with the
// default root name and delegate tool (WithSpans for others).
func NewPerfetto(name string) *Perfetto {
	return &Perfetto{name: name, names: map[kernel.AgentID]string{}}
}

// WithSpans sets what the derivation cannot read from the steps (a live
// trace's header holds it). Call it before the first Observe.
func (p *Perfetto) WithSpans(cfg spans.Config) *Perfetto {
	p.cfg = cfg
	return p
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Observe is an Options.Observe hook.
func (p *Perfetto) Observe(si StepInfo) {
	if p.derive == nil {
		if p.cfg.RootName == "" {
			p.cfg.RootName = si.Core.AgentPath(kernel.Root)
		}
		p.derive = spans.New(p.cfg)
	}
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
	for _, c := range p.derive.Step(si.Event, si.Effects) {
		if c.Kind == spans.Ended {
			sp := *c.Span
			sp.Input, sp.Events = nil, nil // not drawn; the kernel's memory is not held
			p.spans = append(p.spans, sp)
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

func (p *Perfetto) instant(id kernel.AgentID, name string, at time.Duration, args map[string]any) {
	p.events = append(p.events, perfEvent{Name: name, Cat: "event", Ph: "i", S: "t", Ts: micros(at), Pid: 1, Tid: laneTid(id, 0), Args: args})
}

// laneTid is the thread of an agent's lane (lane 0 holds its turns).
func laneTid(id kernel.AgentID, lane int) int { return (int(id)+1)*64 + lane }

// Write closes the spans still open at end (a run stopped before its tree
// settled) and writes the JSON document.
func (p *Perfetto) Write(w io.Writer, end time.Duration) error {
	all := slices.Clone(p.spans)
	if p.derive != nil {
		for _, sp := range p.derive.Open() {
			open := *sp
			open.End = end
			all = append(all, open)
		}
	}
	slices.SortFunc(all, func(a, b spans.Span) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(b.End, a.End), cmp.Compare(a.ID, b.ID))
	})
	lanes := map[kernel.AgentID][][]laneSlice{} // per agent, per lane, the slices open on it
	tids := map[spans.ID]int{}
	used := map[kernel.AgentID]int{}
	var out []perfEvent
	for _, sp := range all {
		lane := place(lanes, sp)
		used[sp.Agent] = max(used[sp.Agent], lane+1)
		tid := laneTid(sp.Agent, lane)
		tids[sp.ID] = tid
		dur := micros(sp.End - sp.Start)
		args := map[string]any{}
		for _, a := range append(sp.StartAttrs(), sp.EndAttrs()...) {
			args[a.Key] = a.Value
		}
		args["escapement.span"], args["escapement.parent"] = uint64(sp.ID), uint64(sp.Parent)
		if !sp.Ended {
			args["escapement.open"] = true
		}
		out = append(out, perfEvent{Name: sp.Name(), Cat: sp.Kind.String(), Ph: "X", Ts: micros(sp.Start), Dur: &dur, Pid: 1, Tid: tid, Args: args})
	}
	// A flow arrow from each delegation to its child's turn.
	for _, sp := range all {
		if sp.Kind != spans.KindAgent || sp.Parent == 0 {
			continue
		}
		if from, ok := tids[sp.Parent]; ok {
			out = append(out,
				perfEvent{Name: "delegate", Cat: "delegation", Ph: "s", Ts: micros(sp.Start), Pid: 1, Tid: from, ID: uint64(sp.ID)},
				perfEvent{Name: "delegate", Cat: "delegation", Ph: "f", Bp: "e", Ts: micros(sp.Start), Pid: 1, Tid: tids[sp.ID], ID: uint64(sp.ID)})
		}
	}
	meta := []perfEvent{{Name: "process_name", Ph: "M", Pid: 1, Args: map[string]any{"name": "escapement " + p.name}}}
	for _, id := range p.order {
		for lane := range max(used[id], 1) {
			name := p.names[id]
			if lane > 0 {
				name = fmt.Sprintf("%s (%d)", name, lane+1)
			}
			meta = append(meta,
				perfEvent{Name: "thread_name", Ph: "M", Pid: 1, Tid: laneTid(id, lane), Args: map[string]any{"name": name}},
				perfEvent{Name: "thread_sort_index", Ph: "M", Pid: 1, Tid: laneTid(id, lane), Args: map[string]any{"sort_index": laneTid(id, lane)}})
		}
	}
	doc := struct {
		TraceEvents     []perfEvent `json:"traceEvents"`
		DisplayTimeUnit string      `json:"displayTimeUnit"`
	}{append(append(meta, out...), p.events...), "ms"}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetIndent("", " ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write perfetto trace: %w", err)
	}
	return bw.Flush()
}

// laneSlice is a slice open on a lane: its span and its end.
type laneSlice struct {
	id  spans.ID
	end time.Duration
}

// place puts sp on the first lane of its agent where nothing is open, or
// where the innermost open slice is its parent's (the slices of one thread
// nest, and a slice drawn inside another reads as its child: two calls
// that ran side by side take two lanes), and returns the lane. Spans come
// sorted by start, longest first.
func place(lanes map[kernel.AgentID][][]laneSlice, sp spans.Span) int {
	ls := lanes[sp.Agent]
	for i := range ls {
		open := ls[i]
		for len(open) > 0 && open[len(open)-1].end <= sp.Start && open[len(open)-1].id != sp.Parent {
			open = open[:len(open)-1]
		}
		ls[i] = open
		if len(open) == 0 || open[len(open)-1].id == sp.Parent {
			ls[i] = append(open, laneSlice{sp.ID, sp.End})
			return i
		}
	}
	lanes[sp.Agent] = append(ls, []laneSlice{{sp.ID, sp.End}})
	return len(ls)
}
