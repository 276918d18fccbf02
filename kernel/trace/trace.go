// Package trace is escapement's JSON Lines trace format, written by the
// simulator and by the live driver alike, so a live session can be replayed
// in the simulator (record real, replay simulated).
//
// A trace is a header line, then one "step" line per Step, then an "end"
// line. A step line holds the step's virtual time, the event, its target
// agent's path and state before and after, and the effects the step
// produced, in order; an effect on another agent than the target names that
// agent's path. Notes (a fault injected, a permutation chosen) are lines of
// their own. Encoding is deterministic (fixed field order, no wall-clock
// time, no map iteration), so the same run gives the same bytes and the
// SHA-256 of those bytes identifies a run (I6).
//
// Format 2 nests a step's effects in its line; format 1 wrote one line per
// effect, repeating the step's head on each, for 18% more bytes to write and
// hash on every simulated step. Format 3 writes every limit of
// kernel.LimitTable in the header (the output caps among them) and the
// root's prior turn count of a resumed session. Format 4 adds approvals:
// the header's ask list, approval_timeout limit and a resumed session's
// grants, decision events and approval records (docs/semantics.md,
// "Approvals"); and token usage
// (cached and reasoning tokens on a stream's end, a request's usage on its
// op_ended record, a turn's total on turn_ended), reasoning riding on a
// stream's end and kept in messages, compaction (the compact event, the
// compact flag of a summarising request, its lifecycle records, summary
// messages) and the context_window and compact_percent limits
// (docs/semantics.md, "Usage", "Reasoning", "Compaction"); a format-3
// reader would rebuild such a run without them. It is also the first
// version whose every writer puts the agent cap and max_parallel_requests
// among the limits and may log a plain streamed chunk as a write-ahead
// log's delta record (adapters/wal). A reader refuses every other version:
// a file of another build is an error naming both versions, never a run
// rebuilt wrong. A header of a tree with agent profiles records them
// (profiles, root_profile), and a start_llm effect and a delegated record
// name their agent's profile (docs/semantics.md, "Profiles"): fields a
// trace without profiles leaves out.
package trace

import (
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
const FormatVersion = 4

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
	// Idempotent names the tools a recovery may run again
	// (kernel.Config.Idempotent), so a replay resolves a crash the same way.
	Idempotent []string `json:"idempotent,omitempty"`
	// Turns is how many turns the resumed root had already had
	// (kernel.Config.Turns), so a replay numbers turns the same way.
	Turns uint64 `json:"turns,omitempty"`
	// Ask names the tools whose calls wait for approval
	// (kernel.Config.Ask), so a replay asks the calls the run asked.
	Ask []string `json:"ask,omitempty"`
	// Grants are the session grants a resumed session started with
	// (kernel.Config.Grants), so a replay asks none of the calls they
	// cover.
	Grants []kernel.Grant `json:"grants,omitempty"`
	// DelegateTool is kernel.Config's, when not the default: a rebuild
	// from a write-ahead log needs every setting that shapes the effects.
	DelegateTool string `json:"delegate_tool,omitempty"`
	// Profiles and RootProfile are kernel.Config's: what each agent may
	// call and delegate to, and its system prompt, shape the run.
	Profiles    []kernel.Profile `json:"profiles,omitempty"`
	RootProfile string           `json:"root_profile,omitempty"`
	// Build names the binary that wrote the trace (for reproduction notes).
	Build string `json:"build,omitempty"`
}

// Record is one line after the header.
type Record struct {
	Type    string        `json:"type"` // "step", "note" or "end"
	Step    int           `json:"step"`
	At      string        `json:"at"`
	Agent   string        `json:"agent,omitempty"`
	Before  string        `json:"before,omitempty"`
	After   string        `json:"after,omitempty"`
	Event   *kernel.Event `json:"event,omitempty"`
	Effects []Effect      `json:"effects,omitempty"`
	// Note carries writer-side annotations (sim: a same-instant permutation
	// choice, an injected fault).
	Note string `json:"note,omitempty"`
}

