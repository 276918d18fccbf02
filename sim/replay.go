package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
	"github.com/escapement/escapement/sim/scenario"
)

// ReplayResult says whether a trace reproduced byte for byte.
type ReplayResult struct {
	Name   string
	Source string
	Lines  int
	// Identical is true when the re-run wrote exactly the recorded bytes.
	Identical bool
	// FirstDiff is the 1-based line of the first difference (0 when none);
	// Want is the recorded line, Got the re-run's.
	FirstDiff int
	Want, Got string
	SHA256    string
	// End is the virtual time the run ended at.
	End time.Duration
}

// MaxTraceLine bounds one trace line when reading.
const MaxTraceLine = 16 << 20

// MaxTraceBytes bounds a trace Replay reads.
const MaxTraceBytes = 1 << 30

// Replay re-runs what a trace recorded and compares the bytes. A simulator
// trace names its scenario (embedded in the header), which is run again with
// the same options; a live trace is replayed by feeding its recorded events
// to a fresh kernel with the recorded configuration (record real, replay
// simulated). The re-run has DefaultMemoryBudget (ReplayWithin).
func Replay(r io.Reader) (*ReplayResult, error) { return ReplayWithin(r, DefaultMemoryBudget) }

// ReplayWithin is Replay with a memory budget (Options.MemoryBudget): a
// trace is a small file that can ask for a huge run — its header's
// scenario and limits are whatever was written there — so the re-run, a
// simulator's or a live trace's, stops with ErrBudget once it holds that
// much by the simulator's count (budget.go). A limit the header leaves out
// has its bounded default.
func ReplayWithin(r io.Reader, memoryBudget int64) (*ReplayResult, error) {
	return ReplayObserved(r, memoryBudget, nil)
}

// ReplayObserved is ReplayWithin with every replayed step shown to observe
// (nil: none), as Options.Observe sees a simulated run's — a Perfetto
// timeline of a live trace, for one (escapement sim replay --perfetto).
func ReplayObserved(r io.Reader, memoryBudget int64, observe func(StepInfo)) (*ReplayResult, error) {
	recorded, err := io.ReadAll(io.LimitReader(r, MaxTraceBytes))
	if err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	first, _, _ := bytes.Cut(recorded, []byte("\n"))
	hdr, err := trace.ReadHeader(first)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	var end time.Duration
	switch hdr.Source {
	case "sim":
		s, err := scenario.Load("trace:"+hdr.Name, []byte(hdr.Scenario))
		if err != nil {
			return nil, fmt.Errorf("trace header scenario: %w", err)
		}
		opt, err := optionsFromHeader(hdr.Options)
		if err != nil {
			return nil, err
		}
		opt.Trace, opt.Build, opt.Idempotent, opt.MemoryBudget, opt.Observe = &buf, hdr.Build, hdr.Idempotent, memoryBudget, observe
		res, err := Run(s, opt)
		if err != nil {
			return nil, err
		}
		end = res.End
	case "live":
		if end, err = replayLive(hdr, recorded, &buf, budget{limit: memoryBudget}, observe); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("trace header: unknown source %q", hdr.Source)
	}
	res := compareTraces(hdr, recorded, buf.Bytes())
	res.End = end
	return res, nil
}

// replayLive feeds a live trace's events to a fresh kernel, writing a new
// trace with the same header, notes and end line, within budget b, and
// showing each step to observe (nil: none). It returns the end line's time.
func replayLive(hdr trace.Header, recorded []byte, out io.Writer, b budget, observe func(StepInfo)) (time.Duration, error) {
	k, err := kernel.New(hdr.Config())
	if err != nil {
		return 0, fmt.Errorf("trace header config: %w", err)
	}
	w := trace.NewWriter(out, hdr)
	sc := bufio.NewScanner(bytes.NewReader(recorded))
	sc.Buffer(make([]byte, 0, 64<<10), MaxTraceLine)
	sc.Scan() // header
	line := 1
	for sc.Scan() {
		line++
		rec, err := trace.ReadRecord(sc.Bytes())
		if err != nil {
			return 0, fmt.Errorf("trace line %d: %w", line, err)
		}
		switch rec.Type {
		case "step":
			if rec.Event == nil {
				return 0, fmt.Errorf("trace line %d: step record without event", line)
			}
			ev := *rec.Event
			if ev.At < k.Now() {
				return 0, fmt.Errorf("trace line %d: time goes backwards (%v < %v)", line, ev.At, k.Now())
			}
			target := k.Target(ev)
			before := k.AgentState(target)
			effs := k.Step(ev)
			w.Step(k, ev, target, before, effs)
			if observe != nil {
				observe(StepInfo{Event: ev, Target: target, Before: before, After: k.AgentState(target), Effects: effs, Core: kernelCore{k}})
			}
			if b.step(&ev, effs, k.NumAgents()); b.spent() {
				return 0, b.err(hdr.Name, line-1)
			}
		case "note":
			at, err := parseAt(rec.At)
			if err != nil {
				return 0, fmt.Errorf("trace line %d: %w", line, err)
			}
			w.Note(at, rec.Note)
		case "end":
			at, err := parseAt(rec.At)
			if err != nil {
				return 0, fmt.Errorf("trace line %d: %w", line, err)
			}
			_, err = w.Close(at)
			return at, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read trace: %w", err)
	}
	return 0, errors.New("trace has no end line (the recording was cut short)")
}

func compareTraces(hdr trace.Header, want, got []byte) *ReplayResult {
	res := &ReplayResult{Name: hdr.Name, Source: hdr.Source}
	res.SHA256 = sha256Hex(got)
	wl := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
	gl := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
	res.Lines = len(wl)
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			res.FirstDiff, res.Want, res.Got = i+1, w, g
			return res
		}
	}
	res.Identical = bytes.Equal(want, got)
	if !res.Identical {
		res.FirstDiff = len(wl) + 1
		res.Want, res.Got = "(trailing bytes differ)", ""
	}
	return res
}
