package otel

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/textcut"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/spans"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config is what the exporter tells of the run beside the steps.
type Config struct {
	Settings
	// RootName and DelegateTool are the kernel's (kernel.Config).
	RootName     string
	DelegateTool string
	// Model is gen_ai.request.model; Provider gen_ai.provider.name
	// ("openai" for an OpenAI-compatible endpoint); BaseURL the endpoint,
	// of which server.address and server.port are told (never its
	// credentials, path or query).
	Model    string
	Provider string
	BaseURL  string
	// ServiceVersion is the resource's service.version (OTEL_SERVICE_NAME
	// and OTEL_RESOURCE_ATTRIBUTES override the resource).
	ServiceVersion string
	// Redact is applied to every string an attribute, an event or a status
	// carries (nil: none).
	Redact func(string) string
	// OnError is told of the first export that fails, from the export's
	// goroutine (nil: nobody), in a sentence for the user.
	OnError func(error)
	// Now reads the wall clock (nil: time.Now); tests fix it.
	Now func() time.Time
}

// Exporter exports the spans of one live run over OTLP. Observe derives
// them on the kernel's goroutine — a pure step, no I/O, no lock held for
// long — and hands them to the exporter's own goroutine, which starts and
// ends the SDK's spans; the SDK's batch processor sends them from its
// goroutine. The kernel's step never waits for the network. It is a
// session.Spans (adapters/session drives it, and the agent API through
// it). A nil *Exporter — what NewFromEnv returns when nothing asks for
// spans — does nothing.
type Exporter struct {
	cfg    Config
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	server []attribute.KeyValue

	// Kernel goroutine only. origin is the wall time of kernel time 0 in
	// this process; a recovered one maps the kernel times its log replayed
	// (up to lastReplay) back from crashed, the wall time of the crash.
	derive     *spans.Deriver
	origin     time.Time
	replayed   bool
	resumed    bool // the spans the replay left open were handed on
	lastReplay time.Duration
	crashed    time.Time

	mu       sync.Mutex
	conv     string
	queue    []job
	wake     chan struct{}
	flush    chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
	// Export goroutine only: the SDK spans of the open derived spans, and
	// the sampler's decisions on the traces of spans sent whole.
	open    map[spans.ID]trace.Span
	sampled map[trace.TraceID]bool

	failures atomic.Int64
}

// job is one derived change, copied off the kernel's goroutine.
type job struct {
	kind  spans.ChangeKind
	span  spans.Span
	event spans.Event
	// at is the wall time of the change; answer a request's answer
	// (content only).
	at     time.Time
	answer *kernel.Message
	// whole: span is one another derivation ended (ExportWhole), sent
	// whole, in conversation conv, its kernel times counted from origin.
	whole  bool
	conv   string
	origin time.Time
}

// New builds the tracer provider, the OTLP exporter (Settings.Protocol;
// the exporter reads the endpoint, headers, TLS and timeouts from the
// standard variables) and the exporter's goroutine. It connects to
// nothing until the first batch is sent.
func New(ctx context.Context, cfg Config) (*Exporter, error) {
	if cfg.Redact == nil {
		cfg.Redact = func(s string) string { return s }
	}
	if cfg.Provider == "" {
		cfg.Provider = "openai"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch cfg.Protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	case ProtocolHTTP, "":
		exp, err = otlptracehttp.New(ctx)
	default:
		err = fmt.Errorf("%w: protocol %q", ErrBadSetting, cfg.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("OpenTelemetry exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "escapement"), attribute.String("service.version", cfg.ServiceVersion)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	e := &Exporter{
		cfg:     cfg,
		derive:  spans.New(spans.Config{RootName: cfg.RootName, DelegateTool: cfg.DelegateTool, Model: cfg.Model}),
		server:  serverAttrs(cfg.BaseURL, cfg.Redact),
		wake:    make(chan struct{}, 1),
		flush:   make(chan chan struct{}),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		open:    make(map[spans.ID]trace.Span),
		sampled: make(map[trace.TraceID]bool),
	}
	e.tp = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&reporting{SpanExporter: exp, e: e}),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(derivedIDs{}))
	e.tracer = e.tp.Tracer("github.com/escapement/escapement/adapters/otel")
	go e.run() // owned: Shutdown waits for it
	return e, nil
}

// NewFromEnv builds the exporter the standard variables ask for, read
// through getenv (FromEnv; cfg.Settings is theirs): nil, and nothing
// started, when they ask for none. A value it cannot honour is an error
// naming the variable.
func NewFromEnv(ctx context.Context, getenv func(string) string, cfg Config) (*Exporter, error) {
	settings, on, err := FromEnv(getenv)
	if err != nil || !on {
		return nil, err
	}
	cfg.Settings = settings
	return New(ctx, cfg)
}

// SetConversation sets gen_ai.conversation.id — the session's identity,
// which also seeds the trace and span ids. Call it before the first
// Observe.
func (e *Exporter) SetConversation(id string) {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.conv = id
	e.mu.Unlock()
}