// Effect is one effect of a step. Path is its agent's path when that is not
// the step's agent (a cancel reaching a child, a child spawned); empty, the
// effect is on the step's agent (or on none, agent -1).
type Effect struct {
	Path string `json:"path,omitempty"`
	kernel.Effect
}

// Writer writes a trace and hashes what it wrote. Records are encoded
// straight into its own buffer, which goes to the hash (and the file) in
// blocks of flushAt bytes (hashFlushAt when it only hashes).
type Writer struct {
	sink io.Writer // the file, if any
	h    hash.Hash
	buf  []byte
	// flushAt is the buffered size at which it hashes and writes out.
	flushAt int
	step    int
	err     error
	// atDigits is the current step's time formatted in nanoseconds (a
	// buffer reused step after step).
	atDigits []byte
	// agents caches what the lines of recently named agents write (an
	// agent's path never changes while the tree holds it); slot = id mod
	// agentCache, so a long-lived tree's writer keeps a few, not one per
	// agent it ever held. It grows as ids come, up to agentCache slots.
	agents []agentText
}

// agentCache is how many agents' texts a writer keeps.
const agentCache = 64

// agentText is one agent's path as the trace writes it.
type agentText struct {
	id    kernel.AgentID // +1: the zero slot holds no agent
	field []byte         // `,"agent":PATH`, for step lines
	open  []byte         // `{"path":PATH,"kind":"`, opening an effect on another agent
}

// agent is id's text, or nil when id has no path (NoAgent, an id the tree
// does not know, or an agent it has freed: no field is written, as
// encoding/json omits an empty Record.Agent). The tree is asked every time
// and the cache only saves the encoding, so a line is the same whatever
// the writer wrote before (a writer that continues a log after a recovery
// writes what a replay from the start writes).
func (t *Writer) agent(tree Tree, id kernel.AgentID) *agentText {
	if id < 0 {
		return nil
	}
	path := tree.AgentPath(id)
	if path == "" {
		return nil
	}
	slot := int(id) % agentCache
	for slot >= len(t.agents) {
		t.agents = append(t.agents, agentText{})
	}
	a := &t.agents[slot]
	if a.id != id+1 {
		a.id = id + 1
		// Both texts in one allocation (a path rarely needs escaping).
		b := make([]byte, 0, 2*len(path)+32)
		b = kernel.AppendJSONString(append(b, `,"agent":`...), path)
		a.field = b[:len(b):len(b)]
		b = kernel.AppendJSONString(append(b, `{"path":`...), path)
		a.open = append(b, `,"kind":"`...)[len(a.field):]
	}
	return a
}

// NewWriter writes hdr and returns a writer for the steps. w may be
// io.Discard when only the hash is wanted.
func NewWriter(w io.Writer, hdr Header) *Writer {
	tw := &Writer{h: sha256.New(), flushAt: flushAt}
	size := flushAt + 4096
	if w != io.Discard {
		tw.sink = w
	} else {
		// Only hashed (a simulator's run): the hash takes small blocks
		// as well as large ones, so the buffer need only hold the header
		// and a step or two, less garbage per run.
		tw.flushAt = hashFlushAt
		size = hashFlushAt + 2048 + len(hdr.Scenario) + len(hdr.System) + len(hdr.ChildSystem)
	}
	hdr.Type, hdr.Format = "header", FormatVersion
	tw.buf, tw.err = appendHeader(make([]byte, 0, size), &hdr)
	return tw
}

// ContinueWriter returns a writer for a trace whose header and first steps
// step lines w already holds (a write-ahead log appended to after a
// recovery): it writes no header, and numbers its steps from steps+1. Its
// hash covers only what it writes.
func ContinueWriter(w io.Writer, steps int) *Writer {
	tw := &Writer{h: sha256.New(), step: steps, buf: make([]byte, 0, flushAt+4096), flushAt: flushAt}
	if w != io.Discard {
		tw.sink = w
	}
	return tw
}

