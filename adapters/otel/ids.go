package otel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"

	"github.com/escapement/escapement/kernel/spans"
	"go.opentelemetry.io/otel/trace"
)

// Span and trace ids are derived, not drawn: a trace's id from the
// conversation and the root's turn number, a span's from its trace and the
// derivation's span number. A process that recovers a crashed one derives
// the spans the crashed one held open with the same numbers, so the spans
// it ends join the traces the crashed process began (docs/otel.md,
// "Crashes").

// traceID is the id of the trace of root turn turn.
func traceID(conv string, turn uint64) trace.TraceID {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], turn)
	sum := sha256.Sum256(append([]byte("escapement trace\x00"+conv+"\x00"), b[:]...))
	var id trace.TraceID
	copy(id[:], sum[:])
	if !id.IsValid() {
		id[15] = 1
	}
	return id
}

// spanID is the id of span n of trace t.
func spanID(t trace.TraceID, n spans.ID) trace.SpanID {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(n))
	sum := sha256.Sum256(append(append([]byte("escapement span\x00"), t[:]...), b[:]...))
	var id trace.SpanID
	copy(id[:], sum[:])
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// idsKey carries the ids a span is to get through Tracer.Start's context.
type idsKey struct{}

type spanIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

func withIDs(ctx context.Context, t trace.TraceID, s trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, spanIDs{t, s})
}

// derivedIDs is the tracer provider's id generator: it hands out the ids
// the context carries, and random ones to a span started without them.
type derivedIDs struct{}

func (derivedIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(spanIDs); ok {
		return v.trace, v.span
	}
	var t trace.TraceID
	for !t.IsValid() {
		_, _ = rand.Read(t[:])
	}
	return t, derivedIDs{}.NewSpanID(ctx, t)
}

func (derivedIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(spanIDs); ok {
		return v.span
	}
	var s trace.SpanID
	for !s.IsValid() {
		_, _ = rand.Read(s[:])
	}
	return s
}