// Replay derives a step a recovered process replays from its log: the
// spans it changes were exported, or will be ended, by the process that
// ran it, so nothing is exported now. Call it on the kernel's goroutine
// (or before Run), for every replayed step in order, before any Observe.
func (e *Exporter) Replay(s ports.Step) {
	if e == nil {
		return
	}
	e.derive.Step(s.Event, s.Effects)
	e.replayed, e.lastReplay = true, s.Event.At
}

// SetCrashTime says when the process whose log was replayed stopped (the
// log's last write): the replayed spans keep their wall times, and the time
// the host was down lies between them and what this process does (the
// kernel's clock, which does not count it, resumes where the log ended).
// Without it the recovered process takes no time to have passed. Call it
// before the first Observe.
func (e *Exporter) SetCrashTime(t time.Time) {
	if e != nil {
		e.crashed = t
	}
}

// Observe derives the spans of one live step and hands them to the
// exporter's goroutine. It is a live.Config.Observer (or part of one).
func (e *Exporter) Observe(s ports.Step) {
	if e == nil {
		return
	}
	if e.origin.IsZero() {
		e.origin = e.cfg.Now().Add(-s.Event.At)
		if e.crashed.IsZero() || e.crashed.After(e.origin.Add(e.lastReplay)) {
			e.crashed = e.origin.Add(e.lastReplay)
		}
	}
	var jobs []job
	if e.replayed && !e.resumed {
		// The spans the crashed process held open are the recovered
		// one's to end: they start again here, before the recovery's step
		// ends some of them, under their own ids and at their own times,
		// with the events they had.
		for _, sp := range e.derive.Open() {
			jobs = append(jobs, job{kind: spans.Started, span: *sp, at: e.wall(sp.Start)})
			for _, ev := range sp.Events {
				jobs = append(jobs, job{kind: spans.Evented, span: *sp, event: ev, at: e.wall(ev.At)})
			}
		}
	}
	changes := e.derive.Step(s.Event, s.Effects)
	e.resumed = true
	for _, c := range changes {
		j := job{kind: c.Kind, span: *c.Span, event: c.Event, at: e.wall(s.Event.At)}
		switch c.Kind {
		case spans.Started:
			j.at = e.wall(c.Span.Start)
		case spans.Evented:
			j.at = e.wall(c.Event.At)
		case spans.Ended:
			j.at = e.wall(c.Span.End)
			if e.cfg.Content && c.Span.Kind == spans.KindChat {
				j.answer = Answer(s.Kernel, c.Span)
			}
		}
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 {
		return
	}
	e.mu.Lock()
	e.queue = append(e.queue, jobs...)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default: // already woken
	}
}

// wall is the wall time of kernel time at.
func (e *Exporter) wall(at time.Duration) time.Time {
	if e.replayed && at < e.lastReplay {
		return e.crashed.Add(at - e.lastReplay)
	}
	return e.origin.Add(at)
}

// run is the exporter's goroutine: it applies the queued changes to the
// SDK until Shutdown, then applies what is left and returns.
func (e *Exporter) run() {
	defer close(e.done)
	for {
		select {
		case <-e.wake:
			e.apply()
		case applied := <-e.flush:
			e.apply()
			close(applied)
		case <-e.stop:
			e.apply()
			return
		}
	}
}

func (e *Exporter) apply() {
	e.mu.Lock()
	jobs, conv := e.queue, e.conv
	e.queue = nil
	e.mu.Unlock()
	for i := range jobs {
		e.applyOne(&jobs[i], conv)
	}
}

func (e *Exporter) applyOne(j *job, conv string) {
	if j.whole {
		e.applyWhole(j)
		return
	}
	sp := &j.span
	switch j.kind {
	case spans.Started:
		ctx := context.Background()
		tid := traceID(conv, sp.Trace)
		if parent := e.open[sp.Parent]; parent != nil {
			ctx = trace.ContextWithSpan(ctx, parent)
			tid = parent.SpanContext().TraceID()
		}
		e.open[sp.ID] = e.startSDK(withIDs(ctx, tid, spanID(tid, sp.ID)), sp, conv, j.at)
	case spans.Evented:
		if s := e.open[sp.ID]; s != nil {
			s.AddEvent(j.event.Kind.String(), trace.WithTimestamp(j.at), trace.WithAttributes(convert(j.event.Attrs(), e.cfg.Redact)...))
		}
	case spans.Ended:
		s := e.open[sp.ID]
		if s == nil {
			return
		}
		delete(e.open, sp.ID)
		e.endSDK(s, sp, j.answer, j.at)
	}
}

