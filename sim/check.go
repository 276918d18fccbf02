package sim

import (
	"bytes"

	"github.com/escapement/escapement/kernel/spans"
	"github.com/escapement/escapement/kernel/trace"
	"github.com/escapement/escapement/sim/scenario"
)

// Keep names what Check keeps of a run besides its Result.
type Keep struct {
	// Trace keeps the JSON Lines trace; Perfetto the run's spans as a
	// Perfetto/Chrome trace-event timeline.
	Trace, Perfetto bool
}

// Checked is one scenario run by Check.
type Checked struct {
	*Result
	// Trace and Perfetto are what Keep asked for (nil otherwise).
	Trace, Perfetto []byte
}

// Check runs s with opt as `escapement sim` does: with recheck a second
// time, the two traces held equal (I6, Recheck), keeping of the first run
// what keep asks for. opt's Trace and Observe are Check's own.
func Check(s *scenario.Scenario, opt Options, recheck bool, keep Keep) (*Checked, error) {
	var traceBuf bytes.Buffer
	if keep.Trace {
		opt.Trace = &traceBuf
	}
	var pf *Perfetto
	if keep.Perfetto {
		pf = NewPerfetto(s.Name)
		opt.Observe = pf.Observe
	}
	res, err := Run(s, opt)
	if err != nil {
		return nil, err
	}
	if recheck {
		if err := Recheck(s, opt, res); err != nil {
			return nil, err
		}
	}
	c := &Checked{Result: res}
	if keep.Trace {
		c.Trace = traceBuf.Bytes()
	}
	if pf != nil {
		var buf bytes.Buffer
		if err := pf.Write(&buf, res.End); err != nil {
			return nil, err
		}
		c.Perfetto = buf.Bytes()
	}
	return c, nil
}

// ReplayTimeline is ReplayWithin that also writes the replayed run's spans
// (the ones a live run exports over OpenTelemetry) as a Perfetto timeline,
// for a live trace as for a simulated one, configured as the trace's
// header says (nil timeline when perfetto is false).
func ReplayTimeline(data []byte, memoryBudget int64, perfetto bool) (res *ReplayResult, timeline []byte, err error) {
	var pf *Perfetto
	var observe func(StepInfo)
	if perfetto {
		first, _, _ := bytes.Cut(data, []byte("\n"))
		hdr, err := trace.ReadHeader(first)
		if err != nil {
			return nil, nil, err
		}
		cfg := hdr.Config()
		pf = NewPerfetto(hdr.Name).WithSpans(spans.Config{RootName: cfg.RootName, DelegateTool: cfg.DelegateTool})
		observe = pf.Observe
	}
	res, err = ReplayObserved(bytes.NewReader(data), memoryBudget, observe)
	if err != nil || pf == nil {
		return res, nil, err
	}
	var buf bytes.Buffer
	if err := pf.Write(&buf, res.End); err != nil {
		return nil, nil, err
	}
	return res, buf.Bytes(), nil
}
