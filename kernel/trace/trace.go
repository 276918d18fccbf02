// Package trace is escapement's JSON Lines trace format, written by the
// simulator and by the live driver alike, so a live session can be replayed
// in the simulator (record real, replay simulated).
//
// A trace is a header line, then for every Step one "event" line (the event,
// its target agent's path and state before and after) followed by one
// "effect" line per effect, then an "end" line. Encoding is deterministic
// (fixed field order, no wall-clock time, no map iteration), so the same run
// gives the same bytes and the SHA-256 of those bytes identifies a run (I6).
package trace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"time"

	"github.com/escapement/escapement/fsm"
	"github.com/escapement/escapement/kernel"
)

// FormatVersion is written in every header; readers refuse other versions.
const FormatVersion = 1

// Header is the first line of a trace.
type Header struct {
	Type   string `json:"type"` // "header"
	Format int    `json:"format"`
	// Source is "sim" or "live".
	Source string `json:"source"`
	// Name identifies the run: the scenario's name, or the live session's.
	Name string `json:"name"`
	// Seed is the scenario's seed (sim).
	Seed uint64 `json:"seed,omitempty"`
	// Scenario is the scenario's canonical source, so a trace can be
	// re-run without the file it came from (sim).
	Scenario string `json:"scenario,omitempty"`
	// Options records run options that change the run (sim: permutation mode).
	Options map[string]string `json:"options,omitempty"`
	// Limits and the rest of the kernel configuration that shapes the run.
	Limits      kernel.Limits `json:"limits"`
	RootName    string        `json:"root_name,omitempty"`
	System      string        `json:"system,omitempty"`
	ChildSystem string        `json:"child_system,omitempty"`
	// History is the root's seeded history (a resumed live session), so a
	// replay starts from the same transcript.
	History []kernel.Message `json:"history,omitempty"`
	// Build names the binary that wrote the trace (for reproduction notes).
	Build string `json:"build,omitempty"`
}

// Record is one line after the header.
type Record struct {
	Type   string         `json:"type"` // "event", "effect" or "end"
	Step   int            `json:"step"`
	At     string         `json:"at"`
	Agent  string         `json:"agent,omitempty"`
	Before string         `json:"before,omitempty"`
	After  string         `json:"after,omitempty"`
	Event  *kernel.Event  `json:"event,omitempty"`
	Effect *kernel.Effect `json:"effect,omitempty"`
	// Note carries writer-side annotations (sim: a same-instant permutation
	// choice, an injected fault).
	Note string `json:"note,omitempty"`
}

// Writer writes a trace and hashes what it wrote. Records are encoded
// straight into its own buffer, which goes to the hash (and the file) in
// blocks of flushAt bytes.
type Writer struct {
	sink io.Writer // the file, if any
	h    hash.Hash
	buf  []byte
	step int
	err  error
	// atDigits is the current step's time formatted in nanoseconds.
	atNS     int64
	atDigits []byte
	// head is the current step's `,"step":N,"at":"D"`, shared by its lines.
	head []byte
	// paths caches each agent's path and its JSON form (paths never change
	// once an agent is spawned).
	paths     []string
	pathsJSON [][]byte
	fields    [][]byte // `,"agent":` and the path, for Step's lines
}

func (t *Writer) path(tree Tree, id kernel.AgentID) (string, []byte) {
	if id < 0 {
		return "", nil
	}
	for int(id) >= len(t.paths) {
		t.paths = append(t.paths, "")
		t.pathsJSON = append(t.pathsJSON, nil)
		t.fields = append(t.fields, nil)
	}
	if t.paths[id] == "" {
		t.paths[id] = tree.AgentPath(id)
		t.pathsJSON[id] = kernel.AppendJSONString(nil, t.paths[id])
	}
	return t.paths[id], t.pathsJSON[id]
}

// agentField is `,"agent":PATH` for id, or nothing when the record has no
// agent (as appendRecord omits an empty Agent).
func (t *Writer) agentField(tree Tree, id kernel.AgentID) []byte {
	path, agentJSON := t.path(tree, id)
	if path == "" {
		return nil
	}
	if t.fields[id] == nil {
		t.fields[id] = append([]byte(`,"agent":`), agentJSON...)
	}
	return t.fields[id]
}