// startSDK starts the SDK's span for sp at at, under the parent and with
// the ids ctx carries, with the attributes it has from its start.
func (e *Exporter) startSDK(ctx context.Context, sp *spans.Span, conv string, at time.Time) trace.Span {
	red := e.cfg.Redact
	attrs := append(convert(sp.StartAttrs(), red), attribute.String(spans.KeyProvider, e.cfg.Provider))
	if conv != "" {
		attrs = append(attrs, attribute.String(spans.KeyConversation, conv))
	}
	if sp.Kind == spans.KindChat {
		attrs = append(attrs, e.server...)
	}
	if e.cfg.Content {
		attrs = append(attrs, startContent(sp, red)...)
	}
	_, s := e.tracer.Start(ctx, red(sp.Name()), trace.WithTimestamp(at), trace.WithSpanKind(kindOf(sp.Kind)), trace.WithAttributes(attrs...))
	return s
}

// endSDK ends s, the SDK's span for sp, at at: what ended it, its status
// and (on the opt-in) its content's end — answer, a request's answer.
func (e *Exporter) endSDK(s trace.Span, sp *spans.Span, answer *kernel.Message, at time.Time) {
	red := e.cfg.Redact
	s.SetAttributes(convert(sp.EndAttrs(), red)...)
	if e.cfg.Content {
		s.SetAttributes(endContent(sp, answer, red)...)
	}
	if et := sp.ErrorType(); et != "" {
		desc := et
		if sp.Reason != kernel.ReasonNone {
			desc += ": " + sp.Reason.String()
		}
		if sp.Detail != "" && sp.Kind != spans.KindTool {
			desc += ": " + textcut.Clip(red(sp.Detail), 256)
		}
		s.SetStatus(codes.Error, desc)
	}
	s.End(trace.WithTimestamp(at))
}

func kindOf(k spans.Kind) trace.SpanKind {
	if k == spans.KindChat {
		return trace.SpanKindClient
	}
	return trace.SpanKindInternal
}

// convert turns the derivation's attributes into the SDK's, redacting
// every string.
func convert(as []spans.Attr, red func(string) string) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(as))
	for _, a := range as {
		switch v := a.Value.(type) {
		case string:
			out = append(out, attribute.String(a.Key, red(v)))
		case int64:
			out = append(out, attribute.Int64(a.Key, v))
		case float64:
			out = append(out, attribute.Float64(a.Key, v))
		case bool:
			out = append(out, attribute.Bool(a.Key, v))
		case []string:
			vs := make([]string, len(v))
			for i, s := range v {
				vs[i] = red(s)
			}
			out = append(out, attribute.StringSlice(a.Key, vs))
		}
	}
	return out
}

// serverAttrs are server.address and server.port of the model's endpoint:
// its host and port only, never the credentials a URL may carry.
func serverAttrs(base string, red func(string) string) []attribute.KeyValue {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	out := []attribute.KeyValue{attribute.String(spans.KeyServerAddress, red(host))}
	if p, err := strconv.Atoi(port); err == nil {
		out = append(out, attribute.Int(spans.KeyServerPort, p))
	}
	return out
}

// Flush sends what has ended so far, waiting at most until ctx ends (a
// process about to exit at once).
func (e *Exporter) Flush(ctx context.Context) error {
	if e == nil {
		return nil
	}
	applied := make(chan struct{})
	select {
	case e.flush <- applied:
		select {
		case <-applied:
		case <-ctx.Done():
			return fmt.Errorf("OpenTelemetry: %w", ctx.Err())
		}
	case <-e.done:
	case <-ctx.Done():
		return fmt.Errorf("OpenTelemetry: %w", ctx.Err())
	}
	return e.tp.ForceFlush(ctx)
}

// Shutdown stops the exporter: the changes observed so far are applied,
// the spans ended so far are sent (waiting at most until ctx ends), and
// the exporter's connections are closed. Spans still open stay unsent: a
// process that stops before its tree has settled (a hard exit) leaves
// them to the run that recovers it. It reports how many batches failed
// to export, if any did.
func (e *Exporter) Shutdown(ctx context.Context) error {
	if e == nil {
		return nil
	}
	e.stopOnce.Do(func() { close(e.stop) })
	select {
	case <-e.done:
	case <-ctx.Done():
		return fmt.Errorf("OpenTelemetry: %w", ctx.Err())
	}
	err := e.tp.Shutdown(ctx)
	if n := e.failures.Load(); n > 0 {
		err = errors.Join(err, fmt.Errorf("%d batch(es) of spans could not be exported", n))
	}
	if err != nil {
		return fmt.Errorf("OpenTelemetry: %w", err)
	}
	return nil
}

// reporting is the OTLP exporter with its failures counted and the first
// one told (the SDK would hand them to the process-wide error handler).
type reporting struct {
	sdktrace.SpanExporter
	e *Exporter
}

func (r *reporting) ExportSpans(ctx context.Context, ss []sdktrace.ReadOnlySpan) error {
	err := r.SpanExporter.ExportSpans(ctx, ss)
	if err != nil {
		if r.e.failures.Add(1) == 1 && r.e.cfg.OnError != nil {
			r.e.cfg.OnError(fmt.Errorf("OpenTelemetry: sending spans failed: %s (later failures are counted at exit)", r.e.cfg.Redact(err.Error())))
		}
		return nil // counted and told: the global handler would print it again
	}
	return nil
}
