// Package edge keeps secrets out of the kernel: it wraps a live run's Model
// and Tools so that every text reaching the kernel from the world is
// redacted first (docs/durable.md, "Secrets"). The CLI wraps its model and
// tools with it.
package edge

import (
	"context"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/internal/redact"
	"github.com/escapement/escapement/kernel"
)

// A live run redacts secrets at the kernel's edge: every text that reaches
// the kernel from the world — the model's streamed answer, its reasoning and
// tool-call arguments, a tool's result, a failure's or retry's message — passes the
// redactor first (docs/durable.md, "Secrets"). So the kernel never
// holds a secret, and neither does anything derived from it: the requests
// sent back to the model, the session, the trace and the write-ahead log.
// The log then holds exactly the events the kernel was fed, and a rebuild
// from it reproduces the run byte for byte however the key was cut across
// the chunks (redacting each written line instead made a rebuilt step
// differ from its logged line wherever the key had been put together from
// pieces). The model's answer is redacted as a stream (redact.Stream): a
// key the model repeats in pieces is masked whole, and at most a few bytes
// that could start a key wait for the next chunk.

// edgeModel is a ports.Model whose output reaches the kernel redacted.
type edgeModel struct {
	m ports.Model
	r *redact.Redactor
}

// Redact wraps the model and the tools a live run's kernel is fed from so
// that no secret of r reaches it; with no secret it changes nothing.
func Redact(m ports.Model, t ports.Tools, r *redact.Redactor) (ports.Model, ports.Tools) {
	if r.Empty() {
		return m, t
	}
	return edgeModel{m: m, r: r}, edgeTools{t: t, r: r}
}

func (m edgeModel) Stream(ctx context.Context, req ports.Request, sink ports.Sink) error {
	s := &edgeSink{sink: sink, r: m.r, text: m.r.Stream(), args: map[int]*redact.Stream{}}
	err := m.m.Stream(ctx, req, s)
	s.flush()
	return m.r.Error(err) // its failure (ports.FailureOf) still seen through it
}

// edgeSink redacts one stream: its text and each call's arguments as
// streams, a call's id and name and a retry's cause whole.
type edgeSink struct {
	sink  ports.Sink
	r     *redact.Redactor
	text  *redact.Stream
	args  map[int]*redact.Stream
	order []int // call indexes as they appeared, for the flush
}

func (s *edgeSink) Text(text string) {
	if out := s.text.Write(text); out != "" {
		s.sink.Text(out)
	} else if text != "" {
		s.Progress() // held back, but it did arrive: the stream is alive
	}
}

func (s *edgeSink) Call(d kernel.CallDelta) {
	st := s.args[d.Index]
	if st == nil {
		st = s.r.Stream()
		s.args[d.Index] = st
		s.order = append(s.order, d.Index)
	}
	args := d.Args
	d.ID, d.Name, d.Args = s.r.Redact(d.ID), s.r.Redact(d.Name), st.Write(d.Args)
	if d.ID == "" && d.Name == "" && d.Args == "" && args != "" {
		s.Progress()
		return
	}
	s.sink.Call(d)
}

func (s *edgeSink) Progress() {
	if p, ok := s.sink.(ports.ProgressSink); ok {
		p.Progress()
	}
}

func (s *edgeSink) Retry(attempt int, delay time.Duration, cause string) {
	s.sink.Retry(attempt, delay, s.r.Redact(cause))
}

func (s *edgeSink) Usage(u kernel.Usage) { s.sink.Usage(u) }

// Reasoning passes the model's reasoning on redacted, its text and its
// details alike (ports.ReasoningSink): the kernel keeps it with its message
// and sends it back to providers that need it (docs/semantics.md,
// "Reasoning"), so it must hold no secret either. The mask holds no quote
// or backslash, so details that were JSON stay JSON. Under a sink that
// keeps no reasoning it is dropped, as without the edge.
func (s *edgeSink) Reasoning(r kernel.Reasoning) {
	rs, ok := s.sink.(ports.ReasoningSink)
	if !ok {
		return
	}
	r.Text, r.Details = s.r.Redact(r.Text), s.r.Redact(r.Details)
	rs.Reasoning(r)
}

// flush releases what the streams held back when the stream ended.
func (s *edgeSink) flush() {
	if out := s.text.Flush(); out != "" {
		s.sink.Text(out)
	}
	for _, i := range s.order {
		if out := s.args[i].Flush(); out != "" {
			s.sink.Call(kernel.CallDelta{Index: i, Args: out})
		}
	}
}

// edgeTools is a ports.Tools whose results reach the kernel redacted.
type edgeTools struct {
	t ports.Tools
	r *redact.Redactor
}

func (t edgeTools) Run(ctx context.Context, c ports.Call) ports.ToolResult {
	res := t.t.Run(ctx, c)
	res.Content = t.r.Redact(res.Content)
	return res
}
