package host

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/escapement/escapement/adapters/otel"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/temporal/protocol"
)

// SpanExporter is where a worker's activities send the OpenTelemetry
// spans of the trees they serve: adapters/otel's *Exporter, built from
// the worker's OTEL_* variables (docs/temporal.md, "OpenTelemetry").
//
// The workflow derives the spans, purely, beside the kernel, from the
// run's first step: a worker that replays a history derives them again
// and holds the ones another worker left open, under the same ids. It
// never exports: a workflow task may run live more than once (its
// completion refused because an input came meanwhile, its worker lost
// before it reported), and a replay must send nothing. The spans a task
// ends go, whole, to one SpansActivity scheduled by that task: the
// service records the command once, whatever ran it, and the activity
// gets one attempt, so each span is handed to ExportWhole at most once —
// lost with a worker that dies before its batch processor sends, never
// sent twice.
type SpanExporter interface {
	// Model names the model in chat spans; Content is the conventions'
	// opt-in to message content.
	Model() string
	Content() bool
	// ExportWhole sends a span a derivation ended, in conversation conv,
	// kernel time 0 at origin, with a request's answer (content only). It
	// must not block.
	ExportWhole(conv string, sp *spans.Span, answer *kernel.Message, origin time.Time)
}

// Export activities: one attempt (a retry could send a batch twice);
// StartToClose bounds a lost worker's, ScheduleToClose how long a batch
// waits for an activity worker — and so how long a run that ends waits
// for its last batches (end) before its spans are dropped.
const (
	spanExportTimeout = 30 * time.Second
	spanExportWait    = 10 * time.Minute
)

// ExportSpans is SpansActivity: it hands each span of b to the exporter,
// whole, and returns at once (the exporter's goroutines send them). A
// worker that exports nothing drops the batch.
func (a *Activities) ExportSpans(_ context.Context, b protocol.SpanBatch) error {
	if a.Spans == nil {
		return nil
	}
	for i := range b.Spans {
		es := &b.Spans[i]
		sp := es.Span
		msgs, err := es.Input.Messages()
		if err != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("span %s: %v", sp.Name(), err), "bad_input", err)
		}
		sp.Input = msgs
		a.Spans.ExportWhole(b.Conversation, &sp, es.Answer, b.Origin)
	}
	return nil
}

// spanExport is what the toolbox tells of the worker's span export (nil:
// none).
func (a *Activities) spanExport() *protocol.SpanExport {
	if a.Spans == nil {
		return nil
	}
	return &protocol.SpanExport{Model: a.Spans.Model(), Content: a.Spans.Content()}
}

// deriveSpans starts the run's span derivation when the toolbox's worker
// exports spans.
func (t *tree) deriveSpans(export *protocol.SpanExport) {
	if export == nil {
		return
	}
	kc := t.k.Config()
	t.spans = spans.New(spans.Config{RootName: kc.RootName, DelegateTool: kc.DelegateTool, Model: export.Model})
	t.content = export.Content
}

// derive feeds the step to the run's span derivation and keeps every span
// it ended for the task's batch (flushSpans).
func (t *tree) derive(ev kernel.Event, effects []kernel.Effect) {
	if t.spans == nil {
		return
	}
	for _, c := range t.spans.Step(ev, effects) {
		if c.Kind == spans.Ended {
			t.pending = append(t.pending, t.ended(c.Span))
		}
	}
}

// ended is sp as its batch carries it: its content only on the opt-in.
func (t *tree) ended(sp *spans.Span) protocol.EndedSpan {
	es := protocol.EndedSpan{Span: *sp}
	es.Span.Events = slices.Clone(sp.Events)
	es.Span.Input = nil
	if !t.content {
		es.Span.Args, es.Span.Result, es.Span.Task, es.Span.Output = "", "", "", ""
		return es
	}
	// Packing is deterministic (the same bytes on replay); a transcript
	// the kernel holds always encodes.
	es.Input, _ = protocol.Pack(sp.Input)
	if sp.Kind == spans.KindChat {
		es.Answer = otel.Answer(t.k, sp)
	}
	return es
}

// flushSpans schedules the export of the spans this task ended, in one
// activity, and forgets the exports that finished.
func (t *tree) flushSpans() {
	t.exports = slices.DeleteFunc(t.exports, workflow.Future.IsReady)
	if len(t.pending) == 0 {
		return
	}
	ctx := workflow.WithActivityOptions(t.ctx, workflow.ActivityOptions{
		StartToCloseTimeout:    spanExportTimeout,
		ScheduleToCloseTimeout: spanExportWait,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	batch := protocol.SpanBatch{Conversation: t.conv, Origin: t.start, Spans: t.pending}
	t.exports = append(t.exports, workflow.ExecuteActivity(ctx, protocol.SpansActivity, batch))
	t.pending = nil
}

// exported reports whether every export scheduled has finished (sent or
// failed): a run that ends first would drop the ones not yet started.
func (t *tree) exported() bool {
	for _, f := range t.exports {
		if !f.IsReady() {
			return false
		}
	}
	return true
}
