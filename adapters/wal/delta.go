package wal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/escapement/escapement/adapters/ports"
	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// Streamed chunks are most of a log: one event per chunk, and a model
// streams about one token (four bytes of text) per chunk. A trace step line
// spends about 300 bytes on each — the step number, the agent's path, its
// states before and after, the event, and the lifecycle record that echoes
// the chunk's text a second time — so a 400 KB answer made a 31 MB log. A
// chunk whose step did nothing but what every streamed chunk does is
// therefore logged as a delta record instead:
//
//	{"type":"delta","at":1500000000,"op":2,"text":"abcd"}
//	{"type":"delta","at":1500000000,"op":2,"call":{"index":0,"args":"{\"pa"}}
//
// holding the event's time, op and text (or call fragment) once; its chunk
// number is the op's previous one plus one. "What every chunk does" (plain)
// is exact: the target agent stays in its state, and the step's effects are
// none (a call fragment, an empty progress chunk) or the one delta
// lifecycle record echoing the text to the target. Anything else — a chunk
// out of sequence, a late chunk, a chunk that hits a cap — is a full step
// line. A rebuild re-encodes each replayed step the same way and compares
// the bytes, so a delta record whose replay is not plain is a mismatch as
// any other (the omitted fields — states, sequence number, turn — are the
// kernel's own and show in the next full line).

// encoder turns steps into log lines: a trace step line, or a delta record
// for a plain chunk. A Writer and a rebuild each keep one, fed the same
// steps in the same order, so they agree on every line.
type encoder struct {
	tw   *trace.Writer
	line trace.LastLine
	// last is each streaming op's last chunk number.
	last  map[kernel.OpID]uint32
	delta []byte
}

// newEncoder writes hdr (into line: the caller writes it out) and encodes
// steps after it.
func newEncoder(hdr trace.Header) (*encoder, error) {
	e := &encoder{last: make(map[kernel.OpID]uint32)}
	e.tw = trace.NewWriter(&e.line, hdr)
	if err := e.tw.Flush(); err != nil {
		return nil, err
	}
	return e, nil
}

// continueEncoder encodes the steps after the first steps ones.
func continueEncoder(steps int) *encoder {
	e := &encoder{last: make(map[kernel.OpID]uint32)}
	e.tw = trace.ContinueWriter(&e.line, steps)
	return e
}

// step returns the line for s (valid until the next call), without its
// newline kept apart: the line ends in '\n'.
func (e *encoder) step(s ports.Step) ([]byte, error) {
	plain := e.plain(s)
	e.track(&s.Event)
	if plain {
		e.tw.Skip()
		e.delta = appendDelta(e.delta[:0], &s.Event)
		return e.delta, nil
	}
	e.tw.Step(s.Kernel, s.Event, s.Target, s.Before, s.Effects)
	if err := e.tw.Flush(); err != nil {
		return nil, err
	}
	return e.line.B, nil
}

// next is the chunk number a delta record of op stands for.
func (e *encoder) next(op kernel.OpID) uint32 { return e.last[op] + 1 }

// track follows each op's chunk numbers: a stream's end forgets its op, and
// a recovery every op (the ops in flight end there).
func (e *encoder) track(ev *kernel.Event) {
	switch ev.Kind {
	case kernel.EvLLMDelta:
		e.last[ev.Op] = ev.Chunk
	case kernel.EvLLMEnd, kernel.EvLLMError:
		delete(e.last, ev.Op)
	case kernel.EvRecover:
		clear(e.last)
	}
}

// plain reports whether s is a chunk that did nothing but what every chunk
// does (see the top of this file), numbered next in its stream.
func (e *encoder) plain(s ports.Step) bool {
	ev := &s.Event
	if ev.Kind != kernel.EvLLMDelta || ev.Chunk != e.next(ev.Op) || ev.Op == 0 ||
		ev.Agent != 0 || ev.Turn != 0 || ev.Failure != 0 || ev.Status != 0 || ev.Attempt != 0 || ev.Delay != 0 || ev.Usage != nil || ev.Reasoning != nil ||
		(ev.Call != nil && ev.Text != "") {
		return false
	}
	if s.Target == kernel.NoAgent || s.Before != fsm.Streaming || s.Kernel.AgentState(s.Target) != fsm.Streaming {
		return false
	}
	switch {
	case len(s.Effects) == 0:
		return true
	case len(s.Effects) > 1 || ev.Text == "":
		return false
	}
	f := &s.Effects[0]
	echo := kernel.Lifecycle{Seq: f.Life.Seq, At: ev.At, Kind: kernel.LifeDelta, Agent: s.Target, Turn: f.Life.Turn, Op: ev.Op, Text: ev.Text}
	return f.Kind == kernel.EffEmit && f.Agent == s.Target && f.Op == 0 && f.At == 0 && f.Timer == 0 &&
		len(f.Messages) == 0 && f.Call == (kernel.ToolCall{}) && f.Code == 0 && f.Detail == "" && f.Life == echo
}

