package sim

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/escapement/escapement/kernel"
	"github.com/escapement/escapement/kernel/trace"
)

// TestReplay: a recorded trace reproduces byte for byte; an altered one is
// reported at its first differing line.
func TestReplay(t *testing.T) {
	s := byName(t, "cancel-reaches-descendants")
	var buf bytes.Buffer
	r := mustRun(t, s, Options{Trace: &buf})
	rr, err := Replay(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Identical || rr.SHA256 != r.TraceSHA256 || rr.FirstDiff != 0 {
		t.Fatalf("replay: %+v", rr)
	}
	lines := strings.Split(buf.String(), "\n")
	target := -1
	for i, l := range lines {
		if strings.Contains(l, `"text":"summarise the README"`) {
			target = i
			lines[i] = strings.Replace(l, "summarise the README", "summarise the LICENSE", 1)
			break
		}
	}
	if target < 0 {
		t.Fatal("no line to alter")
	}
	rr, err = Replay(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if rr.Identical || rr.FirstDiff != target+1 || !strings.Contains(rr.Want, "LICENSE") || !strings.Contains(rr.Got, "README") {
		t.Fatalf("altered trace: diff at %d (want %d): %+v", rr.FirstDiff, target+1, rr)
	}
	if _, err := Replay(strings.NewReader("not json\n")); err == nil {
		t.Fatal("garbage accepted")
	}
}

// TestReplayLive: a trace recorded by a live driver (here: events fed by
// hand, as the live driver does) is replayed into a fresh kernel and
// reproduces byte for byte.
func TestReplayLive(t *testing.T) {
	var buf bytes.Buffer
	lim := kernel.DefaultLimits()
	k := kernel.MustNew(kernel.Config{Limits: lim, RootName: "main"})
	w := trace.NewWriter(&buf, trace.Header{Source: "live", Name: "session", Limits: lim, RootName: "main"})
	feed := func(ev kernel.Event) []kernel.Effect {
		target := k.Target(ev)
		before := k.AgentState(target)
		effs := k.Step(ev)
		w.Step(k, ev, target, before, effs)
		return effs
	}
	effs := feed(kernel.Submit(time.Millisecond, "hi"))
	var req kernel.OpID
	for _, e := range effs {
		if e.Kind == kernel.EffStartLLM {
			req = e.Op
		}
	}
	feed(kernel.TextDelta(300*time.Millisecond, req, 1, "Hel"))
	feed(kernel.Cancel(400*time.Millisecond, kernel.Root))
	feed(kernel.LLMError(410*time.Millisecond, req, kernel.FailureCancelled, "context canceled"))
	w.Note(410*time.Millisecond, "user pressed Ctrl-C")
	if _, err := w.Close(410 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	rr, err := Replay(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Identical || rr.Source != "live" {
		t.Fatalf("live replay: %+v", rr)
	}
	cut := buf.Bytes()[:bytes.LastIndex(buf.Bytes()[:buf.Len()-1], []byte("\n"))+1]
	if _, err := Replay(bytes.NewReader(cut)); err == nil || !strings.Contains(err.Error(), "no end line") {
		t.Fatalf("cut trace: %v", err)
	}
}

// TestPerfettoSchema: the export of a depth-3 cancel scenario is valid
// trace-event JSON with one track per agent.
func TestPerfettoSchema(t *testing.T) {
	s := byName(t, "cancel-reaches-descendants")
	p := NewPerfetto(s.Name)
	r := mustRun(t, s, Options{Observe: p.Observe})
	var buf bytes.Buffer
	if err := p.Write(&buf, r.End); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	tracks := map[float64]string{}
	spans, instants := 0, 0
	for i, ev := range doc.TraceEvents {
		for _, k := range []string{"ph", "pid", "name"} {
			if _, ok := ev[k]; !ok {
				t.Fatalf("event %d lacks %q: %v", i, k, ev)
			}
		}
		ph, _ := ev["ph"].(string)
		if ph != "M" {
			if _, ok := ev["ts"].(float64); !ok {
				t.Fatalf("event %d: ts is not a number: %v", i, ev)
			}
			if _, ok := ev["tid"].(float64); !ok {
				t.Fatalf("event %d: tid is not a number: %v", i, ev)
			}
		}
		switch ph {
		case "M":
			if ev["name"] == "thread_name" {
				tracks[ev["tid"].(float64)] = ev["args"].(map[string]any)["name"].(string)
			}
		case "X":
			spans++
			if d, ok := ev["dur"].(float64); !ok || d < 0 {
				t.Fatalf("span without a duration: %v", ev)
			}
		case "i":
			instants++
		default:
			t.Fatalf("unexpected ph %q", ph)
		}
	}
	if len(tracks) != 3 {
		t.Fatalf("want one track per agent (3), got %v", tracks)
	}
	want := map[string]bool{"main": true, "main/task1": true, "main/task1/explore": true}
	for _, name := range tracks {
		if !want[name] {
			t.Fatalf("unexpected track %q", name)
		}
	}
	if spans < 6 || instants < 3 || !strings.Contains(buf.String(), `"interrupted"`) {
		t.Fatalf("spans=%d instants=%d", spans, instants)
	}
}
