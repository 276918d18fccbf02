// Package otel exports a live run's spans over OTLP with the OpenTelemetry
// Go SDK: the spans kernel/spans derives from every step (one invoke_agent
// span per agent turn, one chat span per model request, one execute_tool
// span per tool call and per delegation), named and attributed by the
// GenAI semantic conventions (docs/otel.md).
//
// It is switched on the standard way: NewFromEnv (FromEnv) reads
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and
// the protocol; without an endpoint it builds nothing, so a run that does
// not ask for spans pays nothing for them. The SDK and its OTLP exporters
// read the rest of the OTEL_* configuration themselves. A host hands the
// exporter to the sessions library (session.Config.Spans) or the agent
// API (agent.Config.Spans), which feed it every step — a recovered run's
// replayed ones first — and end it with the run.
//
// Exporter.Observe runs on the kernel's goroutine (a session.Spans):
// it derives the step's span changes — pure, no I/O — and queues them for
// the exporter's goroutine, which drives the SDK; the SDK's batch processor
// sends from its own. Shutdown sends what has ended and closes the
// connections. Span and trace ids are derived from the conversation and the
// derivation's numbering, so a process that recovers a crashed one
// (Replay, then Observe) ends the spans the crashed one left open under
// their own ids, in their own traces.
//
// Message content (the requests' messages and answers, tools' arguments
// and results) is recorded only on the conventions' opt-in,
// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, and every string an
// attribute carries passes the host's redactor first.
package otel