// deltaPrefix starts every delta record.
const deltaPrefix = `{"type":"delta",`

// appendDelta appends ev's delta record and its newline.
func appendDelta(b []byte, ev *kernel.Event) []byte {
	b = append(b, deltaPrefix...)
	b = append(b, `"at":`...)
	b = strconv.AppendInt(b, int64(ev.At), 10)
	b = append(b, `,"op":`...)
	b = strconv.AppendUint(b, uint64(ev.Op), 10)
	if ev.Text != "" {
		b = append(b, `,"text":`...)
		b = kernel.AppendJSONString(b, ev.Text)
	}
	if c := ev.Call; c != nil {
		b = append(b, `,"call":{"index":`...)
		b = strconv.AppendInt(b, int64(c.Index), 10)
		for _, f := range [...]struct{ key, v string }{{`,"id":`, c.ID}, {`,"name":`, c.Name}, {`,"args":`, c.Args}} {
			if f.v != "" {
				b = append(b, f.key...)
				b = kernel.AppendJSONString(b, f.v)
			}
		}
		b = append(b, '}')
	}
	return append(b, '}', '\n')
}

// deltaRecord is a delta record decoded.
type deltaRecord struct {
	Type string            `json:"type"`
	At   *int64            `json:"at"`
	Op   kernel.OpID       `json:"op"`
	Text string            `json:"text"`
	Call *kernel.CallDelta `json:"call"`
}

// deltaEvent decodes a delta record into its event; chunk numbers it from
// its op (encoder.next). A rebuild re-encodes the replayed step, so a
// record this reads wrongly is reported, never taken.
func deltaEvent(ln []byte, chunk func(kernel.OpID) uint32) (kernel.Event, error) {
	if ev, ok := textDelta(ln); ok {
		ev.Chunk = chunk(ev.Op)
		return ev, nil
	}
	var r deltaRecord
	if err := json.Unmarshal(ln, &r); err != nil {
		return kernel.Event{}, fmt.Errorf("delta record: %w", err)
	}
	if r.At == nil || r.Op == 0 {
		return kernel.Event{}, errors.New("delta record without its time or op")
	}
	return kernel.Event{Kind: kernel.EvLLMDelta, At: time.Duration(*r.At), Op: r.Op, Chunk: chunk(r.Op), Text: r.Text, Call: r.Call}, nil
}

// textDelta reads the common delta record, a text chunk, as appendDelta
// writes it, without reflection (a rebuild reads one per streamed chunk);
// ok is false for anything else, which deltaEvent decodes in full.
func textDelta(ln []byte) (ev kernel.Event, ok bool) {
	rest, ok := bytes.CutPrefix(ln, []byte(deltaPrefix+`"at":`))
	if !ok {
		return ev, false
	}
	at, rest, ok := cutUint(rest, `,"op":`)
	if !ok {
		return ev, false
	}
	op, rest, ok := cutUint(rest, `,"text":`)
	if !ok || op == 0 || len(rest) < 3 || rest[len(rest)-1] != '}' {
		return ev, false
	}
	var text string
	if json.Unmarshal(rest[:len(rest)-1], &text) != nil {
		return ev, false
	}
	return kernel.Event{Kind: kernel.EvLLMDelta, At: time.Duration(at), Op: kernel.OpID(op), Text: text}, true
}

// cutUint reads the decimal number at the start of b, up to sep.
func cutUint(b []byte, sep string) (uint64, []byte, bool) {
	num, rest, ok := bytes.Cut(b, []byte(sep))
	if !ok {
		return 0, nil, false
	}
	n, err := strconv.ParseUint(string(num), 10, 63)
	return n, rest, err == nil
}

// isDelta reports whether a log line is a delta record.
func isDelta(ln []byte) bool { return bytes.HasPrefix(ln, []byte(deltaPrefix)) }