// NewWriter writes hdr and returns a writer for the steps. w may be
// io.Discard when only the hash is wanted.
func NewWriter(w io.Writer, hdr Header) *Writer {
	tw := &Writer{h: sha256.New()}
	if w != io.Discard {
		tw.sink = w
	}
	hdr.Type, hdr.Format = "header", FormatVersion
	// The header is encoded straight into the writer's buffer.
	b := bytes.NewBuffer(make([]byte, 0, flushAt+4096))
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(hdr); err != nil {
		tw.err = err
	}
	tw.buf = b.Bytes()
	return tw
}

// flushAt is the buffered size at which the writer hashes and writes out.
const flushAt = 8 << 10 // large enough for efficient hashing and writes, small enough that a short run does not allocate much

func (t *Writer) flush() {
	if len(t.buf) == 0 {
		return
	}
	t.h.Write(t.buf)
	if t.sink != nil && t.err == nil {
		_, t.err = t.sink.Write(t.buf)
	}
	t.buf = t.buf[:0]
}

// record appends one record with the hand-written encoder (encode.go).
func (t *Writer) record(r *Record, agentJSON []byte, atText []byte) {
	t.buf = appendRecord(t.buf, r, agentJSON, t.atNS, t.atDigits, atText)
	if len(t.buf) >= flushAt {
		t.flush()
	}
}

// Tree names agents for trace lines; *kernel.Kernel implements it.
type Tree interface {
	AgentPath(kernel.AgentID) string
	AgentState(kernel.AgentID) fsm.State
}

// Step records one Step: ev as fed, its target's path and state before (as
// captured by the caller before Step) and after, and the effects.
//
// This runs on every simulated step, so the lines are written straight into
// the buffer rather than through Record: the step's shared head (step number
// and time) is formatted once, and the event and every effect line copy it.
// The bytes are exactly appendRecord's (TestEncoderMatchesJSON).
func (t *Writer) Step(tree Tree, ev kernel.Event, target kernel.AgentID, before fsm.State, effects []kernel.Effect) {
	t.step++
	t.atNS = int64(ev.At)
	t.atDigits = strconv.AppendInt(t.atDigits[:0], t.atNS, 10)
	t.head = append(t.head[:0], `,"step":`...)
	t.head = strconv.AppendInt(t.head, int64(t.step), 10)
	t.head = append(t.head, `,"at":"`...)
	t.head = appendDuration(t.head, ev.At)
	t.head = append(t.head, '"')
	e := enc{b: t.buf, atNS: t.atNS, atDigits: t.atDigits}
	e.lit(`{"type":"event"`)
	e.b = append(e.b, t.head...)
	if target != kernel.NoAgent {
		e.b = append(e.b, t.agentField(tree, target)...)
		e.lit(`,"before":"`)
		e.lit(before.String())
		e.lit(`","after":"`)
		e.lit(tree.AgentState(target).String())
		e.lit(`","event":{"kind":"`)
	} else {
		e.lit(`,"event":{"kind":"`)
	}
	e.event(&ev)
	e.lit("}\n")
	for i := range effects {
		e.lit(`{"type":"effect"`)
		e.b = append(e.b, t.head...)
		e.b = append(e.b, t.agentField(tree, effects[i].Agent)...)
		e.lit(`,"effect":{"kind":"`)
		e.effect(&effects[i])
		e.lit("}\n")
	}
	t.buf = e.b
	if len(t.buf) >= flushAt {
		t.flush()
	}
}

// Note records an annotation at time at.
func (t *Writer) Note(at time.Duration, note string) {
	t.record(&Record{Type: "note", Step: t.step, Note: note}, nil, appendDuration(nil, at))
}

// Close writes the end line, flushes, and returns the SHA-256 of every byte
// written (hex) or the first write error.
func (t *Writer) Close(at time.Duration) (string, error) {
	t.record(&Record{Type: "end", Step: t.step}, nil, appendDuration(nil, at))
	t.flush()
	if t.err != nil {
		return "", fmt.Errorf("write trace: %w", t.err)
	}
	return hex.EncodeToString(t.h.Sum(nil)), nil
}

// ReadHeader decodes a trace's first line.
func ReadHeader(line []byte) (Header, error) {
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return h, fmt.Errorf("trace header: %w", err)
	}
	if h.Type != "header" {
		return h, errors.New("trace header: first line is not a header")
	}
	if h.Format != FormatVersion {
		return h, fmt.Errorf("trace header: format %d, this build reads %d", h.Format, FormatVersion)
	}
	return h, nil
}

// ReadRecord decodes one line after the header.
func ReadRecord(line []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(line, &r); err != nil {
		return r, fmt.Errorf("trace record: %w", err)
	}
	return r, nil
}
