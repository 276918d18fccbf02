package otel

import (
	"context"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"go.opentelemetry.io/otel/trace"
)

// A host that cannot hand the exporter its steps as they happen derives
// the spans itself and hands over each span when it ends, whole: the
// Temporal workflow, whose steps a worker runs once live and again on
// every replay (docs/otel.md, "On Temporal"). Its Deriver lives in the
// workflow's state, so a worker that replays the history holds the spans
// another one started, with the same numbers; the spans a step ends go to
// an activity, and the worker that runs it hands each to ExportWhole, once,
// with its start, its events and its end. Nothing of a conversation stays
// in the exporter between calls: one exporter serves any number of
// conversations, and a span started by another process (a lost worker) is
// ended here under the ids that process would have given it.

// Model is the model the exporter names in chat spans (Config.Model) and
// Content whether it records message content (the conventions' opt-in):
// what a host that derives the spans itself (spans.New) must know. A nil
// Exporter names none and records none.
func (e *Exporter) Model() string {
	if e == nil {
		return ""
	}
	return e.cfg.Model
}

// Content reports whether the exporter records message content (see Model).
func (e *Exporter) Content() bool { return e != nil && e.cfg.Content }

// ExportWhole sends sp, a span that a host's own derivation ended, whole:
// started at its start, with its events, ended at its end, under its
// parent (by id: the parent is sent when it ends), in conversation conv,
// which names the traces as SetConversation does. origin is the wall time
// of kernel time 0; answer is a request's answer (Answer; read only on
// the content opt-in). It copies what it needs and returns at once,
// without I/O; the exporter's goroutine does the rest.
func (e *Exporter) ExportWhole(conv string, sp *spans.Span, answer *kernel.Message, origin time.Time) {
	if e == nil || sp == nil || !sp.Ended {
		return
	}
	j := job{kind: spans.Ended, span: *sp, whole: true, conv: conv, origin: origin, at: origin.Add(sp.End)}
	j.span.Events = append([]spans.Event(nil), sp.Events...)
	if e.cfg.Content && sp.Kind == spans.KindChat {
		j.answer = answer
	}
	e.mu.Lock()
	e.queue = append(e.queue, j)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default: // already woken
	}
}

// applyWhole starts, fills and ends the SDK's span of a span sent whole.
// Its parent is named by id, as the remote parent it may be (sent before
// it or by another process); the parent's sampled flag is the sampler's
// decision on the trace, so a trace is kept or dropped whole as the SDK's
// parent-based sampling keeps the spans of one process.
func (e *Exporter) applyWhole(j *job) {
	sp := &j.span
	tid := traceID(j.conv, sp.Trace)
	ctx := context.Background()
	if sp.Parent != 0 {
		var flags trace.TraceFlags
		if e.traceSampled(tid) {
			flags = trace.FlagsSampled
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: spanID(tid, sp.Parent), TraceFlags: flags, Remote: true,
		}))
	}
	s := e.startSDK(withIDs(ctx, tid, spanID(tid, sp.ID)), sp, j.conv, j.origin.Add(sp.Start))
	for _, ev := range sp.Events {
		s.AddEvent(ev.Kind.String(), trace.WithTimestamp(j.origin.Add(ev.At)), trace.WithAttributes(convert(ev.Attrs(), e.cfg.Redact)...))
	}
	e.endSDK(s, sp, j.answer, j.at)
}

// maxSampled bounds the sampling decisions kept (one per trace; a
// decision asked again is the same for the samplers the SDK configures
// from the environment, which decide on the trace id).
const maxSampled = 1 << 12

// traceSampled is the sampler's decision on trace tid, as the trace's root
// span gets it: a span started with no parent and never ended (the SDK
// sends only the spans that end).
func (e *Exporter) traceSampled(tid trace.TraceID) bool {
	if s, ok := e.sampled[tid]; ok {
		return s
	}
	if len(e.sampled) >= maxSampled {
		clear(e.sampled)
	}
	_, probe := e.tracer.Start(withIDs(context.Background(), tid, spanID(tid, 0)), "sampling")
	s := probe.SpanContext().IsSampled()
	e.sampled[tid] = s
	return s
}