// HeaderOf records cfg — everything of a kernel configuration that shapes
// its effects — in a header, so Config can rebuild it.
func HeaderOf(cfg kernel.Config) Header {
	h := Header{Limits: cfg.Limits, RootName: cfg.RootName, System: cfg.System, ChildSystem: cfg.ChildSystem,
		History: cfg.History, Idempotent: cfg.Idempotent, Turns: cfg.Turns, Ask: cfg.Ask, Grants: cfg.Grants, Profiles: cfg.Profiles, RootProfile: cfg.RootProfile}
	if cfg.DelegateTool != kernel.DefaultDelegateTool {
		h.DelegateTool = cfg.DelegateTool
	}
	return h
}

// Config is the kernel configuration h records (HeaderOf's inverse): a
// fresh kernel built from it and fed the trace's events reproduces the
// trace's effects.
func (h Header) Config() kernel.Config {
	return kernel.Config{Limits: h.Limits, RootName: h.RootName, System: h.System, ChildSystem: h.ChildSystem,
		History: h.History, Idempotent: h.Idempotent, Turns: h.Turns, Ask: h.Ask, Grants: h.Grants, DelegateTool: h.DelegateTool,
		Profiles: h.Profiles, RootProfile: h.RootProfile}
}

// appendHeader appends h as encoding/json writes it with HTML escaping off
// (TestEncoderMatchesJSON compares). Every simulated run writes one, and
// its embedded scenario is most of a short run's bytes, so the fields are
// written by hand; the rare structured ones (options, a resumed history)
// go through encoding/json.
func appendHeader(b []byte, h *Header) ([]byte, error) {
	e := enc{b: b}
	e.lit(`{"type":`)
	e.str(h.Type)
	e.lit(`,"format":`)
	e.i64(int64(h.Format))
	e.lit(`,"source":`)
	e.str(h.Source)
	e.lit(`,"name":`)
	e.str(h.Name)
	if h.Seed != 0 {
		e.lit(`,"seed":`)
		e.u64(h.Seed)
	}
	if h.Scenario != "" {
		e.lit(`,"scenario":`)
		e.str(h.Scenario)
	}
	if len(h.Options) > 0 {
		e.lit(`,"options":`)
		if err := e.json(h.Options); err != nil {
			return b, err
		}
	}
	for i, spec := range kernel.LimitSpecs() {
		if i == 0 {
			e.lit(`,"limits":{`)
		} else {
			e.b = append(e.b, ',')
		}
		e.b = append(e.b, '"')
		e.lit(spec.Name)
		e.lit(`":`)
		e.i64(spec.Get(h.Limits))
	}
	e.b = append(e.b, '}')
	for _, f := range [...]struct{ key, v string }{
		{`,"root_name":`, h.RootName}, {`,"system":`, h.System}, {`,"child_system":`, h.ChildSystem},
	} {
		if f.v != "" {
			e.lit(f.key)
			e.str(f.v)
		}
	}
	if len(h.History) > 0 {
		e.lit(`,"history":`)
		if err := e.json(h.History); err != nil {
			return b, err
		}
	}
	if len(h.Idempotent) > 0 {
		e.lit(`,"idempotent":`)
		if err := e.json(h.Idempotent); err != nil {
			return b, err
		}
	}
	if h.Turns != 0 {
		e.lit(`,"turns":`)
		e.u64(h.Turns)
	}
	if len(h.Ask) > 0 {
		e.lit(`,"ask":`)
		if err := e.json(h.Ask); err != nil {
			return b, err
		}
	}
	if len(h.Grants) > 0 {
		e.lit(`,"grants":`)
		if err := e.json(h.Grants); err != nil {
			return b, err
		}
	}
	if h.DelegateTool != "" {
		e.lit(`,"delegate_tool":`)
		e.str(h.DelegateTool)
	}
	if len(h.Profiles) > 0 {
		e.lit(`,"profiles":`)
		if err := e.json(h.Profiles); err != nil {
			return b, err
		}
	}
	if h.RootProfile != "" {
		e.lit(`,"root_profile":`)
		e.str(h.RootProfile)
	}
	if h.Build != "" {
		e.lit(`,"build":`)
		e.str(h.Build)
	}
	e.b = append(e.b, '}', '\n')
	return e.b, nil
}

