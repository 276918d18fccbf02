package trace

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/escapement/escapement/kernel"
)

// The trace is written on every simulated step (hundreds of thousands of
// lines per second), so records are encoded by hand here instead of by
// reflection. The bytes are exactly what encoding/json produces for Record
// with HTML escaping off (same field order, same omitempty/omitzero rules);
// TestEncoderMatchesJSON checks that on every record the scenario suite
// produces, and on hand-made edge cases. Readers decode with encoding/json.
//
// Keys are literals carrying their leading comma: the first field of every
// object is always present, so no "first field" bookkeeping is needed.

type enc struct {
	b []byte
	// atNS and atDigits cache the step's time in nanoseconds, formatted
	// once: the event and every lifecycle record of a step share it.
	atNS     int64
	atDigits []byte
}

// at appends a nanosecond time, reusing the cached digits for the step's.
func (e *enc) at(v int64) {
	if v == e.atNS && e.atDigits != nil {
		e.b = append(e.b, e.atDigits...)
		return
	}
	e.b = strconv.AppendInt(e.b, v, 10)
}

// json appends v as encoding/json writes it with HTML escaping off.
func (e *enc) json(v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	e.b = append(e.b, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
	return nil
}

// lit appends a key literal (e.g. `,"kind":`).
func (e *enc) lit(s string) { e.b = append(e.b, s...) }

// name appends an enum name or another string known to need no escaping
// (ASCII letters, digits, '_', '.', '(', ')').
func (e *enc) name(s string) {
	e.b = append(e.b, '"')
	e.b = append(e.b, s...)
	e.b = append(e.b, '"')
}

func (e *enc) str(s string) { e.b = kernel.AppendJSONString(e.b, s) }

// i64 and u64 write numbers below 10,000 (agent ids, turns, ops, chunk and
// sequence numbers: nearly every number in a trace but times) without
// strconv's general loop.
func (e *enc) i64(v int64) {
	if 0 <= v && v < 10000 {
		e.b = appendSmallUint(e.b, uint64(v))
		return
	}
	e.b = strconv.AppendInt(e.b, v, 10)
}

func (e *enc) u64(v uint64) {
	if v < 10000 {
		e.b = appendSmallUint(e.b, v)
		return
	}
	e.b = strconv.AppendUint(e.b, v, 10)
}

// appendSmallUint appends v < 10,000 in decimal.
func appendSmallUint(b []byte, v uint64) []byte {
	switch {
	case v < 10:
		return append(b, byte('0'+v))
	case v < 100:
		return append(b, byte('0'+v/10), byte('0'+v%10))
	case v < 1000:
		return append(b, byte('0'+v/100), byte('0'+v/10%10), byte('0'+v%10))
	}
	return append(b, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
}

// appendMark appends a note or end line: type, step, time in duration
// syntax, and the note if any. (Step lines are written by Writer.Step.)
func appendMark(b []byte, typ string, step int, at time.Duration, note string) []byte {
	e := enc{b: b}
	e.lit(`{"type":`)
	e.name(typ)
	e.lit(`,"step":`)
	e.i64(int64(step))
	e.lit(`,"at":"`)
	e.b = appendDuration(e.b, at)
	e.b = append(e.b, '"')
	if note != "" {
		e.lit(`,"note":`)
		e.str(note)
	}
	e.b = append(e.b, '}', '\n')
	return e.b
}

// event, effect and life write an object after its opening: the caller
// writes the key, the brace and the first key in one literal.
func (e *enc) event(ev *kernel.Event) {
	e.lit(ev.Kind.String())
	e.lit(`","at":`)
	e.at(int64(ev.At))
	if ev.Agent != 0 {
		e.lit(`,"agent":`)
		e.i64(int64(ev.Agent))
	}
	if ev.Turn != 0 {
		e.lit(`,"turn":`)
		e.u64(ev.Turn)
	}
	if ev.Op != 0 {
		e.lit(`,"op":`)
		e.u64(uint64(ev.Op))
	}
	if ev.Chunk != 0 {
		e.lit(`,"chunk":`)
		e.u64(uint64(ev.Chunk))
	}
	if ev.Text != "" {
		e.lit(`,"text":`)
		e.str(ev.Text)
	}
	if c := ev.Call; c != nil {
		e.lit(`,"call":{"index":`)
		e.i64(int64(c.Index))
		if c.ID != "" {
			e.lit(`,"id":`)
			e.str(c.ID)
		}
		if c.Name != "" {
			e.lit(`,"name":`)
			e.str(c.Name)
		}
		if c.Args != "" {
			e.lit(`,"args":`)
			e.str(c.Args)
		}
		e.b = append(e.b, '}')
	}
	if ev.Failure != 0 {
		e.lit(`,"failure":`)
		e.name(ev.Failure.String())
	}
	if ev.Status != 0 {
		e.lit(`,"status":`)
		e.name(ev.Status.String())
	}
	if ev.Verdict != 0 {
		e.lit(`,"verdict":`)
		e.name(ev.Verdict.String())
	}
	if ev.Attempt != 0 {
		e.lit(`,"attempt":`)
		e.i64(int64(ev.Attempt))
	}
	if ev.Delay != 0 {
		e.lit(`,"delay":`)
		e.i64(int64(ev.Delay))
	}
	if u := ev.Usage; u != nil {
		e.lit(`,"usage":`)
		e.usage(u)
	}
	if r := ev.Reasoning; r != nil {
		e.lit(`,"reasoning":{`)
		comma := false
		for _, f := range [...]struct{ key, v string }{{`"text":`, r.Text}, {`"field":`, r.Field}, {`"details":`, r.Details}} {
			if f.v == "" {
				continue
			}
			if comma {
				e.b = append(e.b, ',')
			}
			e.lit(f.key)
			e.str(f.v)
			comma = true
		}
		e.b = append(e.b, '}')
	}
	if ev.CallID != "" {
		e.lit(`,"call_id":`)
		e.str(ev.CallID)
	}
	if ev.Digest != "" {
		e.lit(`,"digest":`)
		e.str(ev.Digest)
	}
	e.b = append(e.b, '}')
}

// usage writes a Usage object: its nonzero counts, in field order.
func (e *enc) usage(u *kernel.Usage) {
	e.b = append(e.b, '{')
	comma := false
	for _, f := range [...]struct {
		key string
		n   int
	}{
		{`"prompt_tokens":`, u.PromptTokens}, {`"completion_tokens":`, u.CompletionTokens},
		{`"cached_tokens":`, u.CachedTokens}, {`"reasoning_tokens":`, u.ReasoningTokens},
		{`"requests":`, u.Requests}, {`"unreported":`, u.Unreported},
	} {
		if f.n == 0 {
			continue
		}
		if comma {
			e.b = append(e.b, ',')
		}
		e.lit(f.key)
		e.i64(int64(f.n))
		comma = true
	}
	e.b = append(e.b, '}')
}

func (e *enc) effect(ef *kernel.Effect) {
	e.lit(ef.Kind.String())
	e.lit(`","agent":`)
	e.i64(int64(ef.Agent))
	if ef.Op != 0 {
		e.lit(`,"op":`)
		e.u64(uint64(ef.Op))
	}
	if ef.At != 0 {
		e.lit(`,"at":`)
		e.i64(int64(ef.At))
	}
	if ef.Timer != 0 {
		e.lit(`,"timer":`)
		e.name(ef.Timer.String())
	}
	if ef.Compact {
		e.lit(`,"compact":true`)
	}
	if ef.Call != (kernel.ToolCall{}) {
		e.lit(`,"call":{"id":`)
		e.str(ef.Call.ID)
		e.lit(`,"name":`)
		e.str(ef.Call.Name)
		e.lit(`,"arguments":`)
		e.str(ef.Call.Arguments)
		e.b = append(e.b, '}')
	}
	if ef.Life.Kind != 0 || ef.Life != (kernel.Lifecycle{}) { // the cheap test first
		e.lit(`,"life":{"seq":`)
		e.life(&ef.Life)
	}
	if ef.Code != 0 {
		e.lit(`,"code":`)
		e.name(ef.Code.String())
	}
	if ef.Detail != "" {
		e.lit(`,"detail":`)
		e.str(ef.Detail)
	}
	if ef.Profile != "" {
		e.lit(`,"profile":`)
		e.str(ef.Profile)
	}
	e.b = append(e.b, '}')
}

func (e *enc) life(l *kernel.Lifecycle) {
	e.u64(l.Seq)
	e.lit(`,"at":`)
	e.at(int64(l.At))
	e.lit(`,"kind":"`)
	e.lit(l.Kind.String())
	e.lit(`","agent":`)
	e.i64(int64(l.Agent))
	if l.Turn != 0 {
		e.lit(`,"turn":`)
		e.u64(l.Turn)
	}
	if l.Op != 0 {
		e.lit(`,"op":`)
		e.u64(uint64(l.Op))
	}
	if l.Child != 0 {
		e.lit(`,"child":`)
		e.i64(int64(l.Child))
	}
	if l.CallID != "" {
		e.lit(`,"call_id":`)
		e.str(l.CallID)
	}
	if l.Name != "" {
		e.lit(`,"name":`)
		e.str(l.Name)
	}
	if l.Text != "" {
		e.lit(`,"text":`)
		e.str(l.Text)
	}
	if l.From != 0 {
		e.lit(`,"from":`)
		e.name(l.From.String())
	}
	if l.To != 0 {
		e.lit(`,"to":`)
		e.name(l.To.String())
	}
	if l.Trigger != 0 {
		e.lit(`,"trigger":`)
		e.name(l.Trigger.String())
	}
	if l.Outcome != 0 {
		e.lit(`,"outcome":`)
		e.name(l.Outcome.String())
	}
	if l.Reason != 0 {
		e.lit(`,"reason":`)
		e.name(l.Reason.String())
	}
	if l.End != 0 {
		e.lit(`,"end":`)
		e.name(l.End.String())
	}
	if l.Status != 0 {
		e.lit(`,"status":`)
		e.name(l.Status.String())
	}
	if l.Approval != 0 {
		e.lit(`,"approval":`)
		e.name(l.Approval.String())
	}
	if l.N != 0 {
		e.lit(`,"n":`)
		e.i64(int64(l.N))
	}
	if l.Queued {
		e.lit(`,"queued":true`)
	}
	if l.Since != 0 {
		e.lit(`,"since":`)
		e.i64(int64(l.Since))
	}
	if l.Delay != 0 {
		e.lit(`,"delay":`)
		e.i64(int64(l.Delay))
	}
	if l.Detail != "" {
		e.lit(`,"detail":`)
		e.str(l.Detail)
	}
	if l.Digest != "" {
		e.lit(`,"digest":`)
		e.str(l.Digest)
	}
	if l.Usage != nil {
		e.lit(`,"usage":`)
		e.usage(l.Usage)
	}
	if l.Profile != "" {
		e.lit(`,"profile":`)
		e.str(l.Profile)
	}
	e.b = append(e.b, '}')
}
