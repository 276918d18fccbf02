package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
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
// trace-event JSON: a track per agent, a slice per derived span, nested as
// the spans are, and the interrupts as instants.
func TestPerfettoSchema(t *testing.T) {
	doc := perfettoOf(t, "cancel-reaches-descendants")
	tracks := map[float64]string{}
	names := map[string]int{}
	spans, instants, flows := 0, 0, 0
	for i, ev := range doc {
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
			names[ev["name"].(string)]++
			if d, ok := ev["dur"].(float64); !ok || d < 0 {
				t.Fatalf("span without a duration: %v", ev)
			}
		case "i":
			instants++
		case "s", "f":
			flows++
		default:
			t.Fatalf("unexpected ph %q", ph)
		}
	}
	want := map[string]bool{"main": true, "main/task1": true, "main/task1/explore": true}
	agents := map[string]bool{}
	for _, name := range tracks {
		agent, _, _ := strings.Cut(name, " (") // an agent's further tracks: "main/task1 (2)"
		if !want[agent] {
			t.Fatalf("unexpected track %q", name)
		}
		agents[agent] = true
	}
	if len(agents) != 3 {
		t.Fatalf("want the tracks of 3 agents, got %v", tracks)
	}
	for _, n := range []string{"invoke_agent main", "execute_tool delegate task1", "invoke_agent task1", "execute_tool delegate explore", "invoke_agent explore"} {
		if names[n] != 1 {
			t.Errorf("%d slices named %q, want 1 (all: %v)", names[n], n, names)
		}
	}
	if spans < 8 || instants < 3 || flows != 4 || !strings.Contains(fmt.Sprint(doc), "interrupted") {
		t.Fatalf("spans=%d instants=%d flows=%d", spans, instants, flows)
	}
}

// TestPerfettoNests: slices of one track nest (the format draws them as a
// stack), each inside its own parent span's slice or none — also where an
// agent's calls run side by side: they take tracks of their own.
func TestPerfettoNests(t *testing.T) {
	for _, name := range []string{"parallel-delegation-cancel", "cap-parallel-tools", "cut-request-outlives-turn", "tool-grace-holds-slot"} {
		type slice struct {
			from, to   float64
			id, parent float64
			name       string
		}
		byTid := map[float64][]slice{}
		for _, ev := range perfettoOf(t, name) {
			if ev["ph"] == "X" {
				ts, dur, args := ev["ts"].(float64), ev["dur"].(float64), ev["args"].(map[string]any)
				byTid[ev["tid"].(float64)] = append(byTid[ev["tid"].(float64)], slice{ts, ts + dur, args["escapement.span"].(float64), args["escapement.parent"].(float64), ev["name"].(string)})
			}
		}
		tracks := 0
		for tid, ss := range byTid {
			tracks++
			slices.SortFunc(ss, func(a, b slice) int {
				return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(b.to, a.to), cmp.Compare(a.id, b.id))
			})
			var open []slice
			for _, s := range ss {
				for len(open) > 0 && open[len(open)-1].to <= s.from && open[len(open)-1].id != s.parent {
					open = open[:len(open)-1]
				}
				if len(open) > 0 && (open[len(open)-1].to < s.to || open[len(open)-1].id != s.parent) {
					t.Errorf("%s: on track %v %s [%v, %v] is drawn inside %s [%v, %v], not its parent", name, tid, s.name, s.from, s.to, open[len(open)-1].name, open[len(open)-1].from, open[len(open)-1].to)
				}
				open = append(open, s)
			}
		}
		if name == "parallel-delegation-cancel" && tracks < 6 {
			t.Errorf("%s: %d tracks; three delegations side by side take three of the root's", name, tracks)
		}
	}
}

// perfettoOf is the trace events of the Perfetto export of a scenario.
func perfettoOf(t *testing.T, name string) []map[string]any {
	t.Helper()
	s := byName(t, name)
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
	return doc.TraceEvents
}