// flushAt is the buffered size at which a writer with a file hashes and
// writes out: large enough for efficient writes, small enough that a short
// run does not allocate much. hashFlushAt is a writer's that only hashes.
const (
	flushAt     = 8 << 10
	hashFlushAt = 1 << 10
)

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

// mark appends a note or end line.
func (t *Writer) mark(typ string, at time.Duration, note string) {
	t.buf = appendMark(t.buf, typ, t.step, at, note)
	if len(t.buf) >= t.flushAt {
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
// This runs on every simulated step, so the line is written straight into
// the buffer; the bytes are exactly what encoding/json writes for the
// equivalent Record (TestEncoderMatchesJSON).
func (t *Writer) Step(tree Tree, ev kernel.Event, target kernel.AgentID, before fsm.State, effects []kernel.Effect) {
	t.step++
	t.atDigits = strconv.AppendInt(t.atDigits[:0], int64(ev.At), 10)
	e := enc{b: t.buf, atNS: int64(ev.At), atDigits: t.atDigits}
	e.lit(`{"type":"step","step":`)
	e.i64(int64(t.step))
	e.lit(`,"at":"`)
	e.b = appendDuration(e.b, ev.At)
	e.b = append(e.b, '"')
	if target != kernel.NoAgent {
		if a := t.agent(tree, target); a != nil {
			e.b = append(e.b, a.field...)
		}
		e.lit(`,"before":"`)
		e.lit(before.String())
		e.lit(`","after":"`)
		e.lit(tree.AgentState(target).String())
		e.lit(`","event":{"kind":"`)
	} else {
		e.lit(`,"event":{"kind":"`)
	}
	e.event(&ev)
	if len(effects) > 0 {
		e.lit(`,"effects":[`)
		for i := range effects {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			// An effect on another agent than the step's names it (Effect).
			if a := t.agent(tree, effects[i].Agent); a != nil && effects[i].Agent != target {
				e.b = append(e.b, a.open...)
			} else {
				e.lit(`{"kind":"`)
			}
			e.effect(&effects[i])
		}
		e.b = append(e.b, ']')
	}
	e.lit("}\n")
	t.buf = e.b
	if len(t.buf) >= t.flushAt {
		t.flush()
	}
}

// Skip counts a step recorded elsewhere (a write-ahead log writes a
// streamed chunk as a record of its own), so the next step line is
// numbered after it.
func (t *Writer) Skip() { t.step++ }

// Flush writes out (and hashes) what is buffered and returns the first
// write error. A live run calls it after every step, so its file holds
// every step recorded so far whatever ends the process; the simulator
// never calls it (its trace goes out in flushAt blocks). Flushing changes
// neither the bytes nor the hash.
func (t *Writer) Flush() error {
	t.flush()
	return t.err
}

// Note records an annotation at time at.
func (t *Writer) Note(at time.Duration, note string) {
	t.mark("note", at, note)
}

// Close writes the end line, flushes, and returns the SHA-256 of every byte
// written (hex) or the first write error.
func (t *Writer) Close(at time.Duration) (string, error) {
	t.mark("end", at, "")
	t.flush()
	if t.err != nil {
		return "", fmt.Errorf("write trace: %w", t.err)
	}
	return hex.EncodeToString(t.h.Sum(nil)), nil
}

// ReadHeader decodes a trace's first line.
func ReadHeader(line []byte) (Header, error) {
	// A limit the header does not name has its default (bounded, as every
	// limit is): a header written before that limit existed replays with it.
	h := Header{Limits: kernel.DefaultLimits()}
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
